//! Event-time smoothing for per-GPU state: an irregularly sampled EWMA and
//! exponentially decayed event counts (`*_1h` features).
//!
//! Both use `alpha = 1 - exp(-dt / tau)` so that a GPU sampled every 10 s
//! and one sampled every 60 s smooth over the same event time.

use serde::{Deserialize, Serialize};

/// The weight of a new observation after `dt_ms` with time constant `tau_ms`.
#[inline]
pub fn alpha(dt_ms: i64, tau_ms: i64) -> f32 {
    if dt_ms <= 0 {
        return 0.0;
    }
    (1.0 - (-(dt_ms as f64) / tau_ms as f64).exp()) as f32
}

/// An exponentially weighted moving average over event time. A convex
/// combination of observations, so it stays within their min and max.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ewma {
    /// NaN until the first finite observation.
    pub value: f32,
}

impl Default for Ewma {
    fn default() -> Self {
        Ewma { value: f32::NAN }
    }
}

impl Ewma {
    /// Feeds `x` with weight `a` (0..=1); non-finite `x` is ignored.
    #[inline]
    pub fn update(&mut self, x: f32, a: f32) -> f32 {
        if x.is_finite() {
            if self.value.is_finite() {
                let a = a.clamp(0.0, 1.0);
                let v = self.value + a * (x - self.value);
                // Rounding can step a hair outside [old, x]; keep it convex.
                let (lo, hi) = if self.value <= x {
                    (self.value, x)
                } else {
                    (x, self.value)
                };
                self.value = v.clamp(lo, hi);
            } else {
                self.value = x;
            }
        }
        self.value
    }
}

/// The per-GPU event kinds that get a decayed count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum EventKind {
    CounterReset = 0,
    Gap = 1,
    XidHardware = 2,
    XidApplication = 3,
    XidUnknown = 4,
    XidAppSolo = 5,
    XidAppJob = 6,
    PhaseChange = 7,
}

/// Number of [`EventKind`]s.
pub const EVENT_KINDS: usize = 8;

/// Exponentially decayed counts of recent events, one per [`EventKind`]: a
/// count "in about the last hour" without keeping any history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecayedCounts {
    pub counts: [f32; EVENT_KINDS],
    pub ts_ms: i64,
}

impl Default for DecayedCounts {
    fn default() -> Self {
        DecayedCounts {
            counts: [0.0; EVENT_KINDS],
            ts_ms: i64::MIN,
        }
    }
}

impl DecayedCounts {
    /// Decays every count to `ts_ms`.
    #[inline]
    pub fn advance(&mut self, ts_ms: i64, tau_ms: i64) {
        // Most GPUs have no recent event: skip the `exp` then.
        if self.ts_ms != i64::MIN && ts_ms > self.ts_ms && self.counts.iter().any(|c| *c != 0.0) {
            let keep = 1.0 - alpha(ts_ms - self.ts_ms, tau_ms);
            for c in &mut self.counts {
                *c *= keep;
                if *c < 1e-6 {
                    *c = 0.0;
                }
            }
        }
        self.ts_ms = self.ts_ms.max(ts_ms);
    }

    /// Counts one event of `kind`.
    #[inline]
    pub fn bump(&mut self, kind: EventKind) {
        self.counts[kind as usize] += 1.0;
    }

    /// The decayed count of `kind`.
    #[inline]
    pub fn get(&self, kind: EventKind) -> f32 {
        self.counts[kind as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decayed_counts_fade() {
        let mut d = DecayedCounts::default();
        d.advance(0, 3_600_000);
        d.bump(EventKind::Gap);
        d.advance(3_600_000, 3_600_000);
        let g = d.get(EventKind::Gap);
        assert!((g - (-1.0f32).exp()).abs() < 1e-4, "{g}");
    }

    proptest! {
        #[test]
        fn ewma_stays_within_observed_min_max(
            xs in proptest::collection::vec(-1e6f32..1e6, 1..200),
            dts in proptest::collection::vec(0i64..600_000, 1..200),
            tau in 1i64..3_600_000,
        ) {
            let mut e = Ewma::default();
            let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
            for (x, dt) in xs.iter().zip(dts.iter().cycle()) {
                lo = lo.min(*x);
                hi = hi.max(*x);
                let v = e.update(*x, alpha(*dt, tau));
                prop_assert!(v >= lo && v <= hi, "{v} outside [{lo}, {hi}]");
            }
        }
    }
}
