//! The sharded pipeline: a dispatcher splits each input batch by GPU (the
//! Kafka key hash) over shard threads; each shard runs features and models
//! synchronously; one alert thread consumes the shards' outputs and drives
//! the alert engine and the sink.
//!
//! Every arrow is a bounded channel, so a slow stage stops the source
//! (backpressure) instead of growing memory; [`Pipeline::is_full`] lets a
//! Kafka source pause its partitions before it would block. The alert
//! thread takes shard outputs in a fixed order (batch by batch, shard 0
//! first), so the same input gives the same alerts whatever the thread
//! timing: live, backtest and tests agree.
//!
//! Checkpoints ride the same channels as a barrier: every shard serializes
//! its state when the barrier reaches it (after every batch sent before
//! it), the alert thread adds its own and the sink's state and writes one
//! atomic file with the source offsets the barrier carried
//! ([`crate::checkpoint`]). No locks, no pause of the hot path.

pub mod alerting;
mod rack_air;
#[cfg(test)]
pub(crate) mod restart_tests;
pub mod shard;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, Sender, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Instant;

use alerts::AlertEvent;
use anyhow::Context;
use features::{FeatureConfig, Sample};

use crate::checkpoint::{Checkpoint, CheckpointStore, Offsets};
use crate::state::State;
use alerting::AlertStage;
use shard::{Shard, ShardOutput, shard_of};

/// Batches queued per shard: at ~4,000 samples a batch, a few hundred ms of
/// work — enough to ride out a slow batch, small enough to bound memory.
const SHARD_QUEUE: usize = 16;
/// Outputs queued per shard for the alert thread.
const OUTPUT_QUEUE: usize = 16;

/// Where alert events go: the router and outbox (serve), a file (backtest),
/// or a vector (tests).
pub trait AlertSink: Send {
    /// Handles state changes; `now_ms` is the event-time watermark.
    fn deliver(&mut self, events: &[AlertEvent], now_ms: i64) -> anyhow::Result<()>;
    /// End of input.
    fn finish(&mut self, _now_ms: i64) -> anyhow::Result<()> {
        Ok(())
    }
    /// State to keep in a checkpoint (aggregation groups and their timers).
    fn snapshot(&self) -> anyhow::Result<Vec<u8>> {
        Ok(Vec::new())
    }
}

/// Pipeline settings.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub shards: usize,
    pub features: FeatureConfig,
    /// Seed of every model's randomness.
    pub seed: u64,
    /// The supervised failure model, when one is configured (`--model`).
    pub failure_model: Option<std::sync::Arc<models::failure::FailureModel>>,
}

impl PipelineConfig {
    /// Fresh shards for a run with no checkpoint.
    pub fn new_shards(&self) -> anyhow::Result<Vec<Shard>> {
        (0..self.shards.max(1))
            .map(|id| {
                let mut shard = Shard::new(id, self.features.clone(), self.seed)?;
                shard.set_failure_model(self.failure_model.clone());
                Ok(shard)
            })
            .collect()
    }
}

/// What a finished run did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub samples: u64,
    pub assessments: u64,
    pub rejected: u64,
    pub alert_events: u64,
    pub gpus: u64,
    pub state_bytes: u64,
    pub checkpoints: u64,
}

/// A checkpoint that was written: its sequence number and the source
/// offsets it reflects (safe to commit now).
#[derive(Debug, Clone)]
pub struct Written {
    pub seq: u64,
    pub offsets: Offsets,
}

/// Most event time one round of shard batches spans (see
/// [`Pipeline::send_from`]).
pub const MAX_ROUND_SPAN_MS: i64 = 60_000;

/// Where `batch` (in event-time order, roughly) is cut into rounds: a
/// round starts at a sample more than [`MAX_ROUND_SPAN_MS`] after the
/// first sample of the round before.
fn round_cuts(batch: &[Sample]) -> Vec<usize> {
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

/// What travels to a shard.
pub(crate) enum ShardMsg {
    /// Samples; the wall time (epoch ms) the oldest was produced, when the
    /// source knows it (Kafka message timestamps); and the event time every
    /// input partition has reached, when the source has partitions.
    Batch(Vec<Sample>, Option<i64>, Option<i64>),
    /// Serialize your state; shard 0 carries the request on.
    Snapshot(Option<Box<SnapshotRequest>>),
    /// A command for the alert thread; shard 0 carries it on, in order
    /// with the data.
    Control(Option<Box<ControlRequest>>),
    /// Score with this failure model from the next batch on (hot reload);
    /// produces no output.
    Model(Option<Arc<models::failure::FailureModel>>),
    /// End of input (handles may still hold senders, so closing the
    /// channel is not enough).
    Stop,
}

/// Commands the REST API sends to the alert stage.
#[derive(Debug)]
pub enum Command {
    AddSilence(alerts::Silence),
    ExpireSilence(String),
}

/// A command and where its answer goes.
pub(crate) struct ControlRequest {
    command: Command,
    reply: Sender<Result<serde_json::Value, String>>,
}

/// A checkpoint request, carried by shard 0's output to the alert thread.
pub(crate) struct SnapshotRequest {
    offsets: Offsets,
    reply: Option<Sender<anyhow::Result<Written>>>,
}

/// A cloneable handle into a running pipeline: asks for checkpoints (the
/// source loop, a Kafka rebalance callback) and sends commands to the alert
/// stage (the REST API), in order with the data.
#[derive(Clone, Debug)]
pub struct PipelineHandle {
    inputs: Vec<SyncSender<ShardMsg>>,
}

impl PipelineHandle {
    /// Asks for a checkpoint reflecting everything sent so far; the result
    /// arrives on the returned channel once the file is durable.
    pub fn request(&self, offsets: Offsets) -> anyhow::Result<Receiver<anyhow::Result<Written>>> {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut req = Some(Box::new(SnapshotRequest {
            offsets,
            reply: Some(tx),
        }));
        for tx in &self.inputs {
            tx.send(ShardMsg::Snapshot(req.take()))
                .map_err(|_| anyhow::anyhow!("a shard stopped"))?;
        }
        Ok(rx)
    }

    /// Sends a command to the alert stage and waits for its answer
    /// (blocking: call from a blocking thread). `Err` is a message for the
    /// client (e.g. an unknown silence id).
    pub fn control(&self, command: Command) -> anyhow::Result<Result<serde_json::Value, String>> {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut req = Some(Box::new(ControlRequest { command, reply: tx }));
        for input in &self.inputs {
            input
                .send(ShardMsg::Control(req.take()))
                .map_err(|_| anyhow::anyhow!("the pipeline stopped"))?;
        }
        rx.recv()
            .map_err(|_| anyhow::anyhow!("the alert thread stopped before answering"))
    }

    /// Hands a new failure model to every shard, in order with the data.
    pub fn set_model(
        &self,
        model: Option<Arc<models::failure::FailureModel>>,
    ) -> anyhow::Result<()> {
        for input in &self.inputs {
            input
                .send(ShardMsg::Model(model.clone()))
                .map_err(|_| anyhow::anyhow!("the pipeline stopped"))?;
        }
        Ok(())
    }

    /// Requests a checkpoint and waits for it.
    pub fn checkpoint_now(&self, offsets: Offsets) -> anyhow::Result<Written> {
        self.request(offsets)?
            .recv()
            .map_err(|_| anyhow::anyhow!("the alert thread stopped before the checkpoint"))?
    }
}

/// A running pipeline.
pub struct Pipeline {
    inputs: Vec<SyncSender<ShardMsg>>,
    shards: Vec<JoinHandle<Shard>>,
    alert: JoinHandle<anyhow::Result<Summary>>,
    /// Batches sent and not yet through the alert thread.
    inflight: Arc<AtomicUsize>,
    samples: u64,
}

/// Everything the alert thread owns.
struct AlertThread {
    export: Option<crate::export::AlertExports>,
    stage: AlertStage,
    sink: Box<dyn AlertSink>,
    state: State,
    store: Option<CheckpointStore>,
    outputs: Vec<Receiver<ShardOutput>>,
    inflight: Arc<AtomicUsize>,
    cfg_shards: usize,
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
        for mut shard in shards {
            let (tx, rx) = sync_channel::<ShardMsg>(SHARD_QUEUE);
            let (otx, orx) = sync_channel::<ShardOutput>(OUTPUT_QUEUE);
            let st = state.clone();
            let handle = std::thread::Builder::new()
                .name(format!("shard-{}", shard.id))
                .spawn(move || {
                    crate::priority::apply_to_current_thread();
                    for msg in rx {
                        let mut out = ShardOutput::default();
                        match msg {
                            ShardMsg::Batch(batch, origin, horizon) => {
                                let t = Instant::now();
                                shard.set_silence_horizon(horizon);
                                shard.process(&batch, &mut out);
                                out.origin_ms = origin;
                                out.horizon_ms = horizon;
                                st.metrics.shard_latency.observe(t.elapsed().as_secs_f64());
                            }
                            ShardMsg::Snapshot(req) => {
                                out.snapshot = Some(shard.snapshot());
                                out.request = req;
                            }
                            ShardMsg::Control(req) => {
                                out.is_control = true;
                                out.control = req;
                            }
                            ShardMsg::Model(m) => {
                                // Every shard skips its output alike, so the
                                // alert thread's rounds stay aligned.
                                shard.set_failure_model(m);
                                continue;
                            }
                            ShardMsg::Stop => break,
                        }
                        if otx.send(out).is_err() {
                            break;
                        }
                    }
                    shard
                })
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
            inputs,
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

    /// A handle that requests checkpoints.
    pub fn handle(&self) -> PipelineHandle {
        PipelineHandle {
            inputs: self.inputs.clone(),
        }
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
        // Every shard gets every batch (maybe empty): the alert thread reads
        // one output per shard per batch, in shard order.
        for (tx, part) in self.inputs.iter().zip(parts) {
            tx.send(ShardMsg::Batch(part, origin_ms, horizon_ms))
                .map_err(|_| anyhow::anyhow!("a shard stopped"))?;
        }
        Ok(())
    }

    /// Ends input, waits for every stage, returns what they did.
    pub fn finish(self) -> anyhow::Result<(Summary, Vec<Shard>)> {
        for tx in &self.inputs {
            let _ = tx.send(ShardMsg::Stop);
        }
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

impl AlertThread {
    fn run(mut self) -> anyhow::Result<Summary> {
        let mut summary = Summary::default();
        let mut events = Vec::new();
        let mut snaps: Vec<anyhow::Result<Vec<u8>>> = Vec::with_capacity(self.cfg_shards);
        'outer: loop {
            let mut request = None;
            let mut batch_round = false;
            for i in 0..self.outputs.len() {
                let Ok(mut out) = self.outputs[i].recv() else {
                    break 'outer;
                };
                if out.is_control {
                    if let Some(req) = out.control.take() {
                        let answer = self.command(req.command);
                        let _ = req.reply.send(answer);
                    }
                    continue;
                }
                if let Some(s) = out.snapshot.take() {
                    snaps.push(s);
                    if let Some(r) = out.request.take() {
                        request = Some(r);
                    }
                    continue;
                }
                batch_round = true;
                self.take_output(i, out, &mut summary, &mut events)?;
            }
            if batch_round {
                self.inflight.fetch_sub(1, Relaxed);
            }
            if snaps.len() == self.cfg_shards {
                let parts = std::mem::take(&mut snaps);
                if let Some(req) = request {
                    let result = self.write_checkpoint(parts, req.offsets);
                    if result.is_ok() {
                        summary.checkpoints += 1;
                    }
                    match req.reply {
                        Some(reply) => {
                            let _ = reply.send(result);
                        }
                        None => result.map(|_| ())?,
                    }
                }
            }
        }
        // End of input: let timers run out to the watermark.
        self.stage.set_horizon(None);
        let now = self.stage.clock_ms();
        if now != i64::MIN {
            self.stage.tick(now, &mut events);
            self.state.record_alerts(&events);
            summary.alert_events += events.len() as u64;
            self.sink.deliver(&events, now)?;
        }
        self.sink.finish(now)?;
        Ok(summary)
    }

    fn command(&mut self, command: Command) -> Result<serde_json::Value, String> {
        let watermark = self.stage.clock_ms();
        let engine = &mut self.stage.engine;
        let answer = match command {
            Command::AddSilence(silence) => {
                let v = serde_json::to_value(&silence).map_err(|e| e.to_string())?;
                engine.add_silence(silence);
                Ok(v)
            }
            Command::ExpireSilence(id) => {
                let now = match watermark {
                    i64::MIN => crate::checkpoint::wall_ms(),
                    w => w,
                };
                if engine.expire_silence(&id, now) {
                    Ok(serde_json::json!({ "id": id, "expired": true }))
                } else {
                    Err(format!("no silence {id:?}"))
                }
            }
        };
        self.state.set_silences(engine.silences().to_vec());
        answer
    }

    fn take_output(
        &mut self,
        shard: usize,
        out: ShardOutput,
        summary: &mut Summary,
        events: &mut Vec<AlertEvent>,
    ) -> anyhow::Result<()> {
        let m = &self.state.metrics;
        for (reason, msg) in &out.rejected {
            m.rejected(reason);
            tracing::debug!(reason, error = %msg, "sample rejected");
        }
        summary.rejected += out.rejected.len() as u64;
        summary.assessments += out.assessments.len() as u64;
        self.stage.set_horizon(out.horizon_ms);
        m.assessments
            .fetch_add(out.assessments.len() as u64, Relaxed);
        for a in &out.assessments {
            self.stage.observe(a, events);
        }
        for r in &out.racks {
            self.stage.push_rack(r);
        }
        if shard + 1 == self.outputs.len() {
            // The round's last output: every shard's piece of a rack's
            // bucket is in.
            self.stage.flush_racks(events);
        }
        self.state.publish(&out.assessments);
        self.state.record_alerts(events);
        if let Some(x) = &mut self.export {
            x.events(events);
        }
        summary.alert_events += events.len() as u64;
        // Called with no events too: routing timers (group_wait,
        // repeat_interval) run on event time.
        self.sink.deliver(events, self.stage.clock_ms())?;
        events.clear();
        if let Some(origin) = out.origin_ms
            && !out.assessments.is_empty()
        {
            let now = crate::checkpoint::wall_ms();
            m.decision_latency
                .observe((now - origin).max(0) as f64 / 1000.0);
        }
        Ok(())
    }

    fn write_checkpoint(
        &mut self,
        parts: Vec<anyhow::Result<Vec<u8>>>,
        offsets: Offsets,
    ) -> anyhow::Result<Written> {
        let Some(store) = &mut self.store else {
            anyhow::bail!("checkpoint requested but no checkpoint directory is configured");
        };
        let t = Instant::now();
        let shards = parts.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
        let ckpt = Checkpoint {
            seq: store.next_seq(),
            created_ms: crate::checkpoint::wall_ms(),
            watermark_ms: self.stage.clock_ms(),
            offsets: offsets.clone(),
            shards,
            stage: self.stage.snapshot()?,
            sink: self.sink.snapshot()?,
        };
        let seq = ckpt.seq;
        let bytes = store.write(&ckpt)?;
        self.state
            .metrics
            .checkpoint_written(bytes, t.elapsed().as_secs_f64());
        tracing::debug!(seq, bytes, "checkpoint written");
        Ok(Written { seq, offsets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Null;
    impl AlertSink for Null {
        fn deliver(&mut self, _: &[AlertEvent], _: i64) -> anyhow::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn long_batches_are_cut_into_rounds_of_a_minute() {
        let at = |ts: i64| features::Sample::new("GPU-a", ts);
        assert!(super::round_cuts(&[]).is_empty());
        // 0 s .. 60 s is one round; 60.001 s starts the next, and so on
        // from each round's first sample (a late sample stays in its round).
        let batch: Vec<_> = [0, 30_000, 60_000, 60_001, 20_000, 120_001, 180_000, 400_000]
            .into_iter()
            .map(at)
            .collect();
        assert_eq!(super::round_cuts(&batch), vec![3, 6, 7]);
    }

    #[test]
    fn silences_reach_the_engine_in_order_and_a_checkpoint_restores_them() {
        let (cfg, pcfg) = super::restart_tests::test_config(1);
        let dir = std::env::temp_dir().join(format!("fw-pipe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let state = crate::state::SharedState::new();
        let stage = AlertStage::new(alerts::AlertEngine::new(cfg.alerts.engine.clone()));
        let p = Pipeline::start(
            pcfg.new_shards().expect("shards"),
            stage,
            Box::new(Null),
            state.clone(),
            Some(CheckpointStore::open(&dir).expect("store")),
        )
        .expect("start");
        let h = p.handle();
        let body = r#"{"matchers":[{"name":"rack","value":"r07","isRegex":false}],"startsAt":"2026-11-30T00:00:00Z","endsAt":"2026-11-30T04:00:00Z","createdBy":"alice","comment":"CDU swap"}"#;
        let s = alerts::Silence::from_json(body, "api-1".into()).expect("silence");
        let v = h
            .control(Command::AddSilence(s))
            .expect("sent")
            .expect("added");
        assert_eq!(v["id"], "api-1");
        assert!(
            state
                .silences
                .read()
                .expect("lock")
                .iter()
                .any(|s| s.id == "api-1")
        );
        let e = h
            .control(Command::ExpireSilence("nope".into()))
            .expect("sent")
            .expect_err("unknown id");
        assert!(e.contains("nope"));
        let mut offsets = Offsets::new();
        offsets.insert(("t".into(), 0), 7);
        let w = h.checkpoint_now(offsets).expect("checkpoint");
        assert_eq!(w.offsets.get(&("t".to_string(), 0)), Some(&7));
        p.finish().expect("finish");
        let ckpt = CheckpointStore::open(&dir)
            .expect("store")
            .latest()
            .expect("read")
            .expect("one");
        assert_eq!(ckpt.shards.len(), 2);
        let stage = AlertStage::restore(cfg.alerts.engine.clone(), &ckpt.stage).expect("restore");
        assert!(stage.engine.silences().iter().any(|s| s.id == "api-1"));
        for b in &ckpt.shards {
            Shard::restore(b).expect("shard restores");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
