//! The running pipeline: starts one thread per shard and the alert thread,
//! cuts each input batch into rounds and splits every round by GPU over
//! the shards. Every shard gets every round (maybe empty), so the alert
//! thread can read one output per shard per round, in shard order.
//!
//! End of input is the input channels closing: [`Pipeline::finish`] drops
//! them (handles hold them only weakly), each shard drains its queue and
//! stops, and the alert thread stops when every shard's output closes.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context;
use features::{GpuId, Sample};

use super::alert_thread::AlertThread;
use super::alerting::AlertStage;
use super::buffers;
use super::feed::{Feed, Round};
use super::handle::{Inputs, PipelineHandle, ShardMsg, ShardOutput};
use super::parts::{AlertSink, Summary};
use super::placement::Placement;
use super::shard::{BatchOutput, Shard};
use super::units::{Routing, Units};
use crate::checkpoint::{CheckpointStore, PartitionKey, PartitionStore};
use crate::sources::DeadLetters;
use crate::state::State;

/// Batches queued per shard: at ~4,000 samples a batch, a few hundred ms of
/// work — enough to ride out a slow batch, small enough to bound memory.
const SHARD_QUEUE: usize = 16;
/// Outputs queued per shard for the alert thread.
const OUTPUT_QUEUE: usize = 16;
/// The alert thread's name in component health.
const ALERT_STAGE: &str = "alert_stage";

/// A running pipeline.
pub struct Pipeline {
    inputs: Arc<Inputs>,
    shards: Vec<JoinHandle<(Shard, Units)>>,
    alert: JoinHandle<anyhow::Result<Summary>>,
    /// Batches sent and not yet through the alert thread.
    inflight: Arc<AtomicUsize>,
    /// Admission and rounds (see [`super::feed`]).
    feed: Feed,
    /// Where refused samples go (shared with the feed and the alert
    /// thread, which dead-letters what the feature engine rejects).
    dead: Arc<OnceLock<DeadLetters>>,
    /// Partition units: which GPU goes to which (empty without them).
    routing: Routing,
    /// Which shard runs each GPU without partitions (hosts together).
    placement: Placement,
    /// Where the alert thread writes partition checkpoints.
    partition_store: Arc<OnceLock<SharedPartitionStore>>,
    /// With a fleet topic: the alert thread's writer to it.
    fleet: Arc<OnceLock<Arc<crate::fleet::publish::Publisher>>>,
    /// Partitions released whose GPUs the alert stage still knows, until
    /// the rebalance settles ([`Pipeline::settle_released`]).
    pending: Vec<PartitionKey>,
}

mod partitioned;

/// The partition checkpoint store, shared by the source (claims, restores,
/// releases) and the alert thread (writes).
pub type SharedPartitionStore = Arc<std::sync::Mutex<PartitionStore>>;

/// One shard thread: runs messages until its input closes, then hands the
/// shard (and its partition units) back.
fn shard_loop(
    mut shard: Shard,
    rx: Receiver<ShardMsg>,
    otx: SyncSender<ShardOutput>,
    st: State,
) -> (Shard, Units) {
    crate::priority::apply_to_current_thread();
    let name = format!("shard-{}", shard.id);
    // Partition units this thread runs (Kafka with a checkpoint store).
    let mut units = Units::default();
    let _guard = crate::health::PanicGuard {
        health: &st.health,
        name: name.clone(),
    };
    for msg in rx {
        let out = match msg {
            ShardMsg::Batch {
                samples,
                origin_ms,
                horizon_ms,
                clock_ms,
                evict,
                units: parts,
            } => {
                crate::faults::maybe_panic(&name);
                let t = Instant::now();
                let mut out = BatchOutput::default();
                for gpu in evict {
                    shard.evict(&gpu);
                    units.evict(&gpu);
                    out.evicted.push(gpu);
                }
                shard.set_silence_horizon(horizon_ms);
                shard.process(&samples, &mut out);
                super::buffers::give(samples);
                if !parts.is_empty() {
                    units.process(parts, horizon_ms, &mut out, &mut shard);
                }
                out.origin_ms = origin_ms;
                out.horizon_ms = horizon_ms;
                out.clock_ms = clock_ms;
                st.metrics.shard_latency.observe(t.elapsed().as_secs_f64());
                ShardOutput::Batch(out)
            }
            ShardMsg::Snapshot { request, release } => ShardOutput::Snapshot {
                state: shard.snapshot(),
                units: units.snapshot(),
                released: units.release(&release),
                request,
            },
            ShardMsg::Adopt { id, key, shard: s } => {
                units.adopt(id, key, *s);
                continue;
            }
            ShardMsg::Control { request } => ShardOutput::Control { request },
            ShardMsg::Model { model } => {
                // Every shard skips its output alike, so the alert
                // thread's rounds stay aligned.
                units.set_failure_model(model.clone());
                shard.set_failure_model(model);
                continue;
            }
        };
        if otx.send(out).is_err() {
            break;
        }
    }
    (shard, units)
}

impl Pipeline {
    /// Starts shard threads (with the given, maybe restored, shards) and
    /// the alert thread. With a `store`, barrier requests write checkpoints.
    pub fn start(
        shards: Vec<Shard>,
        stage: AlertStage,
        sink: Box<dyn AlertSink>,
        state: State,
        store: Option<CheckpointStore>,
    ) -> anyhow::Result<Self> {
        Self::start_with(shards, stage, sink, state, store, None)
    }

    /// As [`Pipeline::start`], exporting features, scores and alert events
    /// to Parquet under `export`.
    pub fn start_with(
        mut shards: Vec<Shard>,
        stage: AlertStage,
        sink: Box<dyn AlertSink>,
        state: State,
        store: Option<CheckpointStore>,
        export: Option<&crate::export::ExportSettings>,
    ) -> anyhow::Result<Self> {
        let mut alert_export = None;
        if let Some(x) = export {
            for s in &mut shards {
                let mut w = crate::export::ShardExports::open(x, s.id)?;
                w.report_to(state.clone(), s.id);
                s.set_export(Some(w));
            }
            let mut w = crate::export::AlertExports::open(x)?;
            w.report_to(state.clone());
            alert_export = Some(w);
        }
        anyhow::ensure!(!shards.is_empty(), "a pipeline needs at least one shard");
        let dead = Arc::new(OnceLock::new());
        let feed = Feed::new(
            shards[0].feature_config(),
            shards.iter().flat_map(Shard::gpu_clocks),
            state.clone(),
            Arc::clone(&dead),
        );
        let n = shards.len();
        let placed: Vec<(usize, GpuId)> = shards
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.gpu_clocks().map(move |(g, _)| (i, g.clone())))
            .collect();
        let placement = Placement::new(n, placed);
        let mut inputs = Vec::with_capacity(n);
        let mut outputs: Vec<Receiver<ShardOutput>> = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        for shard in shards {
            let (tx, rx) = sync_channel::<ShardMsg>(SHARD_QUEUE);
            let (otx, orx) = sync_channel::<ShardOutput>(OUTPUT_QUEUE);
            let st = state.clone();
            state.health.register(&format!("shard-{}", shard.id), true);
            let handle = std::thread::Builder::new()
                .name(format!("shard-{}", shard.id))
                .spawn(move || shard_loop(shard, rx, otx, st))
                .context("spawning a shard thread")?;
            inputs.push(tx);
            outputs.push(orx);
            handles.push(handle);
        }
        let inflight = Arc::new(AtomicUsize::new(0));
        if store.is_some() {
            state
                .health
                .register(super::alert_thread::CHECKPOINTER, false);
        }
        let partition_store = Arc::new(OnceLock::new());
        let fleet = Arc::new(OnceLock::new());
        let thread = AlertThread {
            fleet: fleet.clone(),
            partitions: partition_store.clone(),
            dead: dead.clone(),
            clock_ms: None,
            export: alert_export,
            stage,
            sink,
            state: state.clone(),
            store,
            outputs,
            inflight: inflight.clone(),
            cfg_shards: n,
        };
        state.health.register(ALERT_STAGE, true);
        let st = state.clone();
        let alert = std::thread::Builder::new()
            .name("alerts".into())
            .spawn(move || {
                crate::priority::apply_to_current_thread();
                let _guard = crate::health::PanicGuard {
                    health: &st.health,
                    name: ALERT_STAGE.to_owned(),
                };
                let result = thread.run();
                if let Err(e) = &result {
                    st.health.down(ALERT_STAGE, format!("{e:#}"));
                }
                result
            })
            .context("spawning the alert thread")?;
        Ok(Pipeline {
            inputs: Arc::new(inputs),
            shards: handles,
            alert,
            inflight,
            feed,
            dead,
            routing: Routing::default(),
            placement,
            partition_store,
            fleet,
            pending: Vec::new(),
        })
    }

    /// Sends assessments and silence changes to the fleet topic instead of
    /// this instance's alert stage (`crate::fleet`). Call before any input.
    pub fn set_fleet(&mut self, publisher: Arc<crate::fleet::publish::Publisher>) {
        let _ = self.fleet.set(publisher);
    }

    /// Writes refused samples (admission and feature engine) to `dead`.
    pub fn set_dead_letters(&mut self, dead: DeadLetters) {
        let _ = self.dead.set(dead);
    }

    /// Sends the round the feed holds back (history is cut at event-time
    /// boundaries): call before a checkpoint, which covers only what the
    /// shards have seen. A no-op for live and partitioned input.
    pub fn flush(&mut self) -> anyhow::Result<()> {
        match self.feed.flush() {
            Some(round) => self.send_round(round),
            None => Ok(()),
        }
    }

    /// Live input: a sample too far ahead of the wall clock is refused.
    pub fn set_live(&mut self, live: bool) {
        self.feed.set_live(live);
    }

    /// At most `max` GPUs tracked at once (see `features::admission`).
    pub fn set_max_gpus(&mut self, max: usize) {
        self.feed.set_max_gpus(max);
    }

    /// True when the shards have a full queue of work: a source that can
    /// pause (Kafka) should, rather than block in [`Pipeline::send`].
    pub fn is_full(&self) -> bool {
        self.inflight.load(Relaxed) + 2 >= SHARD_QUEUE
    }

    /// A handle that requests checkpoints, sends commands and models.
    pub fn handle(&self) -> PipelineHandle {
        PipelineHandle::new(&self.inputs)
    }

    /// Hands a batch to the shards; blocks while they are full.
    pub fn send(&mut self, batch: Vec<Sample>) -> anyhow::Result<()> {
        self.send_from(batch, None, None)
    }

    /// Like [`Pipeline::send`], with the wall time the oldest sample was
    /// produced (for the broker-to-decision latency metric) and the event
    /// time all input partitions have reached (silence is judged by it).
    pub fn send_from(
        &mut self,
        batch: Vec<Sample>,
        origin_ms: Option<i64>,
        horizon_ms: Option<i64>,
    ) -> anyhow::Result<()> {
        for round in self.feed.push(batch, origin_ms, horizon_ms) {
            self.send_round(round)?;
        }
        Ok(())
    }

    fn send_round(&mut self, round: Round) -> anyhow::Result<()> {
        let Round {
            samples: batch,
            origin_ms,
            horizon_ms,
            clock_ms,
            evict: evicted,
        } = round;
        if !self.routing.is_empty() {
            return self.send_partitioned(batch, origin_ms, horizon_ms, clock_ms, evicted);
        }
        let n = self.inputs.len();
        let mut evict: Vec<Vec<GpuId>> = vec![Vec::new(); n];
        for gpu in evicted {
            evict[self.placement.evict(&gpu)].push(gpu);
        }
        let parts: Vec<Vec<Sample>> = if n == 1 {
            vec![batch]
        } else {
            let mut batch = batch;
            let mut parts: Vec<Vec<Sample>> =
                (0..n).map(|_| buffers::take(batch.len() / n + 8)).collect();
            for s in batch.drain(..) {
                parts[self.placement.shard(&s)].push(s);
            }
            buffers::give(batch);
            parts
        };
        self.inflight.fetch_add(1, Relaxed);
        for ((tx, samples), evict) in self.inputs.iter().zip(parts).zip(evict) {
            tx.send(ShardMsg::Batch {
                samples,
                origin_ms,
                horizon_ms,
                clock_ms,
                evict,
                units: Vec::new(),
            })
            .map_err(|_| anyhow::anyhow!("a shard stopped"))?;
        }
        Ok(())
    }

    /// Ends input, waits for every stage, returns what they did.
    pub fn finish(mut self) -> anyhow::Result<(Summary, Vec<Shard>)> {
        if let Some(round) = self.feed.finish() {
            self.send_round(round)?;
        }
        // The only strong reference: dropping it closes the inputs once a
        // handle's send in progress (if any) is queued.
        drop(self.inputs);
        let mut shards = Vec::new();
        let (mut unit_gpus, mut unit_bytes) = (0u64, 0u64);
        for h in self.shards {
            let (shard, units) = h
                .join()
                .map_err(|_| anyhow::anyhow!("a shard thread panicked"))?;
            unit_gpus += units.gpu_count() as u64;
            unit_bytes += units.heap_bytes() as u64;
            shards.push(shard);
        }
        let mut summary = self
            .alert
            .join()
            .map_err(|_| anyhow::anyhow!("the alert thread panicked"))??;
        summary.samples = self.feed.samples;
        summary.rejected += self.feed.refused;
        summary.gpus = shards.iter().map(|s| s.gpu_count() as u64).sum::<u64>() + unit_gpus;
        summary.state_bytes =
            shards.iter().map(|s| s.heap_bytes() as u64).sum::<u64>() + unit_bytes;
        Ok((summary, shards))
    }
}
