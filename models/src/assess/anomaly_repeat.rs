//! Repeats of an anomaly a GPU has already raised (the anomaly component,
//! [`super::anomaly`]): a new event on the same GPU, driven by the same
//! metric in the same direction within [`WINDOW_MS`] of the last one, and
//! not clearly stronger ([`MARGIN`] × its peak score), is the same condition
//! again — its grade stays (exports, the failure model) but it raises no
//! new alert. A healthy GPU that runs a few degrees hotter than the fleet
//! had warned, resolved and warned again hours apart (three times in 11 h
//! at reduced random-precursor seed 132, twice 36 h apart in the reduced-11
//! suite's mixed month); a condition that grows, or a different one, is
//! news and alerts as before.

use std::collections::HashMap;

use features::GpuId;
use serde::{Deserialize, Serialize};

/// How long after an anomaly event a like one counts as its repeat: 48 h.
pub const WINDOW_MS: i64 = 48 * 3_600_000;
/// A repeat this much stronger than the condition's peak score is news.
pub const MARGIN: f64 = 1.25;

/// One condition a GPU raised: the metric and direction that drove it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Flagged {
    metric: usize,
    high: bool,
    /// The condition's peak forest score.
    peak: f64,
    /// Its last in-event row.
    last_ms: i64,
    /// While an open event repeats it: its peak before.
    repeat_of: Option<f64>,
}

/// A GPU's recent conditions and the one its open event is (if any).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Track {
    open: Option<usize>,
    seen: Vec<Flagged>,
}

/// Per GPU, its anomaly conditions of the last [`WINDOW_MS`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    gpus: HashMap<GpuId, Track>,
}

impl Repeats {
    /// Notes a scored row of `gpu` (`event`: in an anomaly event, driven by
    /// `metric` in direction `high` at forest score `score`); returns
    /// whether the row's event repeats a condition the GPU raised before.
    pub fn observe(&mut self, gpu: &GpuId, ts_ms: i64, event: Option<(usize, bool, f64)>) -> bool {
        let Some((metric, high, score)) = event else {
            if let Some(t) = self.gpus.get_mut(gpu) {
                t.open = None;
            }
            return false;
        };
        let t = self.gpus.entry(gpu.clone()).or_default();
        if let Some(f) = t.open.and_then(|i| t.seen.get_mut(i)) {
            f.last_ms = ts_ms;
            f.peak = f.peak.max(score);
            if f.repeat_of.is_some_and(|p| score >= p * MARGIN) {
                f.repeat_of = None;
            }
            return f.repeat_of.is_some();
        }
        t.seen
            .retain(|f| ts_ms.saturating_sub(f.last_ms) <= WINDOW_MS);
        if let Some(i) = t
            .seen
            .iter()
            .position(|f| f.metric == metric && f.high == high)
        {
            let f = &mut t.seen[i];
            f.repeat_of = (score < f.peak * MARGIN).then_some(f.peak);
            f.peak = f.peak.max(score);
            f.last_ms = ts_ms;
            t.open = Some(i);
            return f.repeat_of.is_some();
        }
        t.seen.push(Flagged {
            metric,
            high,
            peak: score,
            last_ms: ts_ms,
            repeat_of: None,
        });
        t.open = Some(t.seen.len() - 1);
        false
    }

    /// Forgets `gpu` (eviction).
    pub fn forget(&mut self, gpu: &str) {
        self.gpus.remove(gpu);
    }

    /// GPUs remembered.
    pub fn len(&self) -> usize {
        self.gpus.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.gpus.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    /// One event of `rows` scored rows at `score`, from `at`; returns
    /// whether any of its rows was a repeat.
    fn event(r: &mut Repeats, gpu: &GpuId, at: i64, metric: usize, score: f64) -> bool {
        let mut repeat = false;
        for i in 0..5 {
            repeat |= r.observe(gpu, at + i * 120_000, Some((metric, true, score)));
        }
        r.observe(gpu, at + 5 * 120_000, None);
        repeat
    }

    /// The first event alerts; a like one hours later is a repeat; a
    /// clearly stronger one, another metric, or one after the window is
    /// news; GPUs are independent.
    #[test]
    fn a_like_event_within_two_days_repeats_and_a_stronger_or_other_one_does_not() {
        let mut r = Repeats::default();
        let (a, b): (GpuId, GpuId) = ("GPU-a".into(), "GPU-b".into());
        assert!(!event(&mut r, &a, 0, 0, 1.8));
        assert!(event(&mut r, &a, 4 * H, 0, 1.9));
        assert!(event(&mut r, &a, 11 * H, 0, 2.0));
        assert!(!event(&mut r, &b, 11 * H, 0, 1.9));
        assert!(!event(&mut r, &a, 12 * H, 0, 2.6), "1.3 x the peak: news");
        assert!(!event(&mut r, &a, 13 * H, 3, 2.0), "another metric");
        // Another condition in between does not break the first's chain.
        assert!(event(&mut r, &a, 14 * H, 0, 2.7));
        assert!(
            !event(&mut r, &a, 13 * H + WINDOW_MS + H, 3, 2.0),
            "after the window"
        );
        // A repeat that grows past the margin while it lasts alerts then.
        let c: GpuId = "GPU-c".into();
        assert!(!event(&mut r, &c, 0, 1, 2.0));
        assert!(r.observe(&c, 5 * H, Some((1, true, 2.1))));
        assert!(!r.observe(&c, 5 * H + 120_000, Some((1, true, 2.6))));
    }
}
