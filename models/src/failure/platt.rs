//! Platt scaling: a score s becomes P(fail) = σ(a·s + b), with a and b fit
//! by weighted maximum likelihood (Newton's method) on a held-out split.
//! Weights restore the full data's class balance after negatives were
//! subsampled, so the probabilities are calibrated for the real fleet.

use serde::{Deserialize, Serialize};

/// A fitted Platt map.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Platt {
    pub a: f64,
    pub b: f64,
}

impl Platt {
    pub const IDENTITY: Platt = Platt { a: 1.0, b: 0.0 };

    #[inline]
    pub fn apply(&self, s: f64) -> f64 {
        sigmoid(self.a * s + self.b)
    }

    /// Fits on scores `s`, labels `y` and weights `w`. Uses Platt's
    /// smoothed targets so that separable data gives finite parameters.
    pub fn fit(s: &[f64], y: &[u8], w: &[f32]) -> Platt {
        let (mut np, mut nn) = (0.0, 0.0);
        for (yi, wi) in y.iter().zip(w) {
            if *yi == 1 {
                np += f64::from(*wi);
            } else {
                nn += f64::from(*wi);
            }
        }
        if np <= 0.0 || nn <= 0.0 {
            return Platt::IDENTITY;
        }
        let (tp, tn) = ((np + 1.0) / (np + 2.0), 1.0 / (nn + 2.0));
        let (mut a, mut b) = (1.0, 0.0);
        for _ in 0..50 {
            let (mut g_a, mut g_b, mut h_aa, mut h_ab, mut h_bb) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for ((si, yi), wi) in s.iter().zip(y).zip(w) {
                let t = if *yi == 1 { tp } else { tn };
                let p = sigmoid(a * si + b);
                let wi = f64::from(*wi);
                let d = wi * (p - t);
                let h = wi * (p * (1.0 - p)).max(1e-12);
                g_a += d * si;
                g_b += d;
                h_aa += h * si * si;
                h_ab += h * si;
                h_bb += h;
            }
            let (h_aa, h_bb) = (h_aa + 1e-9, h_bb + 1e-9);
            let det = h_aa * h_bb - h_ab * h_ab;
            if det.abs() <= 1e-18 || det.is_nan() {
                break;
            }
            let da = (h_bb * g_a - h_ab * g_b) / det;
            let db = (h_aa * g_b - h_ab * g_a) / det;
            a -= da;
            b -= db;
            if da.abs() < 1e-10 && db.abs() < 1e-10 {
                break;
            }
        }
        if a.is_finite() && b.is_finite() {
            Platt { a, b }
        } else {
            Platt::IDENTITY
        }
    }
}

#[inline]
pub fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_known_map() {
        // Scores whose true P(y=1) is σ(2s − 1), as expected counts.
        let (mut s, mut y, mut w) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..=40 {
            let si = -3.0 + 0.15 * f64::from(i);
            let p = sigmoid(2.0 * si - 1.0);
            s.extend([si, si]);
            y.extend([1, 0]);
            w.extend([(1000.0 * p) as f32, (1000.0 * (1.0 - p)) as f32]);
        }
        let m = Platt::fit(&s, &y, &w);
        assert!(
            (m.a - 2.0).abs() < 0.05 && (m.b + 1.0).abs() < 0.05,
            "{m:?}"
        );
    }
}
