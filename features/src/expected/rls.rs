//! Recursive least squares with exponential forgetting, on ndarray views of
//! fixed-size storage (no allocation per update). The learner behind the
//! feature stage's expected-value models.
//!
//! Standard RLS (Haykin, *Adaptive Filter Theory*, ch. 10): gain
//! `k = P x / (λ + xᵀ P x)`, weights `w += k (y − wᵀx)`, covariance
//! `P = (P − k xᵀ P) / λ`. Two guards keep it healthy on a fleet's data:
//! outliers beyond `GATE` residual sigmas do not move the weights (a
//! degrading GPU must not teach the model that hot is normal), and the
//! covariance is rescaled when a direction that the data never excites winds
//! up under forgetting.

use ndarray::linalg::general_mat_vec_mul;
use ndarray::{ArrayView1, ArrayViewMut1, ArrayViewMut2, Zip};
use serde::{Deserialize, Serialize};

/// Largest number of regressors.
pub const MAX_DIM: usize = 4;

/// Initial covariance: a weak prior around zero weights.
const DELTA: f64 = 1_000.0;
/// Diagonal bound of `P` against wind-up.
const MAX_P: f64 = 10_000.0;
/// Residuals beyond this many sigmas do not update the weights.
const GATE: f64 = 4.0;
/// Weight of a new squared residual in the residual variance.
const VAR_ALPHA: f64 = 0.02;
/// Floor of the residual variance used by the gate (units²).
const VAR_FLOOR: f64 = 0.25;

/// One online linear regression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rls {
    dim: u8,
    w: [f64; MAX_DIM],
    p: [f64; MAX_DIM * MAX_DIM],
    /// Updates applied or gated.
    pub n: u32,
    /// EWMA of the squared residual (clamped at the gate).
    pub resid_var: f64,
}

impl Rls {
    /// A regression on `dim` regressors (the first usually a constant 1).
    pub fn new(dim: usize) -> Self {
        debug_assert!((1..=MAX_DIM).contains(&dim));
        let mut p = [0.0; MAX_DIM * MAX_DIM];
        for i in 0..dim {
            p[i * dim + i] = DELTA;
        }
        Rls {
            dim: dim as u8,
            w: [0.0; MAX_DIM],
            p,
            n: 0,
            resid_var: f64::NAN,
        }
    }

    /// The prediction `wᵀx` (uses the first `dim` entries of `x`). Every
    /// sample predicts four times, so this is a plain loop rather than
    /// ndarray views (whose set-up cost more than the four products); it
    /// adds in the same order from the same zero as ndarray's `dot` on
    /// fewer than eight elements, so the result is the same to the bit.
    #[inline]
    pub fn predict(&self, x: &[f64; MAX_DIM]) -> f64 {
        let d = usize::from(self.dim);
        let mut sum = 0.0;
        for (w, x) in self.w[..d].iter().zip(&x[..d]) {
            sum += w * x;
        }
        sum
    }

    /// Learns from one observation. Returns false when it was gated out or
    /// numerically unusable.
    pub fn update(&mut self, x: &[f64; MAX_DIM], y: f64, lambda: f64, warmup: u32) -> bool {
        let d = usize::from(self.dim);
        if !y.is_finite() || x[..d].iter().any(|v| !v.is_finite()) {
            return false;
        }
        let e = y - self.predict(x);
        let e2 = e * e;
        let var = self.resid_var;
        self.n = self.n.saturating_add(1);
        let gated = self.n > warmup && var.is_finite() && e2 > GATE * GATE * var.max(VAR_FLOOR);
        let e2c = if var.is_finite() && self.n > warmup {
            e2.min(GATE * GATE * var.max(VAR_FLOOR))
        } else {
            e2
        };
        self.resid_var = if var.is_finite() {
            var + VAR_ALPHA * (e2c - var)
        } else {
            e2c
        };
        if gated {
            return false;
        }
        let xv = ArrayView1::from(&x[..d]);
        let mut px = [0.0; MAX_DIM];
        let Ok(mut p) = ArrayViewMut2::from_shape((d, d), &mut self.p[..d * d]) else {
            return false;
        };
        {
            let mut pxv = ArrayViewMut1::from(&mut px[..d]);
            general_mat_vec_mul(1.0, &p, &xv, 0.0, &mut pxv);
        }
        let denom = lambda + xv.dot(&ArrayView1::from(&px[..d]));
        if !(denom.is_finite() && denom > 1e-12) {
            return false;
        }
        for (w, k) in self.w[..d].iter_mut().zip(&px[..d]) {
            *w += k / denom * e;
        }
        Zip::indexed(&mut p).for_each(|(i, j), pij| {
            *pij = (*pij - px[i] * px[j] / denom) / lambda;
        });
        let max_diag = (0..d).map(|i| p[[i, i]]).fold(0.0, f64::max);
        if max_diag > MAX_P {
            let s = MAX_P / max_diag;
            p.mapv_inplace(|v| v * s);
        }
        true
    }

    /// `x'Px`: the prediction's variance at `x` in units of the residual
    /// variance (near `dim / samples` inside the data the model learnt
    /// from, large where it extrapolates along a direction it never saw
    /// vary).
    pub fn leverage(&self, x: &[f64; MAX_DIM]) -> f64 {
        let d = usize::from(self.dim);
        let mut h = 0.0;
        for i in 0..d {
            for j in 0..d {
                h += x[i] * self.p[i * d + j] * x[j];
            }
        }
        h
    }

    /// The prediction's variance at `x`: the residual variance (at least
    /// the floor the outlier gate uses) times [`Self::leverage`].
    pub fn prediction_var(&self, x: &[f64; MAX_DIM]) -> f64 {
        self.resid_var.max(VAR_FLOOR) * self.leverage(x)
    }

    /// Enough updates to trust the prediction.
    #[inline]
    pub fn ready(&self, warmup: u32) -> bool {
        self.n >= warmup
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_a_line_and_ignores_an_outlier() {
        let mut r = Rls::new(2);
        for i in 0..400 {
            let u = f64::from(i % 10) / 10.0;
            let noise = if i % 2 == 0 { 0.1 } else { -0.1 };
            r.update(&[1.0, u, 0.0, 0.0], 30.0 + 40.0 * u + noise, 0.9995, 50);
        }
        assert!(r.ready(50));
        let p = r.predict(&[1.0, 0.5, 0.0, 0.0]);
        assert!((p - 50.0).abs() < 0.2, "{p}");
        assert!(!r.update(&[1.0, 0.5, 0.0, 0.0], 90.0, 0.9995, 50), "gated");
        assert!((r.predict(&[1.0, 0.5, 0.0, 0.0]) - 50.0).abs() < 0.2);
        assert!(!r.update(&[1.0, f64::NAN, 0.0, 0.0], 1.0, 0.9995, 50));
    }

    #[test]
    fn prediction_equals_ndarray_dot() {
        let mut r = Rls::new(3);
        for i in 0..200 {
            let u = f64::from(i % 13) / 7.0;
            r.update(&[1.0, u, -0.3 * u, 0.0], 30.0 + 41.3 * u, 0.9995, 50);
            let x = [1.0, u + 0.1, 3.7 - u, 0.0];
            let nd = ArrayView1::from(&r.w[..3]).dot(&ArrayView1::from(&x[..3]));
            assert_eq!(r.predict(&x).to_bits(), nd.to_bits());
        }
    }

    /// Inside the inputs it learnt from the leverage is small; along a
    /// direction that never varied (here the third input, always 3.1) it is
    /// large, so a prediction there is refused.
    #[test]
    fn leverage_is_small_inside_the_data_and_large_where_it_extrapolates() {
        let mut r = Rls::new(3);
        for i in 0..400 {
            let u = f64::from(i % 10) / 10.0;
            r.update(&[1.0, u, 3.1, 0.0], 30.0 + 40.0 * u, 0.9995, 50);
        }
        let inside = r.leverage(&[1.0, 0.55, 3.1, 0.0]);
        let beyond = r.leverage(&[1.0, 0.55, 3.7, 0.0]);
        assert!(inside < 0.05, "{inside}");
        assert!(beyond > 1.0, "{beyond}");
    }

    #[test]
    fn unexcited_directions_do_not_wind_up() {
        let mut r = Rls::new(3);
        for _ in 0..100_000 {
            r.update(&[1.0, 0.0, 0.0, 0.0], 35.0, 0.999, 50);
        }
        assert!(r.p.iter().all(|v| v.is_finite() && *v <= MAX_P));
        assert!((r.predict(&[1.0, 0.0, 0.0, 0.0]) - 35.0).abs() < 1e-6);
    }
}
