//! The alert thread: takes the shards' outputs in a fixed order (round by
//! round, shard 0 first), drives the alert stage and the sink, answers the
//! API's commands and writes checkpoints when a barrier has passed every
//! shard. Stops when every shard's output channel closes (end of input).

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use alerts::AlertEvent;

use super::alerting::AlertStage;
use super::handle::{Command, ControlError, ShardOutput};
use super::parts::{AlertSink, PartitionWritten, Summary, Written};
use super::shard::BatchOutput;
use super::units::UnitSnapshot;
use crate::checkpoint::{Checkpoint, CheckpointStore, Offsets, PartitionCheckpoint};
use crate::sources::DeadLetters;
use crate::state::State;

/// The checkpoint writer's name in component health.
pub(crate) const CHECKPOINTER: &str = "checkpointer";

/// Longest a barrier waits for the fleet topic to take the rounds sent
/// before it (see [`AlertThread::write_checkpoint`]).
const FLEET_CONFIRM: std::time::Duration = std::time::Duration::from_secs(5);

/// Everything the alert thread owns.
pub(super) struct AlertThread {
    pub(super) export: Option<crate::export::AlertExports>,
    pub(super) stage: AlertStage,
    pub(super) sink: Box<dyn AlertSink>,
    pub(super) state: State,
    pub(super) store: Option<CheckpointStore>,
    pub(super) outputs: Vec<Receiver<ShardOutput>>,
    pub(super) inflight: Arc<AtomicUsize>,
    pub(super) cfg_shards: usize,
    /// Where samples the feature engine rejected are dead-lettered.
    pub(super) dead: Arc<OnceLock<DeadLetters>>,
    /// The fleet's robust clock, newest seen: timers run to it at the end
    /// of input (never to the newest sample, which one source can set).
    pub(super) clock_ms: Option<i64>,
    /// Where partition units are checkpointed (Kafka with a store).
    pub(super) partitions: Arc<OnceLock<super::run::SharedPartitionStore>>,
    /// With a fleet topic: where assessments and silence changes go
    /// instead of this instance's own alert stage (`crate::fleet`).
    pub(super) fleet: Arc<OnceLock<Arc<crate::fleet::publish::Publisher>>>,
}

impl AlertThread {
    pub(super) fn run(mut self) -> anyhow::Result<Summary> {
        let mut summary = Summary::default();
        let mut events = Vec::new();
        let mut snaps: Vec<anyhow::Result<Vec<u8>>> = Vec::with_capacity(self.cfg_shards);
        let mut unit_snaps: Vec<UnitSnapshot> = Vec::new();
        let mut released: Vec<features::GpuId> = Vec::new();
        'outer: loop {
            let mut request = None;
            let mut batch_round = false;
            for i in 0..self.outputs.len() {
                let Ok(out) = self.outputs[i].recv() else {
                    break 'outer;
                };
                match out {
                    ShardOutput::Control { request } => {
                        if let Some(req) = request {
                            let answer = self.command(req.command);
                            let _ = req.reply.send(answer);
                        }
                    }
                    ShardOutput::Snapshot {
                        state,
                        units,
                        released: gone,
                        request: r,
                    } => {
                        snaps.push(state);
                        unit_snaps.extend(units);
                        released.extend(gone);
                        if r.is_some() {
                            request = r;
                        }
                    }
                    ShardOutput::Batch(out) => {
                        batch_round = true;
                        self.take_output(i, out, &mut summary, &mut events)?;
                    }
                }
            }
            if batch_round {
                self.inflight.fetch_sub(1, Relaxed);
            }
            if snaps.len() == self.cfg_shards {
                let parts = std::mem::take(&mut snaps);
                let units = std::mem::take(&mut unit_snaps);
                if let Some(req) = request {
                    let result = self.write_checkpoint(parts, units, req.offsets);
                    // A failed checkpoint (disk full) is retried at the next
                    // barrier; offsets stay uncommitted until one succeeds.
                    match &result {
                        Ok(_) => {
                            summary.checkpoints += 1;
                            self.state.health.up(CHECKPOINTER);
                        }
                        Err(e) => self.state.health.degraded(CHECKPOINTER, format!("{e:#}")),
                    }
                    match req.reply {
                        Some(reply) => {
                            let _ = reply.send(result);
                        }
                        None => result.map(|_| ())?,
                    }
                }
                // Their alerts stay until the rebalance settles: a partition
                // assigned straight back keeps them (Command::HandOver).
                if !released.is_empty() {
                    tracing::debug!(gpus = released.len(), "units of revoked partitions dropped");
                    released.clear();
                }
            }
        }
        // End of input: let timers run out to the fleet's clock.
        self.stage.set_horizon(self.clock_ms);
        let now = self.stage.clock_ms();
        self.state.set_clock(now);
        if now != i64::MIN {
            self.stage.tick(now, &mut events);
            self.state.record_alerts(&events);
            summary.alert_events += events.len() as u64;
            self.sink.deliver(&events, now)?;
        }
        self.sink.finish(now)?;
        Ok(summary)
    }

    fn command(&mut self, command: Command) -> Result<serde_json::Value, ControlError> {
        if let Some(fleet) = self.fleet.get() {
            return fleet_command(fleet, &self.state, command);
        }
        if let Command::HandOver(gpus) = command {
            // Moved, not lost: no alert resolves or fires for them here.
            self.stage.hand_over(&gpus);
            self.state.forget(&gpus);
            tracing::info!(
                gpus = gpus.len(),
                "GPUs of partitions now held elsewhere handed over"
            );
            return Ok(serde_json::json!({ "handed_over": gpus.len() }));
        }
        let watermark = self.stage.clock_ms();
        let engine = &mut self.stage.engine;
        let answer = match command {
            Command::AddSilence(silence) => {
                let v = serde_json::to_value(&silence)
                    .map_err(|e| ControlError::Encode(e.to_string()))?;
                engine.add_silence(silence);
                Ok(v)
            }
            Command::HandOver(_) => Ok(serde_json::Value::Null),
            Command::ExpireSilence(id) => {
                let now = match watermark {
                    i64::MIN => crate::checkpoint::wall_ms(),
                    w => w,
                };
                if engine.expire_silence(&id, now) {
                    Ok(serde_json::json!({ "id": id, "expired": true }))
                } else {
                    Err(ControlError::UnknownSilence(id))
                }
            }
        };
        self.state.set_silences(engine.silences().to_vec());
        if let (Ok(_), Some(f)) = (&answer, &self.stage.silence_file) {
            f.save_logged(self.stage.engine.silences());
        }
        answer
    }

    fn take_output(
        &mut self,
        shard: usize,
        out: BatchOutput,
        summary: &mut Summary,
        events: &mut Vec<AlertEvent>,
    ) -> anyhow::Result<()> {
        crate::faults::maybe_panic("alert_stage");
        let m = &self.state.metrics;
        for r in &out.rejected {
            m.rejected(r.reason);
            tracing::debug!(reason = r.reason, error = %r.error, "sample rejected");
            if let Some(dead) = self.dead.get() {
                dead.refused(r.reason, &r.error, &r.gpu, r.ts_ms, r.host.as_deref());
            }
        }
        summary.rejected += out.rejected.len() as u64;
        if let Some(c) = out.clock_ms {
            self.clock_ms = Some(self.clock_ms.map_or(c, |old| old.max(c)));
        }
        summary.assessments += out.assessments.len() as u64;
        m.assessments
            .fetch_add(out.assessments.len() as u64, Relaxed);
        if let Some(fleet) = self.fleet.get() {
            // The fleet's alert stage judges them (`crate::fleet`).
            fleet.round(
                self.state.partitions(),
                out.horizon_ms,
                &out.assessments,
                &out.racks,
                &out.evicted,
            );
            return Ok(());
        }
        if !out.evicted.is_empty() {
            self.stage.forget(&out.evicted);
            self.state.forget(&out.evicted);
        }
        self.stage.set_horizon(out.horizon_ms);
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
        self.state.set_clock(self.stage.clock_ms());
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
}

/// A command with a fleet topic: silence changes go to the fleet's alert
/// stage through the topic; a hand-over changes nothing here (the fleet
/// stage and view keep the moved GPUs).
fn fleet_command(
    fleet: &crate::fleet::publish::Publisher,
    state: &State,
    command: Command,
) -> Result<serde_json::Value, ControlError> {
    use crate::fleet::{SilenceCommand, WireSilence};
    match command {
        Command::HandOver(gpus) => Ok(serde_json::json!({ "handed_over": gpus.len() })),
        Command::AddSilence(silence) => {
            let v =
                serde_json::to_value(&silence).map_err(|e| ControlError::Encode(e.to_string()))?;
            fleet
                .silence(SilenceCommand::Add(WireSilence::from(&silence)))
                .map_err(|e| ControlError::Fleet(e.to_string()))?;
            Ok(v)
        }
        Command::ExpireSilence(id) => {
            let known = state
                .silences
                .read()
                .map(|l| l.iter().any(|s| s.id == id))
                .unwrap_or(false);
            if !known {
                return Err(ControlError::UnknownSilence(id));
            }
            fleet
                .silence(SilenceCommand::Expire {
                    id: id.clone(),
                    at_ms: state.event_now_ms(),
                })
                .map_err(|e| ControlError::Fleet(e.to_string()))?;
            Ok(serde_json::json!({ "id": id, "expired": true }))
        }
    }
}

impl AlertThread {
    /// Writes each unit's partition checkpoint at its partition's offset.
    /// A partition whose checkpoint is not written (no offset yet: nothing
    /// read; or a failed write) is left out of the offsets to commit.
    fn write_partitions(
        &self,
        units: Vec<UnitSnapshot>,
        offsets: &mut Offsets,
    ) -> Vec<PartitionWritten> {
        let mut written = Vec::new();
        if units.is_empty() {
            return written;
        }
        let Some(store) = self.partitions.get() else {
            tracing::warn!(
                units = units.len(),
                "partition units but no partition store: not checkpointed"
            );
            return written;
        };
        let Ok(mut store) = store.lock() else {
            tracing::error!("the partition store's lock is poisoned: partitions not checkpointed");
            return written;
        };
        // The instance checkpoint of this barrier gets this number.
        let instance_seq = self.store.as_ref().map_or(0, CheckpointStore::next_seq);
        for u in units {
            let Some(&offset) = offsets.get(&u.key) else {
                continue;
            };
            if !store.owns(&u.key) {
                // Taken over while its previous owner's lock or lease was
                // still held (a dead owner's lease outlives it): said at
                // ERROR when it was taken; checkpointed once it is free.
                if let Err(e) = store.claim(&u.key) {
                    tracing::debug!(topic = %u.key.0, partition = u.key.1, error = format!("{e:#}"), "partition not checkpointed yet: still held by its previous owner");
                    offsets.remove(&u.key);
                    continue;
                }
                tracing::info!(topic = %u.key.0, partition = u.key.1, "partition claimed: checkpointed here from now on");
            }
            let done = u.state.and_then(|shard| {
                let c = PartitionCheckpoint {
                    topic: u.key.0.clone(),
                    partition: u.key.1,
                    seq: store.next_seq(&u.key)?,
                    created_ms: crate::checkpoint::wall_ms(),
                    offset,
                    gpus: u.gpus,
                    writer: store.writer().to_owned(),
                    instance_seq,
                    shard,
                };
                let bytes = store.write(&c)?;
                Ok(PartitionWritten {
                    key: u.key.clone(),
                    seq: c.seq,
                    offset,
                    gpus: u.gpus,
                    bytes,
                })
            });
            match done {
                Ok(w) => {
                    let name = crate::metrics::partitions::label(&w.key);
                    self.state.metrics.partitions.checkpoint(name, w.bytes);
                    written.push(w);
                }
                Err(e) => {
                    tracing::error!(topic = %u.key.0, partition = u.key.1, error = format!("{e:#}"), "partition checkpoint failed; its offset is not committed");
                    offsets.remove(&u.key);
                }
            }
        }
        written
    }

    fn write_checkpoint(
        &mut self,
        parts: Vec<anyhow::Result<Vec<u8>>>,
        units: Vec<UnitSnapshot>,
        mut offsets: Offsets,
    ) -> anyhow::Result<Written> {
        let t = Instant::now();
        // A unit's state holds what it already judged (a GPU reported
        // silent is not reported again): its checkpoint may be written only
        // once the rounds it published are on the fleet topic, or a kill
        // between the two loses them for good.
        let units = match self.fleet.get().map(|f| f.confirm(FLEET_CONFIRM)) {
            Some(Err(e)) => {
                tracing::warn!(error = %e, "partitions not checkpointed at this barrier: the fleet topic does not hold their rounds yet");
                for u in &units {
                    offsets.remove(&u.key);
                }
                Vec::new()
            }
            _ => units,
        };
        // Before the instance file: a restart of this instance (or the
        // partition's next owner) finds each partition's state there.
        let partitions = self.write_partitions(units, &mut offsets);
        let Some(store) = &mut self.store else {
            anyhow::bail!("checkpoint requested but no checkpoint directory is configured");
        };
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
        tracing::debug!(
            seq,
            bytes,
            partitions = partitions.len(),
            "checkpoint written"
        );
        Ok(Written {
            seq,
            offsets,
            partitions,
        })
    }
}
