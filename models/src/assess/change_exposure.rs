//! The counters' exposure (part of [`super`]): how many errors an hour of
//! each workload phase brings, relative to an average hour, per SKU and
//! counter signal. Link errors come with traffic: a healthy GPU that idled
//! for a day and then trains for one sees its NVLink and PCIe rates rise
//! two- to three-fold, which is the change the counters' test looks for
//! (then a single test at 3×) and raised false warnings after 16–22 h of a long job.
//! The test's expected count is `λ0 · Σ interval · weight(phase)`, with
//! `λ0` per average hour; a counter that does not depend on the workload
//! learns weights near 1 and nothing changes.
//!
//! The weights come from the shard's GPUs of the SKU, pooled (a GPU's own
//! errors are far too rare to learn four rates from), shrunk towards 1 by
//! a prior worth [`PRIOR_COUNTS`] errors per phase. A degrading GPU must
//! not teach the fleet that its phase is noisy: a row adds at most
//! [`ROW_CAP`] errors and a GPU whose test stands above a quarter of the
//! warning threshold adds none.
//!
//! Pooled raw rates can be confounded where backgrounds differ a hundredfold
//! and phases are not shared alike (a noisy GPU that mostly idles makes idle
//! look noisy). Each GPU's errors over what its own usual rate expected
//! would not be, and was tried: a slowly degrading GPU, not yet flagged, then
//! counted tens of times its expectation in its phase and raised that
//! phase's weight for every GPU, which hid NVLink precursors (full seed 109:
//! two failures lost their hour of warning, one went from 29 to 24 h).
//! `Signal::weighed_by_phase` says which counters are weighed.

use features::phase::PHASE_COUNT as PHASES;
use serde::{Deserialize, Serialize};

/// Errors a phase's weight is shrunk towards 1 by.
const PRIOR_COUNTS: f64 = 10.0;
/// Most errors one row adds to the pooled counts.
const ROW_CAP: f64 = 3.0;
/// GPU-hours the pooled counts remember (older ones scaled away).
const CAP_H: f64 = 10_000.0;
/// Bounds of a weight: no phase hides more than a factor of four.
const MIN_WEIGHT: f64 = 0.25;
const MAX_WEIGHT: f64 = 4.0;

/// One SKU's pooled counts and hours per counter signal (indexed as in
/// `Signal::ALL`; only the weighed ones learn) and phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Exposure {
    per: [[(f64, f64); PHASES]; 3],
}

impl Exposure {
    /// Adds one row of a GPU whose test is quiet: `count` errors of
    /// counter `sig` over `hours` in `phase`.
    pub(super) fn learn(&mut self, sig: usize, phase: Option<usize>, count: f64, hours: f64) {
        let (Some(p), Some(t)) = (phase, self.per.get_mut(sig)) else {
            return;
        };
        if hours.is_nan() || hours <= 0.0 || !count.is_finite() {
            return;
        }
        t[p].0 += count.clamp(0.0, ROW_CAP);
        t[p].1 += hours;
        let total: f64 = t.iter().map(|(_, h)| h).sum();
        if total > CAP_H {
            let f = CAP_H / total;
            for (c, h) in t.iter_mut() {
                *c *= f;
                *h *= f;
            }
        }
    }

    /// An hour of `phase`'s weight for counter `sig`: its rate over the
    /// SKU's rate in all phases, shrunk towards 1 (1 when the phase is
    /// unknown or no error has been seen).
    pub(super) fn weight(&self, sig: usize, phase: Option<usize>) -> f64 {
        let (Some(p), Some(t)) = (phase, self.per.get(sig)) else {
            return 1.0;
        };
        let (c_all, h_all) = t
            .iter()
            .fold((0.0, 0.0), |(c, h), (ci, hi)| (c + ci, h + hi));
        if c_all <= 0.0 || h_all <= 0.0 {
            return 1.0;
        }
        let rate = c_all / h_all;
        let (c, h) = t[p];
        ((c + PRIOR_COUNTS) / (rate * h + PRIOR_COUNTS)).clamp(MIN_WEIGHT, MAX_WEIGHT)
    }
}

/// The row's phase as an index (None: unknown).
pub(super) fn phase_index(code: f32) -> Option<usize> {
    (code.is_finite() && (0.0..PHASES as f32).contains(&code)).then_some(code as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_with_three_times_the_errors_weighs_three_times_as_much() {
        let mut e = Exposure::default();
        // 1,000 GPU-hours idle at 0.3/h, 1,000 training at 0.9/h.
        for _ in 0..120_000 {
            e.learn(1, Some(0), 0.3 / 120.0, 1.0 / 120.0);
            e.learn(1, Some(2), 0.9 / 120.0, 1.0 / 120.0);
        }
        let (idle, train) = (e.weight(1, Some(0)), e.weight(1, Some(2)));
        assert!((train / idle - 3.0).abs() < 0.3, "{idle} {train}");
        assert!((idle * 0.5 + train * 0.5 - 1.0).abs() < 0.05);
        // Other signals and unknown phases: 1.
        assert_eq!(e.weight(0, Some(2)), 1.0);
        assert_eq!(e.weight(1, None), 1.0);
        // A phase never seen: its prior (less than the average rate's
        // hours make it, so near 1).
        assert!((e.weight(1, Some(3)) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn one_burst_cannot_make_a_phase_noisy() {
        let mut e = Exposure::default();
        for _ in 0..2_400 {
            e.learn(2, Some(0), 0.0, 1.0 / 120.0);
            e.learn(2, Some(2), 0.0, 1.0 / 120.0);
        }
        for _ in 0..20 {
            e.learn(2, Some(0), 0.02, 1.0 / 120.0);
            e.learn(2, Some(2), 0.02, 1.0 / 120.0);
        }
        // A degrading GPU's row of 5,000 errors counts as three.
        e.learn(2, Some(2), 5_000.0, 1.0 / 120.0);
        assert!(e.weight(2, Some(2)) < 1.3, "{}", e.weight(2, Some(2)));
        assert!(e.weight(2, Some(2)) >= MIN_WEIGHT);
    }
}
