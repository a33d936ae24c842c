//! Peer cohorts and their streaming robust statistics: the part of the
//! feature stage that compares a GPU with GPUs doing the same thing.
//!
//! A cohort is a set of GPUs of one SKU in one workload phase, at one of four
//! widths ([`CohortLevel`]): the same job, else the same host, else the same
//! rack, else the whole (shard's) fleet. Every row a GPU produces is pushed
//! into each of its cohorts' current time bucket (a GPU has one slot per
//! bucket; a second sample in the bucket overwrites it). When a bucket
//! closes, its median / MAD per feature become the cohort's reference; the
//! current bucket's provisional statistics are used instead once they cover
//! at least half as many GPUs (recomputed each time the bucket's membership
//! doubles, so the cost stays O(1) amortized per sample). A GPU is compared
//! with its narrowest cohort whose reference has at least `min_cohort` GPUs;
//! a singleton GPU gets NaN z-scores, never an error.
//!
//! # Sharding trade-off
//! Cohorts need every member's rows, and members may live in other shards.
//! One [`CohortStats`] instance is owned by one shard and sees only that
//! shard's GPUs. Sharding by host (or job) keeps the job and host cohorts
//! whole; rack and fleet cohorts then become per-shard samples of the rack /
//! fleet, which is statistically fine when shards hold hundreds of GPUs but
//! means a rack split across shards is compared piecewise. The alternative
//! (a second exchange stage that merges bucket summaries across shards) costs
//! a channel hop and one bucket of latency; it can be added later by merging
//! [`RobustStats`]-producing rows per key without changing the per-GPU side.

mod robust;
pub mod slab;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub(crate) use robust::median_in_place;
pub use robust::{PEER_FEATURES, RobustStats, Z_CLAMP};
use slab::KeyedSlab;

use crate::phase::Phase;

/// Cohort widths, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[repr(u8)]
pub enum CohortLevel {
    /// GPUs of the same job (and SKU and phase): they run the same code.
    Job = 0,
    /// The same host and SKU (and phase).
    Host = 1,
    /// The same rack, SKU and phase.
    Rack = 2,
    /// Every GPU of the SKU in the phase that this instance sees.
    Fleet = 3,
}

/// Number of cohort levels.
pub const LEVELS: usize = 4;

impl CohortLevel {
    /// Every level, narrowest first.
    pub const ALL: [CohortLevel; LEVELS] = [
        CohortLevel::Job,
        CohortLevel::Host,
        CohortLevel::Rack,
        CohortLevel::Fleet,
    ];
}

/// The identity of one cohort.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CohortKey {
    pub level: CohortLevel,
    /// Job, host or rack name; `None` for the fleet level.
    pub scope: Option<Arc<str>>,
    pub sku: Option<Arc<str>>,
    pub phase: Phase,
}

/// A GPU's place in one cohort's current bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberSlot {
    /// Cohort id; `u32::MAX` when the GPU has no cohort at this level.
    pub cohort: u32,
    bucket: i64,
    index: u32,
}

impl Default for MemberSlot {
    fn default() -> Self {
        MemberSlot {
            cohort: u32::MAX,
            bucket: i64::MIN,
            index: 0,
        }
    }
}

impl MemberSlot {
    /// A slot in cohort `id`, not yet in any bucket.
    pub fn new(id: u32) -> Self {
        MemberSlot {
            cohort: id,
            ..MemberSlot::default()
        }
    }
}

/// One cohort: its open bucket and its references.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cohort {
    bucket: i64,
    /// One column per peer feature, one entry per member (column-major so
    /// that the median's gather is a straight copy).
    values: [Vec<f32>; PEER_FEATURES],
    /// The last closed bucket's values, until its statistics are needed.
    closed: [Vec<f32>; PEER_FEATURES],
    /// `completed` has not been computed from `closed` yet.
    closed_pending: bool,
    members: u32,
    completed: RobustStats,
    completed_bucket: i64,
    provisional: RobustStats,
    next_provisional: u32,
    /// Values changed since `provisional` was computed.
    dirty: bool,
}

impl Cohort {
    fn new(min: u32) -> Self {
        Cohort {
            bucket: i64::MIN,
            values: Default::default(),
            closed: Default::default(),
            closed_pending: false,
            members: 0,
            completed: RobustStats::default(),
            completed_bucket: i64::MIN,
            provisional: RobustStats::default(),
            next_provisional: min,
            dirty: false,
        }
    }
}

/// Absolute floors of each peer feature's scale (see `robust`): about the
/// resolution of the reading, so identical peers do not give infinite z.
/// Order: gpu temp °C, memory temp °C, power W, SM clock MHz, utilization %,
/// temperature residual °C, clock residual MHz, power residual W.
pub const SCALE_FLOORS: [f32; PEER_FEATURES] = [1.0, 1.0, 10.0, 15.0, 2.0, 1.0, 15.0, 10.0];

/// Buckets a closed reference stays usable when a cohort stops reporting.
const FRESH_BUCKETS: i64 = 2;

/// Per-cohort, per-bucket robust statistics for the GPUs one shard owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CohortStats {
    cohorts: KeyedSlab<CohortKey, Cohort>,
    bucket_ms: i64,
    min_cohort: u32,
    #[serde(skip)]
    scratch: Vec<f32>,
}

impl CohortStats {
    /// Buckets of `bucket_ms`; references need `min_cohort` GPUs.
    pub fn new(bucket_ms: i64, min_cohort: u32) -> Self {
        CohortStats {
            cohorts: KeyedSlab::default(),
            bucket_ms,
            min_cohort,
            scratch: Vec::new(),
        }
    }

    /// The id of `key`'s cohort, created when new.
    pub fn resolve(&mut self, key: &CohortKey) -> u32 {
        let min = self.min_cohort;
        self.cohorts.resolve(key, || Cohort::new(min))
    }

    /// Changes when cohort ids may have been reused (after [`Self::gc`]).
    pub fn epoch(&self) -> u32 {
        self.cohorts.epoch()
    }

    /// Adds (or, within the same bucket, replaces) one GPU's values. With
    /// `eager`, the open bucket's provisional statistics are recomputed each
    /// time its membership doubles (single-sample mode); batch mode passes
    /// false and calls [`Self::refresh`] once per batch instead.
    pub fn push(
        &mut self,
        slot: &mut MemberSlot,
        ts_ms: i64,
        values: &[f32; PEER_FEATURES],
        eager: bool,
    ) {
        let b = ts_ms.div_euclid(self.bucket_ms);
        let min = self.min_cohort;
        let scratch = &mut self.scratch;
        let Some(c) = self.cohorts.get_mut(slot.cohort) else {
            return;
        };
        if b > c.bucket {
            if c.members > 0 {
                if c.dirty {
                    // Computed lazily, when a GPU is compared with it.
                    std::mem::swap(&mut c.values, &mut c.closed);
                    c.closed_pending = true;
                    c.completed.n = c.members;
                } else {
                    // Refreshed after the bucket's last row: already exact.
                    c.completed = c.provisional;
                    c.closed_pending = false;
                }
                c.completed_bucket = c.bucket;
            }
            c.values.iter_mut().for_each(Vec::clear);
            c.members = 0;
            c.dirty = false;
            c.provisional = RobustStats::default();
            c.next_provisional = min;
            c.bucket = b;
        }
        if slot.bucket == c.bucket && slot.index < c.members {
            let at = slot.index as usize;
            for (col, v) in c.values.iter_mut().zip(values) {
                col[at] = *v;
            }
        } else {
            slot.bucket = c.bucket;
            slot.index = c.members;
            for (col, v) in c.values.iter_mut().zip(values) {
                col.push(*v);
            }
            c.members += 1;
        }
        c.dirty = true;
        if eager && c.members >= c.next_provisional {
            c.provisional = RobustStats::compute(&c.values, &SCALE_FLOORS, min, scratch);
            c.next_provisional = c.members.saturating_mul(2);
            c.dirty = false;
        }
    }

    /// Brings cohort `id`'s statistics up to date: the closed bucket's if
    /// not computed yet, the open bucket's if rows came since. Called before
    /// a reference is read, so only cohorts that GPUs are actually compared
    /// with pay for their medians.
    pub fn refresh(&mut self, id: u32) {
        self.refresh_closed(id);
        let min = self.min_cohort;
        let scratch = &mut self.scratch;
        if let Some(c) = self.cohorts.get_mut(id)
            && c.dirty
        {
            c.provisional = RobustStats::compute(&c.values, &SCALE_FLOORS, min, scratch);
            c.dirty = false;
        }
    }

    /// Computes the closed bucket's statistics of cohort `id` if pending
    /// (single-sample mode, where the open bucket uses the doubling rule).
    pub fn refresh_closed(&mut self, id: u32) {
        let min = self.min_cohort;
        let scratch = &mut self.scratch;
        if let Some(c) = self.cohorts.get_mut(id)
            && c.closed_pending
        {
            c.completed = RobustStats::compute(&c.closed, &SCALE_FLOORS, min, scratch);
            c.closed_pending = false;
        }
    }

    /// The statistics of the bucket that holds `ts_ms`, as of now (call
    /// [`Self::refresh`] first): the open bucket's or, once it closed, the
    /// closed one's; else the latest fresh closed bucket. Batch mode: rows
    /// are compared with their peers *at the same time*, so synchronized
    /// job behaviour (start, checkpoint dips) cancels out.
    pub fn reference_same_bucket(&self, id: u32, ts_ms: i64) -> Option<&RobustStats> {
        let c = self.cohorts.get(id)?;
        let b = ts_ms.div_euclid(self.bucket_ms);
        let min = self.min_cohort;
        if c.bucket == b && c.provisional.n >= min && !c.dirty {
            return Some(&c.provisional);
        }
        if c.completed_bucket == b && !c.closed_pending && c.completed.n >= min {
            return Some(&c.completed);
        }
        self.reference(id, ts_ms)
    }

    /// The statistics a GPU in cohort `id` at `ts_ms` is compared with, if
    /// they cover at least `min_cohort` GPUs. Call [`Self::refresh_closed`]
    /// (or [`Self::refresh`]) first: a closed bucket whose statistics are
    /// still pending is not used.
    pub fn reference(&self, id: u32, ts_ms: i64) -> Option<&RobustStats> {
        let c = self.cohorts.get(id)?;
        let b = ts_ms.div_euclid(self.bucket_ms);
        let completed = (c.completed_bucket >= b - FRESH_BUCKETS
            && !c.closed_pending
            && c.completed.n >= self.min_cohort)
            .then_some(&c.completed);
        let provisional = (c.bucket == b
            && c.provisional.n >= self.min_cohort
            && c.provisional.n.saturating_mul(2) >= completed.map_or(0, |s| s.n))
        .then_some(&c.provisional);
        provisional.or(completed)
    }

    /// GPUs in cohort `id` as far as this instance knows: the larger of the
    /// last closed bucket and the open one (0 for an unknown id).
    pub fn size(&self, id: u32) -> u32 {
        self.cohorts
            .get(id)
            .map_or(0, |c| c.completed.n.max(c.members))
    }

    /// Drops cohorts with no row for `idle_buckets` buckets before `now_ms`.
    /// Returns how many were dropped.
    pub fn gc(&mut self, now_ms: i64, idle_buckets: i64) -> usize {
        let b = now_ms.div_euclid(self.bucket_ms);
        self.cohorts.retain(|_, c| c.bucket >= b - idle_buckets)
    }

    /// Live cohorts.
    pub fn len(&self) -> usize {
        self.cohorts.len()
    }

    /// True when there is no cohort.
    pub fn is_empty(&self) -> bool {
        self.cohorts.is_empty()
    }

    /// Approximate heap bytes held.
    pub fn approx_heap_bytes(&self) -> usize {
        self.cohorts.table_heap_bytes()
            + self
                .cohorts
                .iter()
                .map(|(k, c)| {
                    c.values
                        .iter()
                        .chain(&c.closed)
                        .map(|v| v.capacity() * 4 + 24)
                        .sum::<usize>()
                        + k.scope.as_ref().map_or(0, |s| s.len() + 16)
                        + k.sku.as_ref().map_or(0, |s| s.len() + 16)
                })
                .sum::<usize>()
            + self.scratch.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(phase: Phase) -> CohortKey {
        CohortKey {
            level: CohortLevel::Host,
            scope: Some("h1".into()),
            sku: Some("H100".into()),
            phase,
        }
    }

    #[test]
    fn buckets_close_into_references_and_slots_dedupe() {
        let mut cs = CohortStats::new(60_000, 3);
        let id = cs.resolve(&key(Phase::Training));
        assert_eq!(cs.resolve(&key(Phase::Training)), id);
        let mut slots = [MemberSlot::new(id); 4];
        for (i, s) in slots.iter_mut().enumerate() {
            cs.push(s, 1_000, &[60.0 + i as f32; PEER_FEATURES], true);
            // A second sample in the same bucket replaces the first.
            cs.push(s, 30_000, &[70.0 + i as f32; PEER_FEATURES], true);
        }
        // Provisional statistics are recomputed when membership doubles:
        // here at 3 GPUs (whose values were then 70, 71, 62).
        let prov = cs.reference(id, 30_000).expect("provisional with 3 GPUs");
        assert_eq!((prov.n, prov.median[0]), (3, 70.0));
        cs.push(&mut slots[0], 61_000, &[0.0; PEER_FEATURES], true);
        cs.refresh_closed(id);
        let r = cs.reference(id, 61_000).expect("completed bucket");
        assert_eq!((r.n, r.median[0]), (4, 71.5));
        assert!(cs.reference(id, 10 * 60_000).is_none(), "stale");
        assert_eq!(cs.gc(10 * 60_000, 3), 1);
        assert!(cs.is_empty());
    }

    #[test]
    fn small_cohorts_have_no_reference() {
        let mut cs = CohortStats::new(60_000, 3);
        let id = cs.resolve(&key(Phase::Idle));
        let mut a = MemberSlot::new(id);
        let mut b = MemberSlot::new(id);
        cs.push(&mut a, 0, &[1.0; PEER_FEATURES], true);
        cs.push(&mut b, 0, &[2.0; PEER_FEATURES], true);
        cs.push(&mut a, 60_000, &[1.0; PEER_FEATURES], true);
        assert!(cs.reference(id, 60_000).is_none());
    }
}
