//! The thermal peer signal of the change tests: a GPU's five-minute mean
//! temperature residual (above what its load and air predict) minus the
//! common part of its host's GPUs in its job and workload phase over the
//! same bucket. Part of [`super`]: it keeps each (host, job, phase)
//! group's bucket values for the last two buckets, so a GPU's bucket is
//! judged once its peers' are in (one bucket later).
//!
//! The common part is the median of the members' residuals *each less its
//! own usual level* (its usual residual in that phase, kept by [`super::fit`]): GPUs
//! keep steady offsets of a few degrees from one another (heat sinks,
//! places in the chassis), so a plain median of the residuals jumped by
//! 2–3 °C whenever a member left or joined the group and the GPUs that
//! stayed read as stepped. Host and job both: GPUs of one host in
//! different jobs differ by their workloads, GPUs of one job on different
//! hosts by their air.

use features::hash::{FxBuild, fnv1a, fnv1a_keyed};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use super::bucket::close_bucket;
use super::{ChangeConfig, MIXED, Signal, Stat};

/// Hours of a phase the `Thermal` baseline needs before the GPU's
/// residual, less that baseline, counts in its group's common part.
const LEVEL_MIN_H: f64 = 0.25;

/// Closes a GPU's bucket of the peer signal: its mean, less its usual
/// level (`levels`: its usual residual per phase, [`super::fit`]), joins
/// its group, and the bucket before (whose group is complete now) is
/// judged.
pub(super) fn close(
    cfg: &ChangeConfig,
    st: &mut Stat,
    levels: &[(f64, f64); 4],
    groups: &mut HostGroups,
    now_ms: i64,
) {
    let pending = st.peer_prev.take();
    let mean = (st.n > 0).then(|| st.sum / f64::from(st.n));
    let this = match (mean, st.group) {
        (Some(m), Some(key)) if st.phase != MIXED => {
            if let Some(&(level, seen_h)) = levels.get(usize::from(st.phase))
                && seen_h >= LEVEL_MIN_H
            {
                groups.push(key, st.bucket, m - level);
            }
            Some((st.bucket, m, key, st.phase))
        }
        _ => None,
    };
    if let Some((b, m, key, phase)) = pending
        && let Some(med) = groups.median(key, b)
    {
        let (sum, n, ph) = (st.sum, st.n, st.phase);
        (st.sum, st.n, st.phase) = (m - med, 1, phase);
        close_bucket(cfg, Signal::ThermalPeer, st, None, None, now_ms);
        (st.sum, st.n, st.phase) = (sum, n, ph);
    }
    st.peer_prev = this;
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
}

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
    pub(super) fn prune(&mut self, before: i64) {
        self.groups.retain(|_, g| g.bucket >= before);
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.groups.len() * 96
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
        g.prune(14);
        assert_eq!(g.median(k, 13), None);
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
