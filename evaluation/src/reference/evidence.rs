//! How much evidence a counter precursor offers by an hour before its
//! failure, to an oracle: the ceiling beside the reference's hindsight
//! thresholds and forewarn's budget-derived ones (issue #29's "≥ 90 % of
//! precursor failures alerted ≥ 1 h ahead").
//!
//! The oracle knows what no detector can: the GPU's own background rate
//! (its counts from the run's start to the precursor's onset) and that
//! nothing changed before the onset. For each window from a start `s` at
//! or after the onset to one hour before the failure it takes the Poisson
//! generalised log-likelihood ratio of the window's count `n` against the
//! background's expectation `e` — `n ln(n / e) − (n − e)` when `n > e` —
//! and keeps the largest. A precursor is *visible by an hour ahead* when
//! that reaches the warning threshold of forewarn's change tests (the
//! evidence a sequential test needs to keep false warnings within the
//! budget, by Lorden's bound): below it, no test at that budget can be
//! expected to warn an hour ahead, whatever its design.
//!
//! Counters only. Temperatures are not Poisson: their evidence depends on
//! a noise model (the peers' wander, the buckets' correlation) that a
//! ceiling would have to assume, so thermal precursors are judged against
//! the reference alone.

use datasets::simulator::FailureKind;
use serde::Serialize;

use super::settings::COUNTERS;

const HOUR_MS: f64 = 3_600_000.0;

/// Window starts are tried this far apart.
const STEP_MS: i64 = 600_000;

/// The counters (indices into [`COUNTERS`]) whose increments carry a
/// failure kind's precursor, summed; empty for the other kinds.
pub fn counters_of(kind: FailureKind) -> &'static [usize] {
    match kind {
        FailureKind::HbmEcc => &[0],
        FailureKind::Pcie => &[1],
        FailureKind::Nvlink => &[2, 3, 4, 5],
        _ => &[],
    }
}

/// The Poisson log-likelihood ratio of `n` events against an expectation
/// `e` at its maximum-likelihood rise (0 unless `n > e`).
pub fn poisson_glr(n: f64, e: f64) -> f64 {
    if n > e && e > 0.0 {
        n * (n / e).ln() - (n - e)
    } else {
        0.0
    }
}

/// One precursor's evidence an hour before its failure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Evidence {
    /// The GPU's own background, events per hour before the onset (half
    /// an event added, so a GPU that showed none has a small rate, not 0).
    pub background_per_h: f64,
    /// The largest log-likelihood ratio over the windows.
    pub glr: f64,
}

impl Evidence {
    /// Evidence in `counts` (time, increment; ordered by time) for a
    /// precursor from `onset_ms` judged at `until_ms`, the run having
    /// started at `start_ms`; `floor`: the least background per hour.
    pub fn of(
        counts: &[(i64, f64)],
        start_ms: i64,
        onset_ms: i64,
        until_ms: i64,
        floor: f64,
    ) -> Self {
        let before: f64 = counts
            .iter()
            .take_while(|(t, _)| *t < onset_ms)
            .map(|(_, n)| n)
            .sum();
        let hours = ((onset_ms - start_ms) as f64 / HOUR_MS).max(1.0);
        let rate = ((before + 0.5) / hours).max(floor);
        // Counts from the onset to `until`, then windows ending at `until`
        // by their start, latest first (a suffix sum).
        let during: Vec<(i64, f64)> = counts
            .iter()
            .copied()
            .filter(|(t, _)| *t >= onset_ms && *t < until_ms)
            .collect();
        let mut glr = 0.0f64;
        let mut n = 0.0;
        let mut i = during.len();
        let mut s = onset_ms + ((until_ms - onset_ms - 1).max(0) / STEP_MS) * STEP_MS;
        while s >= onset_ms && s < until_ms {
            while i > 0 && during[i - 1].0 >= s {
                i -= 1;
                n += during[i].1;
            }
            let e = rate * (until_ms - s) as f64 / HOUR_MS;
            glr = glr.max(poisson_glr(n, e));
            s -= STEP_MS;
        }
        Evidence {
            background_per_h: rate,
            glr,
        }
    }
}

/// Sums the increments of `counters` per sample: `(time, increments per
/// counter)` → `(time, their sum)`.
pub fn summed(trace: &[(i64, [f32; COUNTERS.len()])], counters: &[usize]) -> Vec<(i64, f64)> {
    trace
        .iter()
        .map(|(t, c)| {
            let n = counters
                .iter()
                .filter_map(|&i| c.get(i))
                .map(|&x| f64::from(x))
                .sum();
            (*t, n)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    /// A sample every 30 s from `from` to `to`, with `per_h` events an
    /// hour spread evenly (whole events, on the sample where they fall).
    fn trace(out: &mut Vec<(i64, f64)>, from: i64, to: i64, per_h: f64) {
        let mut owed = 0.0;
        let mut t = from;
        while t < to {
            owed += per_h / 120.0;
            let n = owed.floor();
            owed -= n;
            out.push((t, n));
            t += 30_000;
        }
    }

    #[test]
    fn the_ratio_is_zero_unless_counts_exceed_their_expectation() {
        assert_eq!(poisson_glr(0.0, 1.0), 0.0);
        assert_eq!(poisson_glr(1.0, 1.0), 0.0);
        assert_eq!(poisson_glr(5.0, 0.0), 0.0);
        let l = poisson_glr(10.0, 1.0);
        assert!((l - (10.0 * 10f64.ln() - 9.0)).abs() < 1e-12, "{l}");
    }

    #[test]
    fn a_rise_over_the_own_background_is_visible_and_no_rise_is_not() {
        let mut counts = Vec::new();
        trace(&mut counts, 0, 48 * H, 0.1);
        trace(&mut counts, 48 * H, 60 * H, 3.0);
        let e = Evidence::of(&counts, 0, 48 * H, 59 * H, 1e-3);
        // Four or five whole events in 48 h (and the half added).
        assert!((0.09..0.12).contains(&e.background_per_h), "{e:?}");
        assert!(e.glr > 20.0, "{e:?}");
        // The same GPU judged as if the precursor began a day later,
        // while it was still at its background: nothing to see.
        let mut quiet = Vec::new();
        trace(&mut quiet, 0, 72 * H, 0.1);
        let q = Evidence::of(&quiet, 0, 48 * H, 71 * H, 1e-3);
        assert!(q.glr < 3.0, "{q:?}");
    }

    #[test]
    fn the_best_window_is_found_whatever_its_start() {
        // Ten quiet hours after the onset, then two busy ones: the window
        // over the busy hours alone holds the evidence; the whole span
        // would dilute it.
        let mut counts = Vec::new();
        trace(&mut counts, 0, 40 * H, 0.2);
        trace(&mut counts, 40 * H, 50 * H, 0.2);
        trace(&mut counts, 50 * H, 52 * H, 6.0);
        let e = Evidence::of(&counts, 0, 40 * H, 52 * H, 1e-3);
        let busy = poisson_glr(12.0, e.background_per_h * 2.0);
        assert!(e.glr >= busy - 1e-9, "{e:?} vs {busy}");
        let whole = poisson_glr(14.0, e.background_per_h * 12.0);
        assert!(e.glr > whole, "{e:?} vs {whole}");
    }

    #[test]
    fn counters_are_summed_per_kind() {
        assert_eq!(counters_of(FailureKind::HbmEcc), &[0]);
        assert!(counters_of(FailureKind::Thermal).is_empty());
        let t = vec![(0, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])];
        assert_eq!(
            summed(&t, counters_of(FailureKind::Nvlink)),
            vec![(0, 18.0)]
        );
    }
}
