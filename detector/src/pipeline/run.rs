//! The running pipeline: starts one thread per shard and the alert thread,
//! cuts each input batch into rounds and splits every round by GPU over
//! the shards. Every shard gets every round (maybe empty), so the alert
//! thread can read one output per shard per round, in shard order.
//!
//! End of input is the input channels closing: [`Pipeline::finish`] drops
//! them (handles hold them only weakly), each shard drains its queue and
//! stops, and the alert thread stops when every shard's output closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::Context;
use features::Sample;

use super::alert_thread::AlertThread;
use super::alerting::AlertStage;
use super::handle::{Inputs, PipelineHandle, ShardMsg, ShardOutput};
use super::parts::{AlertSink, MAX_ROUND_SPAN_MS, Summary};
use super::shard::{BatchOutput, Shard, shard_of};
use crate::checkpoint::CheckpointStore;
use crate::state::State;

/// Batches queued per shard: at ~4,000 samples a batch, a few hundred ms of
/// work — enough to ride out a slow batch, small enough to bound memory.
const SHARD_QUEUE: usize = 16;
/// Outputs queued per shard for the alert thread.
const OUTPUT_QUEUE: usize = 16;

/// A running pipeline.
pub struct Pipeline {
    inputs: Arc<Inputs>,
    shards: Vec<JoinHandle<Shard>>,
    alert: JoinHandle<anyhow::Result<Summary>>,
    /// Batches sent and not yet through the alert thread.
    inflight: Arc<AtomicUsize>,
    samples: u64,
}

/// Where `batch` (in event-time order, roughly) is cut into rounds: a
/// round starts at a sample more than [`MAX_ROUND_SPAN_MS`] after the
/// first sample of the round before.
pub(super) fn round_cuts(batch: &[Sample]) -> Vec<usize> {
    let mut cuts = Vec::new();
    let Some(first) = batch.first() else {
        return cuts;
    };
    let mut start = first.ts_ms;
    for (i, s) in batch.iter().enumerate() {
        if s.ts_ms > start.saturating_add(MAX_ROUND_SPAN_MS) {
            cuts.push(i);
            start = s.ts_ms;
        }
    }
    cuts
}

/// One shard thread: runs messages until its input closes, then hands the
/// shard back.
fn shard_loop(
    mut shard: Shard,
    rx: Receiver<ShardMsg>,
    otx: SyncSender<ShardOutput>,
    st: State,
) -> Shard {
    crate::priority::apply_to_current_thread();
    for msg in rx {
        let out = match msg {
            ShardMsg::Batch {
                samples,
                origin_ms,
                horizon_ms,
            } => {
                let t = Instant::now();
                let mut out = BatchOutput::default();
                shard.set_silence_horizon(horizon_ms);
                shard.process(&samples, &mut out);
                out.origin_ms = origin_ms;
                out.horizon_ms = horizon_ms;
                st.metrics.shard_latency.observe(t.elapsed().as_secs_f64());
                ShardOutput::Batch(out)
            }
            ShardMsg::Snapshot { request } => ShardOutput::Snapshot {
                state: shard.snapshot(),
                request,
            },
            ShardMsg::Control { request } => ShardOutput::Control { request },
            ShardMsg::Model { model } => {
                // Every shard skips its output alike, so the alert
                // thread's rounds stay aligned.
                shard.set_failure_model(model);
                continue;
            }
        };
        if otx.send(out).is_err() {
            break;
        }
    }
    shard
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
                s.set_export(Some(crate::export::ShardExports::open(x, s.id)?));
            }
            alert_export = Some(crate::export::AlertExports::open(x)?);
        }
        anyhow::ensure!(!shards.is_empty(), "a pipeline needs at least one shard");
        let n = shards.len();
        let mut inputs = Vec::with_capacity(n);
        let mut outputs: Vec<Receiver<ShardOutput>> = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        for shard in shards {
            let (tx, rx) = sync_channel::<ShardMsg>(SHARD_QUEUE);
            let (otx, orx) = sync_channel::<ShardOutput>(OUTPUT_QUEUE);
            let st = state.clone();
            let handle = std::thread::Builder::new()
                .name(format!("shard-{}", shard.id))
                .spawn(move || shard_loop(shard, rx, otx, st))
                .context("spawning a shard thread")?;
            inputs.push(tx);
            outputs.push(orx);
            handles.push(handle);
        }
        let inflight = Arc::new(AtomicUsize::new(0));
        let thread = AlertThread {
            export: alert_export,
            stage,
            sink,
            state,
            store,
            outputs,
            inflight: inflight.clone(),
            cfg_shards: n,
        };
        let alert = std::thread::Builder::new()
            .name("alerts".into())
            .spawn(move || {
                crate::priority::apply_to_current_thread();
                thread.run()
            })
            .context("spawning the alert thread")?;
        Ok(Pipeline {
            inputs: Arc::new(inputs),
            shards: handles,
            alert,
            inflight,
            samples: 0,
        })
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
        mut batch: Vec<Sample>,
        origin_ms: Option<i64>,
        horizon_ms: Option<i64>,
    ) -> anyhow::Result<()> {
        // A round's shards are read one after the other, so a round that
        // spans more event time than a few alert timers (a 4,096-sample
        // file batch of a 64-GPU fleet is half an hour) would let the
        // first shard's rows run the alert clock ahead of the second's:
        // split it into rounds of at most `MAX_ROUND_SPAN_MS`, as a live
        // stream's batches are.
        let cuts = round_cuts(&batch);
        // Split from the back so each sample moves once.
        let mut rounds = Vec::with_capacity(cuts.len() + 1);
        for &cut in cuts.iter().rev() {
            rounds.push(batch.split_off(cut));
        }
        rounds.push(batch);
        for round in rounds.into_iter().rev() {
            self.send_round(round, origin_ms, horizon_ms)?;
        }
        Ok(())
    }

    fn send_round(
        &mut self,
        batch: Vec<Sample>,
        origin_ms: Option<i64>,
        horizon_ms: Option<i64>,
    ) -> anyhow::Result<()> {
        self.samples += batch.len() as u64;
        let n = self.inputs.len();
        let parts: Vec<Vec<Sample>> = if n == 1 {
            vec![batch]
        } else {
            let mut parts: Vec<Vec<Sample>> = (0..n)
                .map(|_| Vec::with_capacity(batch.len() / n + 8))
                .collect();
            for s in batch {
                parts[shard_of(&s.gpu, n)].push(s);
            }
            parts
        };
        self.inflight.fetch_add(1, Relaxed);
        for (tx, samples) in self.inputs.iter().zip(parts) {
            tx.send(ShardMsg::Batch {
                samples,
                origin_ms,
                horizon_ms,
            })
            .map_err(|_| anyhow::anyhow!("a shard stopped"))?;
        }
        Ok(())
    }

    /// Ends input, waits for every stage, returns what they did.
    pub fn finish(self) -> anyhow::Result<(Summary, Vec<Shard>)> {
        // The only strong reference: dropping it closes the inputs once a
        // handle's send in progress (if any) is queued.
        drop(self.inputs);
        let mut shards = Vec::new();
        for h in self.shards {
            shards.push(
                h.join()
                    .map_err(|_| anyhow::anyhow!("a shard thread panicked"))?,
            );
        }
        let mut summary = self
            .alert
            .join()
            .map_err(|_| anyhow::anyhow!("the alert thread panicked"))??;
        summary.samples = self.samples;
        summary.gpus = shards.iter().map(|s| s.gpu_count() as u64).sum();
        summary.state_bytes = shards.iter().map(|s| s.heap_bytes() as u64).sum();
        Ok((summary, shards))
    }
}
