//! Directional attribution of an anomaly score: for every coordinate, how much
//! of the score comes from the point being too high and how much from it being
//! too low. `high` and `low` sum to the score, so a reason can say "memory
//! temperature too high" and weigh it against the other coordinates.

use serde::{Deserialize, Serialize};

/// Which side of the normal range a coordinate is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Direction {
    High,
    Low,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::High => "high",
            Direction::Low => "low",
        }
    }
}

/// Per-coordinate "too high" and "too low" parts of a score.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DiVector {
    pub high: Vec<f64>,
    pub low: Vec<f64>,
}

impl DiVector {
    pub fn zeros(dims: usize) -> Self {
        Self {
            high: vec![0.0; dims],
            low: vec![0.0; dims],
        }
    }

    /// Builds from the `2 * dims` layout used by tree walks (high then low).
    pub(crate) fn from_flat(flat: &[f64]) -> Self {
        let (high, low) = flat.split_at(flat.len() / 2);
        Self {
            high: high.to_vec(),
            low: low.to_vec(),
        }
    }

    /// The score this attribution explains.
    pub fn total(&self) -> f64 {
        self.high.iter().sum::<f64>() + self.low.iter().sum::<f64>()
    }

    /// Sums the coordinates of a shingled point per metric: coordinate
    /// `lag * input_dims + j` belongs to metric `j`.
    pub fn per_metric(&self, input_dims: usize) -> DiVector {
        let mut out = DiVector::zeros(input_dims);
        for (i, (h, l)) in self.high.iter().zip(&self.low).enumerate() {
            out.high[i % input_dims] += h;
            out.low[i % input_dims] += l;
        }
        out
    }

    /// The coordinate and direction carrying the largest share, if any.
    pub fn top(&self) -> Option<(usize, Direction, f64)> {
        let mut best: Option<(usize, Direction, f64)> = None;
        for (i, (&h, &l)) in self.high.iter().zip(&self.low).enumerate() {
            for (v, dir) in [(h, Direction::High), (l, Direction::Low)] {
                if v > 0.0 && best.is_none_or(|(_, _, b)| v > b) {
                    best = Some((i, dir, v));
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_metric_folds_lags_and_top_picks_max() {
        let d = DiVector {
            high: vec![0.1, 0.0, 0.2, 0.0],
            low: vec![0.0, 0.05, 0.0, 0.4],
        };
        let m = d.per_metric(2);
        assert_eq!(m.high, vec![0.30000000000000004, 0.0]);
        assert_eq!(m.low, vec![0.0, 0.45]);
        assert_eq!(
            m.top().map(|(i, dir, _)| (i, dir)),
            Some((1, Direction::Low))
        );
        assert!((m.total() - d.total()).abs() < 1e-12);
    }
}
