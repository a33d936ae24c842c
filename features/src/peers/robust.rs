//! Robust location and scale (median and MAD) of one cohort's bucket of
//! per-GPU values, for peer z-scores. Part of the feature stage's peer
//! statistics.
//!
//! The scale is `1.4826 × MAD` (consistent with σ for normal data) with an
//! absolute floor per feature: when every peer reads the same clock, the MAD
//! is zero and a 1 MHz difference must not become an infinite z-score.

use serde::{Deserialize, Serialize};

/// Number of features compared with peers.
pub const PEER_FEATURES: usize = 8;

/// Median and scale of each peer feature over one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RobustStats {
    /// GPUs that contributed.
    pub n: u32,
    /// NaN for a feature with fewer than `min` finite values.
    pub median: [f32; PEER_FEATURES],
    pub scale: [f32; PEER_FEATURES],
}

impl Default for RobustStats {
    fn default() -> Self {
        RobustStats {
            n: 0,
            median: [f32::NAN; PEER_FEATURES],
            scale: [f32::NAN; PEER_FEATURES],
        }
    }
}

/// Normal-consistency constant of the MAD.
const MAD_TO_SIGMA: f32 = 1.4826;

/// z-scores are clamped here: beyond it, "very far" is all a model needs and
/// exports stay readable.
pub const Z_CLAMP: f32 = 100.0;

/// The median of `xs` (reordered in place); NaN when empty.
pub(crate) fn median_in_place(xs: &mut [f32]) -> f32 {
    let n = xs.len();
    if n == 0 {
        return f32::NAN;
    }
    let k = n / 2;
    let (lo, mid, _) = xs.select_nth_unstable_by(k, f32::total_cmp);
    let mid = *mid;
    if n % 2 == 1 {
        mid
    } else {
        let below = lo.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        0.5 * (below + mid)
    }
}

/// Largest bucket that [`median_mad_small`] sorts instead of selecting.
const SMALL: usize = 32;

/// Median and MAD of a small slice (sorted in place): one insertion sort,
/// then the absolute deviations are walked in order from the median outward
/// (those below it, read right to left, and those above it are each
/// already sorted), so no second selection is needed. Exactly the values
/// [`median_in_place`] gives twice: the same order statistics of the same
/// numbers (`m - x` and `|x - m|` round alike).
fn median_mad_small(xs: &mut [f32]) -> (f32, f32) {
    for i in 1..xs.len() {
        let x = xs[i];
        let mut j = i;
        while j > 0 && xs[j - 1].total_cmp(&x).is_gt() {
            xs[j] = xs[j - 1];
            j -= 1;
        }
        xs[j] = x;
    }
    let n = xs.len();
    if n == 0 {
        return (f32::NAN, f32::NAN);
    }
    let k = n / 2;
    let med = if n % 2 == 1 {
        xs[k]
    } else {
        0.5 * (xs[k - 1] + xs[k])
    };
    // Merge the two sorted deviation runs up to rank k.
    let (mut lo, mut hi) = (k, k); // next below: xs[lo - 1]; next above: xs[hi]
    let mut prev = f32::NAN;
    let mut rank = 0;
    loop {
        let below = (lo > 0).then(|| (med - xs[lo - 1]).abs());
        let above = (hi < n).then(|| (xs[hi] - med).abs());
        let d = match (below, above) {
            (Some(b), Some(a)) if b.total_cmp(&a).is_le() => {
                lo -= 1;
                b
            }
            (_, Some(a)) => {
                hi += 1;
                a
            }
            (Some(b), None) => {
                lo -= 1;
                b
            }
            (None, None) => unreachable!("rank k < n deviations exist"),
        };
        if rank == k {
            let mad = if n % 2 == 1 { d } else { 0.5 * (prev + d) };
            return (med, mad);
        }
        prev = d;
        rank += 1;
    }
}

impl RobustStats {
    /// Median / MAD of each column of `cols` (one `Vec` per peer feature,
    /// one entry per GPU). A feature with fewer than `min` finite values
    /// gets NaN. `scratch` is reused.
    pub fn compute(
        cols: &[Vec<f32>; PEER_FEATURES],
        floors: &[f32; PEER_FEATURES],
        min: u32,
        scratch: &mut Vec<f32>,
    ) -> RobustStats {
        let mut out = RobustStats {
            n: u32::try_from(cols[0].len()).unwrap_or(u32::MAX),
            ..RobustStats::default()
        };
        for (p, col) in cols.iter().enumerate() {
            scratch.clear();
            scratch.extend(col.iter().copied().filter(|x| x.is_finite()));
            if scratch.len() < min as usize {
                continue;
            }
            let (med, mad) = if scratch.len() <= SMALL {
                median_mad_small(scratch)
            } else {
                let med = median_in_place(scratch);
                for x in scratch.iter_mut() {
                    *x = (*x - med).abs();
                }
                (med, median_in_place(scratch))
            };
            out.median[p] = med;
            out.scale[p] = (MAD_TO_SIGMA * mad).max(floors[p]);
        }
        out
    }

    /// The robust z-score of `x` for feature `p`; NaN when either is missing.
    #[inline]
    pub fn z(&self, p: usize, x: f32) -> f32 {
        let z = (x - self.median[p]) / self.scale[p];
        if z.is_nan() {
            f32::NAN
        } else {
            z.clamp(-Z_CLAMP, Z_CLAMP)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The small-bucket path gives bit for bit what two selections give.
        #[test]
        fn small_path_equals_selection(
            xs in proptest::collection::vec(
                prop_oneof![-5i32..5, -100_000i32..100_000].prop_map(|v| v as f32 / 8.0),
                1..=SMALL,
            ),
        ) {
            let mut a = xs.clone();
            let med = median_in_place(&mut a);
            for x in a.iter_mut() {
                *x = (*x - med).abs();
            }
            let mad = median_in_place(&mut a);
            let mut b = xs.clone();
            let (m2, d2) = median_mad_small(&mut b);
            prop_assert_eq!((med.to_bits(), mad.to_bits()), (m2.to_bits(), d2.to_bits()));
        }
    }

    #[test]
    fn median_mad_and_floor() {
        let floors = [1.0; PEER_FEATURES];
        let col = vec![10.0f32, 11.0, 12.0, 13.0, 100.0];
        let mut cols: [Vec<f32>; PEER_FEATURES] = std::array::from_fn(|_| col.clone());
        cols[1][1] = f32::NAN;
        let s = RobustStats::compute(&cols, &floors, 3, &mut Vec::new());
        assert_eq!(s.n, 5);
        assert_eq!(s.median[0], 12.0);
        assert_eq!(s.scale[0], 1.4826);
        // Feature 1 lost the 11: median of 10, 12, 13, 100.
        assert_eq!(s.median[1], 12.5);
        assert!((s.z(0, 100.0) - 88.0 / 1.4826).abs() < 1e-3);
        let same: [Vec<f32>; PEER_FEATURES] = std::array::from_fn(|_| vec![5.0; 4]);
        let s = RobustStats::compute(&same, &floors, 3, &mut Vec::new());
        assert_eq!(s.scale[0], 1.0, "zero MAD falls to the floor");
        let few: [Vec<f32>; PEER_FEATURES] = std::array::from_fn(|_| vec![5.0; 2]);
        assert!(RobustStats::compute(&few, &floors, 3, &mut Vec::new()).median[0].is_nan());
    }
}
