//! The running pipeline's side of partition units (`super::super::units`):
//! adopting and releasing units, settling a rebalance, and splitting a
//! round by unit. Only the Kafka source with a checkpoint store calls
//! these; without partitions `Pipeline::send_round` never comes here.

use std::sync::atomic::Ordering::Relaxed;

use features::{GpuId, Sample};

use super::super::buffers;
use super::super::handle::ShardMsg;
use super::super::shard::{Shard, shard_of};
use super::super::units::Route;
use super::{Pipeline, SharedPartitionStore};
use crate::checkpoint::PartitionKey;

impl Pipeline {
    /// Writes partition units' checkpoints to `store` at every barrier.
    pub fn set_partition_store(&mut self, store: SharedPartitionStore) {
        let _ = self.partition_store.set(store);
    }

    /// The id of partition `key` (see [`super::units`]).
    pub fn partition_id(&mut self, key: &PartitionKey) -> u32 {
        self.routing.id_of(key, self.inputs.len())
    }

    /// Records that `gpu`'s samples come from partition `id`: from now on
    /// they go to its unit.
    pub fn note_partition(&mut self, gpu: &GpuId, id: u32) {
        self.routing.note(gpu, id);
    }

    /// Whether this pipeline runs partition `id`'s unit.
    pub fn is_adopted(&self, id: u32) -> bool {
        self.routing.is_adopted(id)
    }

    /// Runs `shard` as partition `key`'s unit from the next batch on: its
    /// GPUs are routed to it and admitted as established (no probation).
    pub fn adopt(&mut self, key: &PartitionKey, shard: Shard) -> anyhow::Result<()> {
        let id = self.partition_id(key);
        for (gpu, _) in shard.gpu_clocks() {
            self.routing.note(gpu, id);
        }
        self.feed
            .adopt(shard.gpu_clocks().map(|(g, t)| (g.clone(), t)));
        self.routing.set_adopted(id, true);
        self.handle()
            .adopt(self.routing.thread(id), id, key.clone(), shard)
    }

    /// The source's side of a release: after a barrier that released the
    /// units of `keys` (`PipelineHandle::checkpoint_release`), their GPUs'
    /// samples are dropped and the admission gate forgets them.
    pub fn release_units(&mut self, keys: &[PartitionKey]) {
        for key in keys {
            let id = self.partition_id(key);
            self.routing.set_adopted(id, false);
            let gpus = self.routing.gpus_of(id);
            self.feed.release(&gpus);
            if !self.pending.contains(key) {
                self.pending.push(key.clone());
            }
        }
    }

    /// Once a rebalance has settled (the next assignment is in, or the
    /// source is leaving): the GPUs of released partitions not taken back
    /// are handed over, so the alert stage forgets them without an event.
    /// A partition assigned straight back (an eager rebalance revokes
    /// everything) keeps its GPUs' alerts. Returns how many were handed
    /// over.
    pub fn settle_released(&mut self) -> anyhow::Result<usize> {
        let mut gpus = Vec::new();
        for key in std::mem::take(&mut self.pending) {
            let id = self.partition_id(&key);
            if !self.routing.is_adopted(id) {
                gpus.extend(self.routing.gpus_of(id));
            }
        }
        if gpus.is_empty() {
            return Ok(0);
        }
        let n = gpus.len();
        self.handle()
            .control(super::super::Command::HandOver(gpus))
            .map_err(|e| anyhow::anyhow!("handing GPUs over: {e}"))?;
        Ok(n)
    }

    /// Partitions whose units this pipeline runs.
    pub fn partitions(&self) -> Vec<PartitionKey> {
        self.routing.adopted_keys()
    }

    /// [`Self::send_round`] with partition units: a unit's samples go to
    /// its thread, grouped by unit (in input order within each); samples
    /// of GPUs with no partition take the FNV path; those of a partition
    /// given away are dropped.
    pub(super) fn send_partitioned(
        &mut self,
        mut batch: Vec<Sample>,
        origin_ms: Option<i64>,
        horizon_ms: Option<i64>,
        clock_ms: Option<i64>,
        evicted: Vec<GpuId>,
    ) -> anyhow::Result<()> {
        let n = self.inputs.len();
        // A unit's GPU evicted by the gate is evicted on its unit's thread.
        let mut evict: Vec<Vec<GpuId>> = vec![Vec::new(); n];
        for gpu in evicted {
            let t = match self.routing.route(&gpu) {
                Route::Unit(_, t) => t,
                Route::Shard => self.placement.evict(&gpu),
                Route::Away => shard_of(&gpu, n),
            };
            evict[t].push(gpu);
        }
        let mut plain: Vec<Vec<Sample>> = (0..n).map(|_| Vec::new()).collect();
        let mut units: Vec<Vec<(u32, Vec<Sample>)>> = (0..n).map(|_| Vec::new()).collect();
        let mut away = 0u64;
        for s in batch.drain(..) {
            match self.routing.route(&s.gpu) {
                Route::Shard => plain[self.placement.shard(&s)].push(s),
                Route::Unit(id, t) => {
                    let list = &mut units[t];
                    match list.iter_mut().find(|(u, _)| *u == id) {
                        Some((_, v)) => v.push(s),
                        None => list.push((id, vec![s])),
                    }
                }
                Route::Away => away += 1,
            }
        }
        buffers::give(batch);
        if away > 0 {
            tracing::debug!(samples = away, "samples of partitions handed over: dropped");
        }
        self.inflight.fetch_add(1, Relaxed);
        for (((tx, samples), evict), units) in self.inputs.iter().zip(plain).zip(evict).zip(units) {
            tx.send(ShardMsg::Batch {
                samples,
                origin_ms,
                horizon_ms,
                clock_ms,
                evict,
                units,
            })
            .map_err(|_| anyhow::anyhow!("a shard stopped"))?;
        }
        Ok(())
    }
}
