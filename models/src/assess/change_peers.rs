//! The thermal peer signal of the change tests: a GPU's five-minute mean
//! temperature residual (above what its load and air predict) minus the
//! common part of its host's GPUs in its job and workload phase over the
//! same bucket. Part of [`super`]: it keeps each (host, job, phase)
//! group's bucket values for the last two buckets, so a GPU's bucket is
//! judged once its peers' are in (with its second row after the close).
//!
//! The common part is the median of the members' residuals *each less its
//! usual place among them* (this signal's baseline in that phase; in a
//! phase's first hour, its usual residual, kept by [`super::fit`]): GPUs
//! keep steady offsets of a few degrees from one another (heat sinks,
//! places in the chassis), so a plain median of the residuals jumped by
//! 2–3 °C whenever a member left or joined the group and the GPUs that
//! stayed read as stepped; and a GPU's usual residual follows whatever the
//! whole group does, so a median less those lagged every common drift.
//! Host and job both: GPUs of one host in different jobs differ by their
//! workloads, GPUs of one job on different hosts by their air. Without a
//! job label (the label is optional), the GPUs of a host that entered the
//! phase within [`COHORT_JOIN_MS`] of one another stand for a job
//! ([`HostGroups::key`]).

use features::hash::{FxBuild, fnv1a, fnv1a_keyed};
use features::{Col, FeatureRow};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use super::bucket::close_bucket;
use super::{ChangeConfig, MIXED, Signal, Stat};

/// Hours of a phase the `Thermal` baseline needs before the GPU's
/// residual, less that baseline, counts in its group's common part.
const LEVEL_MIN_H: f64 = 0.25;

/// Hours of a phase after which a GPU counts in its group's common part
/// less its usual place among them (the peer signal's baseline), not less
/// its own residual's level.
const OFFSET_AFTER_H: f64 = 1.0;

/// Closes a GPU's bucket of the peer signal: its mean, less its usual
/// place among its peers (in a phase's first hour its usual residual,
/// `levels`, per phase, from [`super::fit`]), joins its group and waits
/// to be judged ([`settle`]); a bucket still waiting is judged first.
pub(super) fn close(
    cfg: &ChangeConfig,
    st: &mut Stat,
    levels: &[(f64, f64); 4],
    groups: &mut HostGroups,
    now_ms: i64,
) {
    settle(cfg, st, groups, now_ms);
    let mean = (st.n > 0).then(|| st.sum / f64::from(st.n));
    let this = match (mean, st.group) {
        (Some(m), Some(key)) if st.phase != MIXED => {
            if let Some(&(level, seen_h)) = levels.get(usize::from(st.phase))
                && seen_h >= LEVEL_MIN_H
            {
                // Once the GPU has its usual place among its peers, that
                // place is its level: its own residual's level follows
                // what the whole group does (a young expectation model
                // drifting under a job, the room), so the common part
                // less it lagged every common drift, and a drift of +6 °C
                // over a job read as each GPU's own.
                let usual = match st.phases.get(usize::from(st.phase)) {
                    Some(&(place, _, h)) if seen_h >= OFFSET_AFTER_H && h > 0.0 => place,
                    _ => level,
                };
                groups.push(key, st.bucket, m - usual);
            }
            Some((st.bucket, m, key, st.phase))
        }
        _ => None,
    };
    st.peer_prev = this;
}

/// Judges the GPU's closed bucket against its group's median, once the
/// group's members on the same scrape have closed theirs: with the GPU's
/// second row after the close (see [`super::fit::settle`]).
pub(super) fn settle(cfg: &ChangeConfig, st: &mut Stat, groups: &HostGroups, now_ms: i64) {
    if let Some((b, m, key, phase)) = st.peer_prev.take()
        && let Some(med) = groups.median(key, b)
    {
        let (sum, n, ph) = (st.sum, st.n, st.phase);
        (st.sum, st.n, st.phase) = (m - med, 1, phase);
        close_bucket(cfg, Signal::ThermalPeer, st, None, None, now_ms);
        (st.sum, st.n, st.phase) = (sum, n, ph);
    }
}

/// Whether the GPU's closed bucket is due to be judged with this row.
pub(super) fn due(st: &Stat) -> bool {
    st.peer_prev.is_some() && st.n >= 1
}

/// Fewest GPUs a group's median needs (the GPU itself included).
const MIN_GROUP: usize = 3;

/// One group's bucket means: the open bucket's and the one before.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Group {
    bucket: i64,
    cur: Vec<f64>,
    prev: Vec<f64>,
}

/// Every group's recent bucket means.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct HostGroups {
    groups: HashMap<u64, Group, FxBuild>,
    /// Per host and phase, the phase runs its unlabelled GPUs entered
    /// together: (when the first entered, when last asked for).
    #[serde(default)]
    cohorts: HashMap<u64, Vec<(i64, i64)>, FxBuild>,
}

/// GPUs without a job label that entered a phase this close together
/// (the phase's hysteresis holds a few samples; a job's GPUs cross it
/// within a scrape or two of one another) are taken for one job.
const COHORT_JOIN_MS: i64 = 120_000;

/// A cohort nobody has asked for in this long has ended.
const COHORT_KEEP_MS: i64 = 3_600_000;

/// The key of a (host, job, phase) group: FNV-1a of the three, with
/// separators.
pub(super) fn group_key(host: Option<&str>, job: Option<&str>, phase: u8) -> Option<u64> {
    let (host, job) = (host?, job?);
    let rest: [&[u8]; 3] = [&[0xff], job.as_bytes(), &[0xfe, phase]];
    Some(
        rest.iter()
            .fold(fnv1a(host.as_bytes()), |h, part| fnv1a_keyed(h, part)),
    )
}

impl HostGroups {
    /// [`Self::key`] of a row in `phase` (when it entered the phase: its
    /// age in it, from the feature stage).
    pub(super) fn row_key(&mut self, row: &FeatureRow, phase: u8) -> Option<u64> {
        let age_s = f64::from(row.get(Col::PhaseAgeS));
        let entered = age_s.is_finite().then(|| row.ts_ms - (age_s * 1e3) as i64);
        let (host, job) = (row.topo.host.as_deref(), row.topo.job.as_deref());
        self.key(host, job, phase, entered, row.ts_ms)
    }

    /// The thermal peer group of a GPU in `phase`: with a job label, its
    /// host, job and phase ([`group_key`]); without one, its host's other
    /// unlabelled GPUs that entered the phase with it (`entered_ms`,
    /// within [`COHORT_JOIN_MS`]): GPUs that start and stop together run
    /// one job, so a host running two jobs makes two groups once either
    /// has changed phase. (The phase a GPU is first seen in was "entered"
    /// by all at once: until then a host's GPUs in one phase are one
    /// group. Grouping them only after a change of phase cost 2 of 256
    /// failures warned ≥ 1 h ahead on eight seeds, no false warning
    /// fewer: each member counts less its usual place among them, which
    /// takes out the steady difference two jobs make.)
    pub(super) fn key(
        &mut self,
        host: Option<&str>,
        job: Option<&str>,
        phase: u8,
        entered_ms: Option<i64>,
        now_ms: i64,
    ) -> Option<u64> {
        if job.is_some() || phase == MIXED {
            return group_key(host, job, phase);
        }
        let entered = entered_ms?;
        let base = fnv1a_keyed(fnv1a(host?.as_bytes()), &[0xfc, phase]);
        let runs = self.cohorts.entry(base).or_default();
        let at = match runs
            .iter()
            .position(|&(a, _)| (a - entered).abs() <= COHORT_JOIN_MS)
        {
            Some(i) => i,
            None => {
                runs.push((entered, now_ms));
                runs.len() - 1
            }
        };
        runs[at].1 = runs[at].1.max(now_ms);
        Some(fnv1a_keyed(base, &runs[at].0.to_le_bytes()))
    }

    /// Adds a GPU's mean for `bucket` to its group.
    pub(super) fn push(&mut self, key: u64, bucket: i64, mean: f64) {
        let g = self.groups.entry(key).or_default();
        if bucket > g.bucket {
            g.prev = if bucket == g.bucket + 1 {
                std::mem::take(&mut g.cur)
            } else {
                Vec::new()
            };
            g.cur.clear();
            g.bucket = bucket;
        }
        if bucket == g.bucket {
            g.cur.push(mean);
        } else if bucket == g.bucket - 1 {
            g.prev.push(mean);
        }
    }

    /// The group's means for `bucket`, if it is one of the two kept.
    fn values(&self, key: u64, bucket: i64) -> Option<&Vec<f64>> {
        let g = self.groups.get(&key)?;
        [(g.bucket, &g.cur), (g.bucket - 1, &g.prev)]
            .into_iter()
            .find_map(|(b, v)| (b == bucket).then_some(v))
    }

    /// The median of the group's means for `bucket`, if it is one of the
    /// two kept and has enough members.
    pub(super) fn median(&self, key: u64, bucket: i64) -> Option<f64> {
        let v = self.values(key, bucket)?;
        if v.len() < MIN_GROUP {
            return None;
        }
        crate::stats::median(&mut v.clone())
    }

    /// The median of the group's other means for `bucket` (`own`, the
    /// GPU's, is among them when given) and how many there are.
    pub(super) fn others(&self, key: u64, bucket: i64, own: Option<f64>) -> Option<(f64, usize)> {
        let mut others = self.values(key, bucket)?.clone();
        if let Some(own) = own {
            let at = others.iter().position(|&x| x == own)?;
            others.swap_remove(at);
        }
        let n = others.len();
        crate::stats::median(&mut others).map(|m| (m, n))
    }

    /// [`Self::others`]' median, when there are `min_others` at least.
    #[cfg(test)]
    fn median_of_others(
        &self,
        key: u64,
        bucket: i64,
        own: Option<f64>,
        min_others: usize,
    ) -> Option<f64> {
        self.others(key, bucket, own)
            .filter(|&(_, n)| n >= min_others)
            .map(|(m, _)| m)
    }

    /// Drops groups not seen since `before` (jobs that ended).
    pub(super) fn prune(&mut self, before: i64, now_ms: i64) {
        self.groups.retain(|_, g| g.bucket >= before);
        self.cohorts.retain(|_, runs| {
            runs.retain(|&(_, asked)| asked >= now_ms - COHORT_KEEP_MS);
            !runs.is_empty()
        });
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.groups.len() * 96 + self.cohorts.len() * 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_groups_median_is_kept_for_two_buckets() {
        let mut g = HostGroups::default();
        let k = group_key(Some("node-1"), Some("job"), 2).expect("key");
        for t in [60.0, 61.0, 65.0] {
            g.push(k, 10, t);
        }
        assert_eq!(g.median(k, 10), Some(61.0));
        g.push(k, 11, 62.0);
        assert_eq!(g.median(k, 10), Some(61.0), "the bucket before stays");
        assert_eq!(g.median(k, 11), None, "one GPU is no group");
        g.push(k, 10, 70.0);
        assert_eq!(
            g.median(k, 10),
            Some(63.0),
            "a late GPU joins the bucket before"
        );
        g.push(k, 13, 60.0);
        assert_eq!(g.median(k, 11), None, "a gap drops both");
        assert_ne!(group_key(Some("node-1"), Some("job"), 3), Some(k));
        // (Stable across builds: checkpoints keep these keys.)
        assert_eq!(k, fnv1a(b"node-1\xffjob\xfe\x02"));
        assert_eq!(group_key(None, Some("job"), 2), None);
        g.prune(14, 0);
        assert_eq!(g.median(k, 13), None);
    }

    #[test]
    fn unlabelled_gpus_that_entered_a_phase_together_are_one_group() {
        let mut g = HostGroups::default();
        let h = Some("node-1");
        let min = 60_000;
        let key = |g: &mut HostGroups, host, entered: i64, now: i64| {
            g.key(host, None, 2, Some(entered), now)
        };
        let a = key(&mut g, h, 60 * min, 60 * min).expect("a cohort");
        assert_eq!(key(&mut g, h, 61 * min, 61 * min), Some(a), "a minute on");
        assert_eq!(key(&mut g, h, 59 * min, 62 * min), Some(a), "and before");
        let b = key(&mut g, h, 90 * min, 90 * min).expect("a cohort");
        assert_ne!(a, b, "half an hour later: another job");
        assert_ne!(key(&mut g, Some("node-2"), 60 * min, 90 * min), Some(a));
        let idle = g.key(h, None, 0, Some(60 * min), 90 * min);
        assert!(idle.is_some() && idle != Some(a), "idle: another group");
        let first = key(&mut g, h, 0, 90 * min);
        assert!(
            first.is_some() && first != Some(a),
            "the phase they were first seen in"
        );
        assert_eq!(g.key(h, None, 2, None, 90 * min), None, "no age");
        assert_eq!(
            g.key(h, Some("job"), 2, None, 90 * min),
            group_key(h, Some("job"), 2),
            "a job label decides"
        );
        // A cohort still asked for is kept; one nobody asked for in an
        // hour is gone, and a GPU entering then starts another.
        key(&mut g, h, 60 * min, 150 * min);
        g.prune(0, 160 * min);
        assert_eq!(key(&mut g, h, 60 * min, 161 * min), Some(a));
        let b2 = key(&mut g, h, 91 * min, 161 * min).expect("a cohort");
        assert_ne!(b2, b, "forgotten");
    }

    #[test]
    fn the_median_of_others_leaves_the_gpu_itself_out() {
        let mut g = HostGroups::default();
        let k = fnv1a(b"node-1");
        for x in [0.1, -0.2, 5.0] {
            g.push(k, 7, x);
        }
        assert_eq!(g.median_of_others(k, 7, Some(5.0), 1), Some(-0.05));
        assert_eq!(g.median_of_others(k, 7, None, 1), Some(0.1));
        assert_eq!(g.median_of_others(k, 7, Some(5.0), 3), None, "two others");
        assert_eq!(g.median_of_others(k, 7, Some(9.0), 1), None, "not a member");
        assert_eq!(g.median_of_others(k, 6, None, 1), None);
    }
}
