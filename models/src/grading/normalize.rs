//! Per-input streaming normalisation: each input dimension is centred on its
//! own running mean and divided by its own running deviation (both with
//! exponential decay) before the forest sees it.
//!
//! Part of the thresholded grader (`grading/`), in front of the forest. A
//! random cut forest picks cut dimensions in proportion to their ranges, so
//! a metric in watts would otherwise drown one in degrees; normalised, every
//! input weighs by how unusual it is for itself. A row is normalised with
//! the statistics of the rows *before* it, so a spike is measured against
//! the past rather than partly against itself. Missing (non-finite) values
//! stay missing: the forest's shingle imputes them.

use serde::{Deserialize, Serialize};

/// Normalised values are clipped to this many deviations: the first rows
/// (deviation not yet known) and wild outliers must not stretch the
/// forest's boxes so far that ordinary points all look alike.
pub const NORMALIZED_LIMIT: f64 = 30.0;

/// Rows before a dimension is normalised; earlier rows map to 0 (a mean
/// of one value and a deviation of none say nothing).
const MIN_ROWS: u64 = 2;

/// Running mean and variance of every input dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputNormalizer {
    decay: f64,
    mean: Vec<f64>,
    var: Vec<f64>,
    /// Finite values seen per dimension.
    seen: Vec<u64>,
}

impl InputNormalizer {
    /// `decay` in (0, 1]: the weight of a new value once `1 / decay` values
    /// have been seen (before that, plain averages).
    pub fn new(dims: usize, decay: f64) -> Self {
        Self {
            decay,
            mean: vec![0.0; dims],
            var: vec![0.0; dims],
            seen: vec![0; dims],
        }
    }

    pub fn dims(&self) -> usize {
        self.mean.len()
    }

    /// Writes the normalised `row` into `out` (same length), without learning.
    pub fn apply(&self, row: &[f64], out: &mut Vec<f64>) {
        out.clear();
        let stats = self.mean.iter().zip(&self.var).zip(&self.seen);
        out.extend(row.iter().zip(stats).map(|(&x, ((&mean, &var), &n))| {
            if !x.is_finite() {
                return f64::NAN;
            }
            if n < MIN_ROWS {
                return 0.0;
            }
            let dev = var.sqrt().max(1e-9 + 1e-9 * mean.abs());
            ((x - mean) / dev).clamp(-NORMALIZED_LIMIT, NORMALIZED_LIMIT)
        }));
    }

    /// Adds `row`'s finite values to the statistics.
    pub fn learn(&mut self, row: &[f64]) {
        for (j, &x) in row.iter().enumerate().take(self.mean.len()) {
            if !x.is_finite() {
                continue;
            }
            self.seen[j] += 1;
            let a = self.decay.max(1.0 / self.seen[j] as f64);
            let d = x - self.mean[j];
            self.mean[j] += a * d;
            // Exponentially weighted variance (West's update).
            self.var[j] = (1.0 - a) * (self.var[j] + a * d * d);
        }
    }

    /// Shapes agree and every statistic is finite (snapshot restore).
    pub fn is_consistent(&self) -> bool {
        let n = self.mean.len();
        self.var.len() == n
            && self.seen.len() == n
            && self.decay > 0.0
            && self.decay <= 1.0
            && self.mean.iter().all(|m| m.is_finite())
            && self.var.iter().all(|v| v.is_finite() && *v >= 0.0)
    }

    pub fn heap_bytes(&self) -> usize {
        self.mean.capacity() * 24
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centres_and_scales_each_dimension_on_its_own() {
        let mut n = InputNormalizer::new(2, 0.01);
        let mut out = Vec::new();
        for t in 0..2000 {
            let s = if t % 2 == 0 { 1.0 } else { -1.0 };
            n.learn(&[100.0 + s, 5.0 + 0.01 * s]);
        }
        n.apply(&[102.0, 5.02], &mut out);
        assert!(
            (out[0] - 2.0).abs() < 0.1 && (out[1] - 2.0).abs() < 0.1,
            "{out:?}"
        );
        n.apply(&[f64::NAN, 1e9], &mut out);
        assert!(out[0].is_nan() && out[1] == NORMALIZED_LIMIT, "{out:?}");
    }

    #[test]
    fn first_rows_map_to_zero() {
        let mut n = InputNormalizer::new(1, 0.5);
        let mut out = Vec::new();
        n.apply(&[7.0], &mut out);
        assert_eq!(out, [0.0]);
        n.learn(&[7.0]);
        n.apply(&[9.0], &mut out);
        assert_eq!(out, [0.0]);
        n.learn(&[9.0]);
        n.apply(&[9.0], &mut out);
        assert!(out[0] > 0.0 && out[0] <= NORMALIZED_LIMIT);
    }
}
