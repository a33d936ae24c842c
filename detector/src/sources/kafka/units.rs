//! The Kafka source's partition-aligned state (issue #31 item 1,
//! docs/scaling.md): on assign, each partition's unit is restored from its
//! newest checkpoint in the partition store (or started fresh) and the
//! partition resumes at that checkpoint's offset; on revoke (see
//! `context`), the units are checkpointed, their offsets committed, their
//! locks released and the units dropped without an alert.
//!
//! Runs on the source thread between polls: the rebalance callbacks only
//! record what changed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use std::sync::atomic::Ordering;

use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};

use super::consumer::Partition;
use super::context::{Ctx, commit};
use crate::checkpoint::Offsets;
use crate::pipeline::run::SharedPartitionStore;
use crate::pipeline::shard::Shard;
use crate::pipeline::{Pipeline, PipelineConfig};

/// Longest an assign waits for the partitions' previous owner to let go of
/// their locks (it releases them right after its revoke checkpoint, before
/// the group's new assignment is out; only a dead owner's lease on a
/// bucket, which outlives it, makes anyone wait this long).
const CLAIM_WAIT: Duration = Duration::from_secs(5);

/// What the source needs to run partition units.
pub struct PartitionUnits {
    pub store: SharedPartitionStore,
    /// Settings of fresh units (features, seed, failure model).
    pub pcfg: PipelineConfig,
    /// The instance checkpoint restored at start (its seq), if any: the
    /// first time a partition is taken after start, this instance's own
    /// files of later barriers are passed over, so that its units agree
    /// with its alert stage.
    pub restored_seq: Option<u64>,
    /// Partitions taken since start.
    pub taken: std::sync::Mutex<std::collections::HashSet<Partition>>,
}

impl PartitionUnits {
    pub fn new(
        store: SharedPartitionStore,
        pcfg: PipelineConfig,
        restored_seq: Option<u64>,
    ) -> Self {
        PartitionUnits {
            store,
            pcfg,
            restored_seq,
            taken: std::sync::Mutex::new(std::collections::HashSet::new()),
        }
    }
}

/// One partition taken over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Taken {
    pub key: Partition,
    /// The checkpoint's offset when restored (`None`: started fresh, at
    /// the group's committed offset).
    pub offset: Option<i64>,
    pub gpus: usize,
    /// How long restoring (or starting) it took.
    pub took: Duration,
}

impl PartitionUnits {
    /// Claims `keys` (waiting up to [`CLAIM_WAIT`] for a previous owner),
    /// restores each one's newest checkpoint that restores whole into the
    /// pipeline, or starts it fresh. Returns the offsets to resume at.
    pub(super) fn adopt(
        &self,
        keys: &[Partition],
        pipeline: &mut Pipeline,
    ) -> anyhow::Result<(Offsets, Vec<Taken>)> {
        let t0 = Instant::now();
        self.claim_all(keys);
        let mut resume = Offsets::new();
        let mut taken = Vec::new();
        for key in keys {
            let id = pipeline.partition_id(key);
            if pipeline.is_adopted(id) {
                continue;
            }
            let t1 = Instant::now();
            let restored = {
                let store = self
                    .store
                    .lock()
                    .map_err(|_| anyhow::anyhow!("the partition store's lock is poisoned"))?;
                let first = self
                    .taken
                    .lock()
                    .map(|mut t| t.insert(key.clone()))
                    .unwrap_or(false);
                let me = store.writer().to_owned();
                let cap = self.restored_seq.filter(|_| first);
                store.latest_where(
                    key,
                    |c| cap.is_some_and(|j| c.writer == me && c.instance_seq > j),
                    |c| restore_shard(&c.shard),
                )?
            };
            let t = match restored {
                Some((c, mut shard)) => {
                    shard.set_failure_model(self.pcfg.failure_model.clone());
                    let gpus = shard.gpu_count();
                    pipeline.adopt(key, shard)?;
                    resume.insert(key.clone(), c.offset);
                    tracing::info!(topic = %key.0, partition = key.1, seq = c.seq, offset = c.offset, gpus, "partition state restored");
                    Taken {
                        key: key.clone(),
                        offset: Some(c.offset),
                        gpus,
                        took: t1.elapsed(),
                    }
                }
                None => {
                    pipeline.adopt(key, self.pcfg.new_unit(key)?)?;
                    tracing::info!(topic = %key.0, partition = key.1, "no checkpoint of this partition: its state starts fresh");
                    Taken {
                        key: key.clone(),
                        offset: None,
                        gpus: 0,
                        took: t1.elapsed(),
                    }
                }
            };
            taken.push(t);
        }
        if !taken.is_empty() {
            tracing::info!(
                partitions = taken.len(),
                ms = t0.elapsed().as_millis() as u64,
                "partitions taken over"
            );
        }
        Ok((resume, taken))
    }

    /// Takes the locks of `keys`; a partition whose lock stays held (its
    /// previous owner hangs) is restored anyway, but its checkpoints are
    /// refused (and its offsets not committed) until the lock is free.
    fn claim_all(&self, keys: &[Partition]) {
        let deadline = Instant::now() + CLAIM_WAIT;
        let mut left: Vec<&Partition> = keys.iter().collect();
        loop {
            let mut still = Vec::new();
            if let Ok(mut store) = self.store.lock() {
                for k in left {
                    match store.claim(k) {
                        Ok(()) => {}
                        Err(e) => still.push((k, e)),
                    }
                }
            }
            if still.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                for (k, e) in still {
                    tracing::error!(topic = %k.0, partition = k.1, error = format!("{e:#}"), "partition still locked by its previous owner: restored from its newest checkpoint, but not checkpointed here until the lock is free");
                }
                return;
            }
            left = still.into_iter().map(|(k, _)| k).collect();
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A revoke with partition-aligned state: checkpoint every unit (the
/// revoked ones' files are what their next owner restores), commit,
/// drop the revoked units without an alert, release their locks, and
/// forget where they were (their next assignment restores from the
/// store, which another owner may have moved on).
pub(super) fn revoke(ctx: &Ctx, consumer: &BaseConsumer<Ctx>, tpl: &TopicPartitionList) {
    let keys: Vec<(String, i32)> = tpl
        .elements()
        .iter()
        .map(|e| (e.topic().to_owned(), e.partition()))
        .collect();
    let sh = &ctx.shared;
    if let Ok(mut a) = sh.assigned.lock() {
        a.retain(|k| !keys.contains(k));
    }
    tracing::info!(
        partitions = keys.len(),
        "partitions revoked: checkpointing and handing their state over"
    );
    sh.revoked.store(true, Ordering::Relaxed);
    sh.drop_batch.store(true, Ordering::Relaxed);
    if let Some(cp) = &sh.checkpointer {
        match cp.checkpoint_release(sh.sent_offsets(), keys.clone()) {
            Ok(w) => {
                let mine: crate::checkpoint::Offsets = w
                    .offsets
                    .into_iter()
                    .filter(|(k, _)| keys.contains(k))
                    .collect();
                if let Err(e) = commit(consumer, &mine, CommitMode::Async) {
                    tracing::warn!(error = %e, "committing offsets at revoke");
                }
            }
            // The units were still released (a shard that stopped
            // fails the service anyway); the next owner restores the
            // newest checkpoint there is, and replays from its offset.
            Err(e) => tracing::warn!(error = %e, "checkpoint at revoke failed"),
        }
    }
    if let Some(store) = &sh.store
        && let Ok(mut s) = store.lock()
    {
        for k in &keys {
            s.release(k);
        }
    }
    for m in [&sh.sent, &sh.reseek] {
        if let Ok(mut o) = m.lock() {
            o.retain(|k, _| !keys.contains(k));
        }
    }
    if let Ok(mut et) = sh.event_time.lock() {
        et.retain(|k, _| !keys.contains(k));
    }
    if let Ok(mut r) = sh.released.lock() {
        r.extend(keys);
    }
}

/// Longest a stop waits for its revoke when leaving the group.
const LEAVE_WAIT: Duration = Duration::from_secs(15);

/// Leaves the consumer group (a clean stop, SIGTERM): unsubscribing
/// revokes every partition, and the revoke callback, served by the polls
/// here, checkpoints the units, commits and releases them, so the group's
/// other members take them warm without waiting for a session timeout.
pub(super) fn leave_group(consumer: &BaseConsumer<Ctx>, shared: &super::context::Shared) {
    let held = |s: &super::context::Shared| s.assigned.lock().map(|a| a.len()).unwrap_or(0);
    let before = held(shared);
    consumer.unsubscribe();
    let t = Instant::now();
    while held(shared) > 0 && t.elapsed() < LEAVE_WAIT {
        // A message returned here is not handed over; it is read again
        // by the partition's next owner.
        let _ = consumer.poll(Duration::from_millis(100));
    }
    let left = held(shared);
    if left == 0 {
        tracing::info!(
            partitions = before,
            ms = t.elapsed().as_millis() as u64,
            "left the consumer group: partitions handed over"
        );
    } else {
        tracing::warn!(
            partitions = left,
            "the revoke did not come in time when leaving the group: the partitions' next owner restores their last checkpoint"
        );
    }
}

/// A unit's shard from checkpoint bytes; a decoder that panics on damage
/// it did not foresee is damage too.
fn restore_shard(bytes: &[u8]) -> anyhow::Result<Shard> {
    match catch_unwind(AssertUnwindSafe(|| Shard::restore(bytes))) {
        Ok(r) => r,
        Err(_) => anyhow::bail!("restoring the partition's shard panicked"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::checkpoint::PartitionStore;

    fn key(p: i32) -> Partition {
        ("telemetry".into(), p)
    }

    struct Null;
    impl crate::pipeline::AlertSink for Null {
        fn deliver(&mut self, _: &[alerts::AlertEvent], _: i64) -> anyhow::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn adopt_restores_what_a_revoke_wrote_and_starts_the_rest_fresh() {
        let root = std::env::temp_dir().join(format!("fw-kunits-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (cfg, pcfg) = crate::pipeline::restart_tests::test_config(3);
        let start = |store: &SharedPartitionStore| {
            let mut p = Pipeline::start(
                pcfg.new_shards().expect("shards"),
                crate::pipeline::alerting::AlertStage::new(alerts::AlertEngine::new(
                    cfg.alerts.engine.clone(),
                )),
                Box::new(Null),
                crate::state::SharedState::new(),
                None,
            )
            .expect("start");
            p.set_partition_store(store.clone());
            p
        };
        let store: SharedPartitionStore =
            Arc::new(Mutex::new(PartitionStore::open(&root).expect("store")));
        let units = PartitionUnits::new(store.clone(), pcfg.clone(), None);
        // A checkpoint of partition 1 with 3 GPUs, as a revoke writes it.
        let mut shard = pcfg.new_unit(&key(1)).expect("unit");
        let mut out = crate::pipeline::shard::BatchOutput::default();
        let mut sim = datasets::simulator::Simulator::new(datasets::simulator::SimConfig {
            gpus: 3,
            hours: 0.1,
            seed: 3,
            ..Default::default()
        })
        .expect("sim");
        let mut samples = Vec::new();
        while sim.next_tick(&mut samples).is_some() {}
        shard.process(&samples, &mut out);
        assert_eq!(shard.gpu_count(), 3);
        store
            .lock()
            .expect("lock")
            .write(&crate::checkpoint::PartitionCheckpoint {
                topic: "telemetry".into(),
                partition: 1,
                seq: 1,
                created_ms: 0,
                offset: 77,
                gpus: 3,
                writer: String::new(),
                instance_seq: 1,
                shard: shard.snapshot().expect("snapshot"),
            })
            .expect("write");
        store.lock().expect("lock").release(&key(1));

        let mut p = start(&store);
        let (resume, taken) = units.adopt(&[key(0), key(1)], &mut p).expect("adopt");
        assert_eq!(resume, Offsets::from([(key(1), 77)]));
        assert_eq!(
            taken
                .iter()
                .map(|t| (t.key.clone(), t.offset, t.gpus))
                .collect::<Vec<_>>(),
            vec![(key(0), None, 0), (key(1), Some(77), 3)]
        );
        assert_eq!(p.partitions(), vec![key(0), key(1)]);
        assert_eq!(store.lock().expect("lock").owned(), vec![key(0), key(1)]);
        // Adopting again is a no-op; releasing frees the locks.
        let (again, taken) = units.adopt(&[key(1)], &mut p).expect("again");
        assert!(again.is_empty() && taken.is_empty());
        for k in [key(0), key(1)] {
            store.lock().expect("lock").release(&k);
        }
        assert!(store.lock().expect("lock").owned().is_empty());
        p.finish().expect("finish");
        let _ = std::fs::remove_dir_all(&root);
    }
}
