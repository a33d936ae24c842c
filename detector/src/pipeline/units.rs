//! Partition-aligned state units (issue #31 item 1). With the Kafka source
//! and a checkpoint store, each assigned partition's GPUs live in one
//! [`Shard`] of their own, a *unit*: features, forest, trends, change
//! tests, rules and hard-failure stickiness of exactly that partition's
//! GPUs. A unit is what is checkpointed per partition
//! ([`crate::checkpoint::partitions`]), restored by the partition's next
//! owner, and dropped (silently: moved is not lost) when the partition is
//! revoked.
//!
//! Here: on the source's side, [`Routing`] (which unit a GPU's samples go
//! to, and which shard thread runs each unit); on a shard thread's side,
//! [`Units`] (the units that thread runs). Without partitions (files, the
//! simulator, backtests, Kafka without checkpoints) the routing is empty
//! and every sample takes the shard-by-FNV path unchanged.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use features::hash::FxBuild;
use features::{GpuId, Sample};
use models::failure::FailureModel;

use super::shard::{BatchOutput, Shard, shard_of};
use crate::checkpoint::PartitionKey;

/// The shard thread that runs `key`'s unit (FNV-1a of `topic-partition`,
/// so every instance with as many threads agrees).
pub fn thread_of(key: &PartitionKey, threads: usize) -> usize {
    shard_of(&format!("{}-{}", key.0, key.1), threads)
}

/// The seed of a fresh unit: the pipeline's seed and the partition, so a
/// partition's models draw the same random numbers whoever starts them.
pub fn unit_seed(seed: u64, key: &PartitionKey) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.0.as_bytes().iter().chain(&key.1.to_le_bytes()) {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    seed ^ h
}

/// A unit's snapshot at a barrier.
pub(crate) struct UnitSnapshot {
    pub key: PartitionKey,
    pub state: anyhow::Result<Vec<u8>>,
    pub gpus: u64,
}

/// The source side: partitions seen, the unit each GPU belongs to, and
/// which units this pipeline runs now.
#[derive(Default)]
pub(super) struct Routing {
    keys: Vec<PartitionKey>,
    ids: HashMap<PartitionKey, u32>,
    /// Thread of each unit id.
    threads: Vec<usize>,
    adopted: Vec<bool>,
    gpus: HashMap<GpuId, u32, FxBuild>,
}

/// Where one sample goes.
pub(super) enum Route {
    /// No partition known: the shard-by-FNV path.
    Shard,
    /// The unit with this id, on this thread.
    Unit(u32, usize),
    /// A unit this pipeline gave away: dropped.
    Away,
}

impl Routing {
    /// No partition ever seen: every sample takes the FNV path.
    pub(super) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The id of `key` (interned on first sight).
    pub(super) fn id_of(&mut self, key: &PartitionKey, threads: usize) -> u32 {
        if let Some(id) = self.ids.get(key) {
            return *id;
        }
        let id = self.keys.len() as u32;
        self.keys.push(key.clone());
        self.ids.insert(key.clone(), id);
        self.threads.push(thread_of(key, threads));
        self.adopted.push(false);
        id
    }

    pub(super) fn thread(&self, id: u32) -> usize {
        self.threads[id as usize]
    }

    pub(super) fn is_adopted(&self, id: u32) -> bool {
        self.adopted.get(id as usize).copied().unwrap_or(false)
    }

    pub(super) fn set_adopted(&mut self, id: u32, adopted: bool) {
        if let Some(a) = self.adopted.get_mut(id as usize) {
            *a = adopted;
        }
    }

    /// Records that `gpu`'s samples come from unit `id`. Sticky while the
    /// GPU's unit is held: its state is never split over two units (a
    /// sample assembled across messages, the adapter encoding, may be
    /// completed by another partition's message).
    pub(super) fn note(&mut self, gpu: &GpuId, id: u32) {
        match self.gpus.get(gpu) {
            Some(&cur) if cur == id || self.is_adopted(cur) => {}
            _ => {
                self.gpus.insert(gpu.clone(), id);
            }
        }
    }

    /// GPUs of unit `id`.
    pub(super) fn gpus_of(&self, id: u32) -> Vec<GpuId> {
        self.gpus
            .iter()
            .filter(|(_, u)| **u == id)
            .map(|(g, _)| g.clone())
            .collect()
    }

    pub(super) fn route(&self, gpu: &str) -> Route {
        match self.gpus.get(gpu) {
            None => Route::Shard,
            Some(id) if self.is_adopted(*id) => Route::Unit(*id, self.thread(*id)),
            Some(_) => Route::Away,
        }
    }

    /// Partitions this pipeline runs, sorted.
    pub(super) fn adopted_keys(&self) -> Vec<PartitionKey> {
        let mut v: Vec<_> = self
            .keys
            .iter()
            .zip(&self.adopted)
            .filter(|(_, a)| **a)
            .map(|(k, _)| k.clone())
            .collect();
        v.sort();
        v
    }
}

/// A shard thread's units.
#[derive(Default)]
pub(super) struct Units {
    units: BTreeMap<u32, (PartitionKey, Shard)>,
    /// The failure model of the newest hot reload, if one came (a unit
    /// adopted later scores with it).
    model: Option<Option<Arc<FailureModel>>>,
}

impl Units {
    pub(super) fn adopt(&mut self, id: u32, key: PartitionKey, mut shard: Shard) {
        if let Some(m) = &self.model {
            shard.set_failure_model(m.clone());
        }
        self.units.insert(id, (key, shard));
    }

    pub(super) fn set_failure_model(&mut self, model: Option<Arc<FailureModel>>) {
        for (_, s) in self.units.values_mut() {
            s.set_failure_model(model.clone());
        }
        self.model = Some(model);
    }

    pub(super) fn evict(&mut self, gpu: &str) {
        for (_, s) in self.units.values_mut() {
            s.evict(gpu);
        }
    }

    /// Runs each unit's samples (a unit this thread does not run, which
    /// the source never sends, is skipped). Each unit writes its rows and
    /// scores through `thread`'s Parquet writers, if exports are on.
    pub(super) fn process(
        &mut self,
        parts: Vec<(u32, Vec<Sample>)>,
        horizon_ms: Option<i64>,
        out: &mut BatchOutput,
        thread: &mut Shard,
    ) {
        for (id, samples) in parts {
            if let Some((_, s)) = self.units.get_mut(&id) {
                s.set_silence_horizon(horizon_ms);
                let export = thread.take_export();
                let lent = export.is_some();
                if lent {
                    s.set_export(export);
                }
                s.process(&samples, out);
                if lent {
                    thread.set_export(s.take_export());
                }
            } else {
                tracing::warn!(
                    unit = id,
                    samples = samples.len(),
                    "samples for a unit this shard does not run: dropped"
                );
            }
            super::buffers::give(samples);
        }
    }

    /// GPUs in all units.
    pub(super) fn gpu_count(&self) -> usize {
        self.units.values().map(|(_, s)| s.gpu_count()).sum()
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.units.values().map(|(_, s)| s.heap_bytes()).sum()
    }

    /// Every unit's snapshot.
    pub(super) fn snapshot(&self) -> Vec<UnitSnapshot> {
        self.units
            .values()
            .map(|(key, s)| UnitSnapshot {
                key: key.clone(),
                state: s.snapshot(),
                gpus: s.gpu_count() as u64,
            })
            .collect()
    }

    /// Drops the units of `keys`; returns their GPUs.
    pub(super) fn release(&mut self, keys: &[PartitionKey]) -> Vec<GpuId> {
        let ids: Vec<u32> = self
            .units
            .iter()
            .filter(|(_, (k, _))| keys.contains(k))
            .map(|(id, _)| *id)
            .collect();
        let mut gpus = Vec::new();
        for id in ids {
            if let Some((_, s)) = self.units.remove(&id) {
                gpus.extend(s.gpu_clocks().map(|(g, _)| g.clone()));
            }
        }
        gpus
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_stays_in_the_unit_that_holds_it() {
        let mut r = Routing::default();
        assert!(r.is_empty());
        let (a, b) = (r.id_of(&("t".into(), 0), 2), r.id_of(&("t".into(), 1), 2));
        assert_eq!(r.id_of(&("t".into(), 0), 2), a, "interned");
        let gpu: GpuId = "GPU-1".into();
        assert!(matches!(r.route(&gpu), Route::Shard), "unknown GPU");
        r.note(&gpu, a);
        assert!(matches!(r.route(&gpu), Route::Away), "unit not held");
        r.set_adopted(a, true);
        r.set_adopted(b, true);
        assert!(matches!(r.route(&gpu), Route::Unit(u, _) if u == a));
        r.note(&gpu, b);
        assert!(
            matches!(r.route(&gpu), Route::Unit(u, _) if u == a),
            "sticky while held"
        );
        r.set_adopted(a, false);
        assert!(matches!(r.route(&gpu), Route::Away));
        r.note(&gpu, b);
        assert!(
            matches!(r.route(&gpu), Route::Unit(u, _) if u == b),
            "moves once a is given away"
        );
        assert_eq!(r.gpus_of(b), vec![gpu]);
        assert_eq!(r.adopted_keys(), vec![("t".to_owned(), 1)]);
    }
}
