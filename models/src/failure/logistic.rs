//! The baseline every report shows beside the booster: L2-regularised
//! logistic regression from `linfa-logistic` on the same input, after a
//! signed log transform (rates and counters are heavy-tailed) and
//! standardisation; missing values sit at the mean. The fitted
//! coefficients are stored, so inference needs no linfa types.

use linfa::prelude::*;
use linfa_logistic::LogisticRegression;
use ndarray::{Array1, Array2};
use serde::{Deserialize, Serialize};

use super::common::FailureModelError;

/// A fitted baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Logistic {
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub coef: Vec<f64>,
    pub intercept: f64,
}

#[inline]
fn slog(v: f32) -> f64 {
    let v = f64::from(v);
    v.signum() * v.abs().ln_1p()
}

impl Logistic {
    /// Trains on row-major `x`. linfa takes no weights, so the caller
    /// passes a class-balanced sample; calibration restores the balance.
    pub fn train(x: &[f32], width: usize, y: &[u8]) -> Result<Logistic, FailureModelError> {
        let n = y.len();
        let (mut mean, mut scale) = (vec![0.0; width], vec![1.0; width]);
        for c in 0..width {
            let (mut s, mut ss, mut k) = (0.0, 0.0, 0.0);
            for r in 0..n {
                let v = x[r * width + c];
                if v.is_finite() {
                    let t = slog(v);
                    s += t;
                    ss += t * t;
                    k += 1.0;
                }
            }
            if k > 0.0 {
                mean[c] = s / k;
                let var = (ss / k - mean[c] * mean[c]).max(0.0);
                scale[c] = if var > 1e-12 { var.sqrt() } else { 1.0 };
            }
        }
        let mut m = Logistic {
            mean,
            scale,
            coef: vec![0.0; width],
            intercept: 0.0,
        };
        let mut a = Array2::<f64>::zeros((n, width));
        for r in 0..n {
            m.standardise(&x[r * width..(r + 1) * width], |c, v| a[[r, c]] = v);
        }
        let targets: Array1<bool> = y.iter().map(|v| *v == 1).collect();
        let ds = Dataset::new(a, targets);
        let fit = LogisticRegression::default()
            .alpha(1.0)
            .max_iterations(150)
            .fit(&ds)
            .map_err(|e| FailureModelError::Training(format!("linfa-logistic: {e}")))?;
        // linfa's "positive" class is the more frequent one.
        let sign = if fit.labels().pos.class { 1.0 } else { -1.0 };
        m.coef = fit.params().iter().map(|v| sign * v).collect();
        m.intercept = sign * fit.intercept();
        Ok(m)
    }

    #[inline]
    fn standardise(&self, row: &[f32], mut out: impl FnMut(usize, f64)) {
        for (c, v) in row.iter().enumerate() {
            let z = if v.is_finite() {
                ((slog(*v) - self.mean[c]) / self.scale[c]).clamp(-10.0, 10.0)
            } else {
                0.0
            };
            out(c, z);
        }
    }

    /// The logit of one input row.
    pub fn logit(&self, x: &[f32]) -> f64 {
        let mut s = self.intercept;
        self.standardise(x, |c, z| s += self.coef[c] * z);
        s
    }
}
