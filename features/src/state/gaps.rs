//! Arrival order and silence of one GPU's samples, part of the per-GPU state.
//!
//! Before a sample touches any state it is classified against the GPU's
//! recent event times: a duplicate (a timestamp among the last few accepted)
//! is dropped; a small reorder (older than the newest, within the tolerance)
//! is absorbed: counted, no row, no state change, so a late counter value can
//! never look like a reset; anything older is rejected as late. A sample
//! after more than `silence_ms` of silence closes a gap.

use serde::{Deserialize, Serialize};

/// Accepted event times remembered for duplicate detection: covers a
/// duplicate arriving a few samples after its original.
const RECENT: usize = 4;

/// How one sample's event time relates to its GPU's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The GPU's first sample.
    First,
    /// Newer than every accepted sample; `gap_from` is set when the GPU was
    /// silent for longer than `silence_ms` before it.
    InOrder { gap_from: Option<i64> },
    /// Same event time as a recently accepted sample.
    Duplicate,
    /// Older than the newest sample, within the reorder tolerance.
    Absorbed,
    /// Older than the newest sample by more than the tolerance.
    Late { lag_ms: i64 },
}

/// Recent accepted event times of one GPU and whether its silence has been
/// reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ArrivalState {
    recent: [i64; RECENT],
    /// Index in `recent` of the newest accepted event time.
    newest: u8,
    /// A `Silent` event was emitted and not yet closed by a `Gap`.
    pub silent_reported: bool,
    /// Accepted samples, saturating. GPUs restored from checkpoints written
    /// before it was kept count as established.
    #[serde(default = "established")]
    pub accepted: u32,
}

fn established() -> u32 {
    u32::MAX
}

impl Default for ArrivalState {
    fn default() -> Self {
        ArrivalState {
            recent: [i64::MIN; RECENT],
            newest: 0,
            silent_reported: false,
            accepted: 0,
        }
    }
}

impl ArrivalState {
    /// Event time of the newest accepted sample (`i64::MIN` before any).
    #[inline]
    pub fn last_ts_ms(&self) -> i64 {
        self.recent[usize::from(self.newest)]
    }

    /// The GPU's cadence: the shortest spacing of its last few accepted
    /// samples (a dropped sample doubles one spacing, never the shortest);
    /// None before two.
    pub fn cadence_ms(&self) -> Option<i64> {
        let n = usize::from(self.newest);
        (1..RECENT)
            .filter_map(|k| {
                let newer = self.recent[(n + RECENT + 1 - k) % RECENT];
                let older = self.recent[(n + RECENT - k) % RECENT];
                (older != i64::MIN && newer > older).then(|| newer - older)
            })
            .min()
    }

    /// How long this GPU may go quiet before it counts as silent: `floor_ms`
    /// (the configured `silence_ms`, four samples at the default 30 s), or
    /// three and a half of its own samples if longer. At a 90 s cadence two
    /// dropped samples in a row are a 270 s gap, not a lost GPU, and the
    /// silence still shows within five minutes of the first missing sample.
    pub fn silence_ms(&self, floor_ms: i64) -> i64 {
        self.cadence_ms()
            .map_or(floor_ms, |c| floor_ms.max(c.saturating_mul(7) / 2))
    }

    /// Classifies a sample at `ts_ms` without changing anything; a gap is
    /// a silence longer than [`Self::silence_ms`] of `silence_floor_ms`
    /// (worked out only for a gap longer than the floor: not per sample).
    #[inline]
    pub fn classify(&self, ts_ms: i64, tolerance_ms: i64, silence_floor_ms: i64) -> Arrival {
        let last = self.last_ts_ms();
        if last == i64::MIN {
            return Arrival::First;
        }
        if ts_ms > last {
            let gap = ts_ms.saturating_sub(last);
            let gap_from =
                (gap > silence_floor_ms && gap > self.silence_ms(silence_floor_ms)).then_some(last);
            return Arrival::InOrder { gap_from };
        }
        if self.recent.contains(&ts_ms) {
            return Arrival::Duplicate;
        }
        let lag_ms = last.saturating_sub(ts_ms);
        if lag_ms <= tolerance_ms {
            Arrival::Absorbed
        } else {
            Arrival::Late { lag_ms }
        }
    }

    /// Records an accepted (first or in-order) sample.
    #[inline]
    pub fn accept(&mut self, ts_ms: i64) {
        debug_assert!(ts_ms > self.last_ts_ms(), "only newer samples are accepted");
        self.newest = ((usize::from(self.newest) + 1) % RECENT) as u8;
        self.recent[usize::from(self.newest)] = ts_ms;
        self.silent_reported = false;
        self.accepted = self.accepted.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_arrivals() {
        let mut a = ArrivalState::default();
        assert_eq!(a.classify(1_000, 5_000, 120_000), Arrival::First);
        a.accept(1_000);
        a.accept(31_000);
        assert_eq!(
            a.classify(61_000, 5_000, 120_000),
            Arrival::InOrder { gap_from: None }
        );
        assert_eq!(a.classify(1_000, 5_000, 120_000), Arrival::Duplicate);
        assert_eq!(a.classify(31_000, 5_000, 120_000), Arrival::Duplicate);
        assert_eq!(a.classify(28_000, 5_000, 120_000), Arrival::Absorbed);
        assert_eq!(
            a.classify(11_000, 5_000, 120_000),
            Arrival::Late { lag_ms: 20_000 }
        );
        assert_eq!(
            a.classify(500_000, 5_000, 120_000),
            Arrival::InOrder {
                gap_from: Some(31_000)
            }
        );
    }

    #[test]
    fn silence_follows_the_cadence_and_ignores_a_dropped_sample() {
        let mut a = ArrivalState::default();
        assert_eq!((a.cadence_ms(), a.silence_ms(120_000)), (None, 120_000));
        a.accept(0);
        assert_eq!(a.cadence_ms(), None);
        // 30 s: the configured floor stands.
        a.accept(30_000);
        assert_eq!(
            (a.cadence_ms(), a.silence_ms(120_000)),
            (Some(30_000), 120_000)
        );
        // 90 s with one sample dropped (a 180 s spacing): 3.5 × 90 s.
        let mut b = ArrivalState::default();
        for ts in [0, 90_000, 270_000, 360_000, 450_000] {
            b.accept(ts);
        }
        assert_eq!(b.cadence_ms(), Some(90_000));
        assert_eq!(b.silence_ms(120_000), 315_000);
        assert_eq!(
            b.classify(450_000 + 270_000, 5_000, b.silence_ms(120_000)),
            Arrival::InOrder { gap_from: None },
            "two dropped samples are no gap"
        );
    }
}
