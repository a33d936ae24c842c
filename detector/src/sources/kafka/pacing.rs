//! Event-time pacing of the Kafka source's partitions: a partition that
//! runs far ahead of the others (after a restart with a backlog, fetches
//! come a partition at a time) is paused until they catch up. Used by
//! `kafka/mod.rs`, which owns the consumer and does the pausing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// A partition this far (event time) ahead of the horizon is paused until
/// the others catch up: after a restart with a backlog, fetches come a
/// partition at a time, and one partition running hours ahead would leave
/// the others' GPUs judged late.
pub(super) const MAX_AHEAD_MS: i64 = 10 * 60_000;

/// ... and only once it has been that far ahead for this long (wall time).
/// A pause drops the partition's prefetched messages; a replay at 1000x
/// event speed crosses [`MAX_AHEAD_MS`] for a fraction of a second whenever
/// one fetch favours a partition, and pausing at each crossing made the
/// consumer refetch what it had dropped from a broker whose fetch cost
/// grows with the backlog (BENCHMARKS.md, issue 7). A restart's backlog
/// keeps a partition hours ahead for much longer than this.
pub(super) const AHEAD_GRACE: Duration = Duration::from_secs(2);

/// Partitions paused for running ahead, and since when each partition
/// still running has been too far ahead.
#[derive(Default)]
pub(super) struct Pacer {
    pub(super) paused: BTreeSet<(String, i32)>,
    far_since: BTreeMap<(String, i32), Instant>,
}

impl Pacer {
    /// Whether partition `k` should now be paused (`Some(true)`) or resumed
    /// (`Some(false)`), given that it is `far` ahead of the horizon or `near`
    /// it. The caller records a pause in `paused` once it succeeds.
    pub(super) fn decide(
        &mut self,
        k: &(String, i32),
        far: bool,
        near: bool,
        now: Instant,
    ) -> Option<bool> {
        let paused = self.paused.contains(k);
        if !far || paused {
            self.far_since.remove(k);
        }
        if far && !paused {
            let since = *self.far_since.entry(k.clone()).or_insert(now);
            (now.duration_since(since) >= AHEAD_GRACE).then_some(true)
        } else if near && paused {
            Some(false)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_paused_only_after_running_ahead_for_the_grace_and_resumed_when_near() {
        let mut p = Pacer::default();
        let k = ("telemetry".to_string(), 3);
        let t0 = Instant::now();
        assert_eq!(p.decide(&k, true, false, t0), None, "just crossed");
        let half = t0 + AHEAD_GRACE / 2;
        assert_eq!(p.decide(&k, true, false, half), None, "within the grace");
        // Dropping back below the limit restarts the grace.
        assert_eq!(p.decide(&k, false, false, half), None);
        assert_eq!(p.decide(&k, true, false, t0 + AHEAD_GRACE), None);
        let late = t0 + AHEAD_GRACE + AHEAD_GRACE;
        assert_eq!(
            p.decide(&k, true, false, late),
            Some(true),
            "ahead for the whole grace"
        );
        p.paused.insert(k.clone());
        assert_eq!(p.decide(&k, true, false, late), None, "already paused");
        assert_eq!(
            p.decide(&k, false, false, late),
            None,
            "between the limit and half of it"
        );
        assert_eq!(
            p.decide(&k, false, true, late),
            Some(false),
            "the others caught up"
        );
        // Another partition has its own clock.
        let other = ("telemetry".to_string(), 0);
        assert_eq!(p.decide(&other, true, false, late), None);
    }
}
