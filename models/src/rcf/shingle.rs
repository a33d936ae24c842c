//! Internal shingling and missing-value imputation: turns the stream of input
//! rows into the points the forest scores and stores.
//!
//! A shingle of size `s` concatenates the last `s` rows, oldest first, so a
//! point carries its recent history and temporal patterns (a spike that comes
//! back down, a change of variance) become geometric outliers. Non-finite
//! inputs are treated as missing and replaced by the metric's last observed
//! value (0 before any observation). A point containing a freshly imputed value
//! is scored but must not be stored: a carried-forward guess would poison the
//! sample. A metric missing for longer than `STALE_AFTER` rows is considered to
//! really sit at its last value, so a dead sensor cannot freeze learning.

use serde::{Deserialize, Serialize};

/// Rows after which a still-missing metric's carried value stops poisoning
/// points (a few shingles' worth; long gaps are a regime, not a glitch).
const STALE_AFTER: u32 = 64;

/// Inputs are clamped to this magnitude so box spans stay finite in `f32`.
pub const VALUE_LIMIT: f64 = 1e15;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Shingler {
    input_dims: usize,
    size: usize,
    /// The current shingle, oldest row first.
    buffer: Vec<f32>,
    /// Rows pushed so far, saturating at `size`.
    filled: usize,
    /// Last observed value of each metric, for carry-forward.
    last: Vec<f32>,
    /// Consecutive rows each metric has been missing.
    missing_run: Vec<u32>,
    /// Rows since the last row whose imputation poisons points.
    since_poison: usize,
}

/// The point a row would produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// Enough rows have been seen to fill the shingle.
    pub(crate) complete: bool,
    /// The point contains an imputed value and must not be stored.
    pub(crate) poisoned: bool,
}

impl Shingler {
    pub(crate) fn new(input_dims: usize, size: usize) -> Self {
        Self {
            input_dims,
            size,
            buffer: vec![0.0; input_dims * size],
            filled: 0,
            last: vec![0.0; input_dims],
            missing_run: vec![0; input_dims],
            since_poison: usize::MAX,
        }
    }

    /// Writes the point that `row` would complete into `out` without changing
    /// the shingle.
    pub(crate) fn candidate(&self, row: &[f64], out: &mut Vec<f32>) -> Candidate {
        let m = self.input_dims;
        out.clear();
        out.extend_from_slice(&self.buffer[m..]);
        let mut poisoned_now = false;
        for (j, &x) in row.iter().enumerate() {
            match clean(x) {
                Some(v) => out.push(v),
                None => {
                    out.push(self.last[j]);
                    poisoned_now |= self.missing_run[j] < STALE_AFTER;
                }
            }
        }
        let steps_since = if poisoned_now {
            0
        } else {
            self.since_poison.saturating_add(1)
        };
        Candidate {
            complete: self.filled + 1 >= self.size,
            poisoned: steps_since < self.size,
        }
    }

    /// Commits `row` (whose imputed point is `point`, from `candidate`).
    pub(crate) fn push(&mut self, row: &[f64], point: &[f32]) {
        let m = self.input_dims;
        let mut poisoned_now = false;
        for (j, &x) in row.iter().enumerate() {
            if let Some(v) = clean(x) {
                self.last[j] = v;
                self.missing_run[j] = 0;
            } else {
                poisoned_now |= self.missing_run[j] < STALE_AFTER;
                self.missing_run[j] = self.missing_run[j].saturating_add(1);
            }
        }
        self.since_poison = if poisoned_now {
            0
        } else {
            self.since_poison.saturating_add(1)
        };
        self.buffer.copy_from_slice(point);
        debug_assert_eq!(self.buffer.len(), m * self.size);
        self.filled = (self.filled + 1).min(self.size);
    }
}

impl Shingler {
    /// The shape matches `input_dims` rows of `size` (a restored shingler
    /// of another shape would index out of its buffer on the next row).
    pub(crate) fn is_consistent(&self, input_dims: usize, size: usize) -> bool {
        self.input_dims == input_dims
            && self.size == size
            && size > 0
            && input_dims.checked_mul(size) == Some(self.buffer.len())
            && self.last.len() == input_dims
            && self.missing_run.len() == input_dims
            && self.filled <= size
    }

    /// The current shingle, oldest row first: after a row is pushed, the
    /// point it was scored as (imputed values included).
    pub(crate) fn point(&self) -> &[f32] {
        &self.buffer
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.buffer.capacity() * 4 + self.last.capacity() * 4 + self.missing_run.capacity() * 4
    }
}

/// Finite values clamped to `VALUE_LIMIT`; `None` for NaN and infinities.
#[inline]
fn clean(x: f64) -> Option<f32> {
    x.is_finite()
        .then(|| x.clamp(-VALUE_LIMIT, VALUE_LIMIT) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shingle_orders_oldest_first_and_imputes() {
        let mut s = Shingler::new(2, 3);
        let mut out = Vec::new();
        for (i, row) in [
            [1.0, 10.0],
            [2.0, f64::NAN],
            [3.0, 30.0],
            [4.0, 40.0],
            [5.0, 50.0],
            [6.0, 60.0],
        ]
        .iter()
        .enumerate()
        {
            let c = s.candidate(row, &mut out);
            assert_eq!(c.complete, i >= 2);
            // Row 1 is imputed, so points containing it (rows 1..=3) are poisoned.
            assert_eq!(c.poisoned, (1..=3).contains(&i), "row {i}");
            s.push(row, &out);
        }
        assert_eq!(out, vec![4.0, 40.0, 5.0, 50.0, 6.0, 60.0]);
        let mut s = Shingler::new(2, 3);
        s.candidate(&[1.0, 10.0], &mut out);
        s.push(&[1.0, 10.0], &out.clone());
        s.candidate(&[2.0, f64::NAN], &mut out);
        assert_eq!(&out[4..], &[2.0, 10.0]);
    }

    #[test]
    fn long_gaps_stop_poisoning() {
        let mut s = Shingler::new(1, 2);
        let mut out = Vec::new();
        let mut last = Candidate {
            complete: false,
            poisoned: false,
        };
        for _ in 0..(STALE_AFTER as usize + 5) {
            last = s.candidate(&[f64::NAN], &mut out);
            s.push(&[f64::NAN], &out.clone());
        }
        assert!(!last.poisoned);
    }
}
