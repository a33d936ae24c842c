//! The sharded pipeline: a dispatcher splits each input batch by GPU (the
//! Kafka key hash) over shard threads; each shard runs features and models
//! synchronously; one alert thread consumes the shards' outputs and drives
//! the alert engine and the sink.
//!
//! Every arrow is a bounded channel, so a slow stage stops the source
//! (backpressure) instead of growing memory. The alert thread takes shard
//! outputs in a fixed order (batch by batch, shard 0 first), so the same
//! input gives the same alerts whatever the thread timing: live, backtest
//! and tests agree.

pub mod alerting;
pub mod shard;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Instant;

use alerts::{AlertEngine, AlertEvent};
use anyhow::Context;
use features::{FeatureConfig, Sample};

use crate::state::State;
use alerting::AlertStage;
use shard::{Shard, ShardOutput, shard_of};

/// Batches queued per shard: at ~1,000 samples a batch, a few hundred ms of
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

/// What a finished run did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub samples: u64,
    pub assessments: u64,
    pub rejected: u64,
    pub alert_events: u64,
    pub gpus: u64,
    pub state_bytes: u64,
}

/// A running pipeline.
pub struct Pipeline {
    inputs: Vec<SyncSender<Vec<Sample>>>,
    shards: Vec<JoinHandle<Shard>>,
    alert: JoinHandle<anyhow::Result<Summary>>,
    samples: u64,
}

impl Pipeline {
    /// Starts shard threads and the alert thread.
    pub fn start(
        cfg: &PipelineConfig,
        engine: AlertEngine,
        mut sink: Box<dyn AlertSink>,
        state: State,
    ) -> anyhow::Result<Self> {
        let n = cfg.shards.max(1);
        let mut inputs = Vec::with_capacity(n);
        let mut outputs: Vec<Receiver<ShardOutput>> = Vec::with_capacity(n);
        let mut shards = Vec::with_capacity(n);
        for id in 0..n {
            let (tx, rx) = sync_channel::<Vec<Sample>>(SHARD_QUEUE);
            let (otx, orx) = sync_channel::<ShardOutput>(OUTPUT_QUEUE);
            let mut shard = Shard::new(id, cfg.features.clone(), cfg.seed)?;
            shard.set_failure_model(cfg.failure_model.clone());
            let st = state.clone();
            let handle = std::thread::Builder::new()
                .name(format!("shard-{id}"))
                .spawn(move || {
                    for batch in rx {
                        let t = Instant::now();
                        let mut out = ShardOutput::default();
                        shard.process(&batch, &mut out);
                        st.metrics.shard_latency.observe(t.elapsed().as_secs_f64());
                        if otx.send(out).is_err() {
                            break;
                        }
                    }
                    shard
                })
                .context("spawning a shard thread")?;
            inputs.push(tx);
            outputs.push(orx);
            shards.push(handle);
        }
        let alert = std::thread::Builder::new()
            .name("alerts".into())
            .spawn(move || {
                let mut stage = AlertStage::new(engine);
                let mut summary = Summary::default();
                let mut events = Vec::new();
                'outer: loop {
                    for rx in &outputs {
                        let Ok(out) = rx.recv() else { break 'outer };
                        for (reason, msg) in &out.rejected {
                            state.metrics.rejected(reason);
                            tracing::debug!(reason, error = %msg, "sample rejected");
                        }
                        summary.rejected += out.rejected.len() as u64;
                        summary.assessments += out.assessments.len() as u64;
                        state
                            .metrics
                            .assessments
                            .fetch_add(out.assessments.len() as u64, Relaxed);
                        for a in &out.assessments {
                            stage.observe(a, &mut events);
                        }
                        state.publish(&out.assessments);
                        state.record_alerts(&events);
                        summary.alert_events += events.len() as u64;
                        // Called with no events too: routing timers
                        // (group_wait, repeat_interval) run on event time.
                        sink.deliver(&events, stage.watermark_ms())?;
                        events.clear();
                    }
                }
                // End of input: let timers run out to the watermark.
                let now = stage.watermark_ms();
                if now != i64::MIN {
                    stage.tick(now, &mut events);
                    state.record_alerts(&events);
                    summary.alert_events += events.len() as u64;
                    sink.deliver(&events, now)?;
                }
                sink.finish(now)?;
                Ok(summary)
            })
            .context("spawning the alert thread")?;
        Ok(Pipeline {
            inputs,
            shards,
            alert,
            samples: 0,
        })
    }

    /// Hands a batch to the shards; blocks while they are full.
    pub fn send(&mut self, batch: Vec<Sample>) -> anyhow::Result<()> {
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
        // Every shard gets every batch (maybe empty): the alert thread reads
        // one output per shard per batch, in shard order.
        for (tx, part) in self.inputs.iter().zip(parts) {
            tx.send(part)
                .map_err(|_| anyhow::anyhow!("a shard stopped"))?;
        }
        Ok(())
    }

    /// Ends input, waits for every stage, returns what they did.
    pub fn finish(self) -> anyhow::Result<(Summary, Vec<Shard>)> {
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
