//! The Kafka source: a consumer group member (rdkafka, bundled librdkafka)
//! feeding the pipeline, at-least-once.
//!
//! - Offsets are never auto-committed or auto-stored. Every
//!   `checkpoint.interval` the source sends a barrier through the pipeline;
//!   once the checkpoint holding the state that reflects offsets *N* is on
//!   disk, *N* is committed. At start the newest checkpoint is restored and
//!   each partition resumes at the checkpoint's offset (a seek when the
//!   group's committed offset differs), so after `kill -9` the service
//!   replays exactly what its state has not seen.
//! - Backpressure: while the pipeline's queues are full the source stops
//!   polling, so librdkafka's bounded prefetch queue fills and its fetcher
//!   stops; only when they stay full for [`PAUSE_AFTER`] are the assigned
//!   partitions paused (the consumer keeps polling, so the group is
//!   served) and resumed when there is room.
//! - Rebalance: before partitions are revoked, a checkpoint of everything
//!   handed over is taken and its offsets committed (asynchronously: a
//!   synchronous commit has no timeout); the batch in hand is dropped and
//!   read again. Partitions assigned back resume right after what the
//!   pipeline holds, not at the group's possibly older commit.
//! - A message is decoded by the shared `features::decode::Decoder` (any
//!   encoding of the telemetry contract); undecodable messages are counted
//!   by reason and written to the dead-letter topic and/or file with the
//!   reason, exactly as the file source does.
//! - Lag per partition (high watermark − next offset to process) comes from
//!   librdkafka's statistics and the source's own position.
//! - Readiness also follows the brokers: when none has answered for a few
//!   seconds (statistics list each connection's state and receive idle
//!   time) the source is not ready and says so once; librdkafka keeps
//!   reconnecting, the group is rejoined, and a revoke on the way
//!   checkpoints as usual. A commit that fails meanwhile is superseded by
//!   the next checkpoint's, and a restart resumes from the checkpoint's
//!   offsets anyway, so nothing is skipped or read twice by the state.

//!
//! Layout: [`settings`] (settings, client options), [`context`] (state
//! shared with librdkafka's callbacks, rebalance, commits), [`consumer`]
//! (resume points, the batch, one message's decoding), [`handover`] (the
//! batch to the pipeline, checkpoint requests and commits, the clean stop), [`lag`] (pacing and
//! lag on a timer), [`health`] (broker contact), [`pacing`] (the pacing
//! decision), [`secrets`] (secret options and their redaction),
//! [`preflight`] (the start-up check), [`produce`] (a producer that
//! watches its brokers, for `replay`), and here the poll loop.
mod consumer;
mod context;
mod handover;
pub(crate) mod health;
mod keying;
mod lag;
#[cfg(test)]
mod mock_tests;
mod pacing;
pub mod preflight;
pub mod produce;
pub mod secrets;
mod settings;
mod units;

pub(crate) use consumer::{Record, decode_record};
pub use preflight::{PreflightError, preflight};
pub use secrets::SecretRef;
pub use settings::{CheckpointPolicy, KafkaSettings, client_config};
pub use units::PartitionUnits;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anyhow::Context;
use features::decode::Decoder;
use rdkafka::Offset;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Message};
use tokio_util::sync::CancellationToken;

use self::consumer::{Batch, DeadLetterTopic, Resume, Step};
use self::context::{Ctx, Shared};
use self::pacing::Pacer;
use super::DeadLetters;
use crate::metrics::partitions::label;
use crate::pipeline::Pipeline;
use crate::state::State;

/// The pipeline must stay full this long before the source pauses its
/// partitions. A pause drops librdkafka's prefetched messages, which are
/// fetched again on resume: pausing at every short stall made a broker
/// whose fetch cost grows with the backlog (tansu 0.6) fall further behind
/// after each one (BENCHMARKS.md, issue 7). Shorter stalls are waited out
/// without polling; the session stays alive (librdkafka heartbeats on its
/// own thread) and the group's `max.poll.interval.ms` (5 min) is far off.
const PAUSE_AFTER: Duration = Duration::from_secs(5);

/// An answer to a checkpoint request: the offsets it holds, once written.
type PendingCommit = Receiver<anyhow::Result<crate::pipeline::Written>>;

/// Everything the poll loop works with.
struct Source<'a> {
    state: &'a State,
    dead: &'a mut DeadLetters,
    pipeline: &'a mut Pipeline,
    shared: Arc<Shared>,
    dlq: Option<DeadLetterTopic>,
    decoder: Decoder,
    /// Whether the topic is keyed so that racks stay together.
    keys: keying::KeyCheck,
    resume: Resume,
    batch: Batch,
    paused: bool,
    /// Since when the pipeline's queues have been full (not yet paused).
    full_since: Option<Instant>,
    every: Option<Duration>,
    pending_commit: Option<PendingCommit>,
    last_ckpt: Instant,
    /// Something was handed over since the last checkpoint.
    dirty: bool,
    total: u64,
    /// Partition-aligned state (see [`units`]).
    units: Option<PartitionUnits>,
    /// The horizon the pipeline last got, and when it was checked idle.
    horizon_sent: Option<i64>,
    idle_check: Instant,
}

/// How often an idle source tells the pipeline how far its partitions got.
const IDLE_HORIZON: Duration = Duration::from_secs(1);

/// Consumes until `stop` is cancelled. Returns samples handed to the
/// pipeline.
pub fn run(
    settings: &KafkaSettings,
    policy: Option<CheckpointPolicy>,
    state: &State,
    stop: &CancellationToken,
    dead: &mut DeadLetters,
    pipeline: &mut Pipeline,
) -> anyhow::Result<u64> {
    let (mut src, consumer) = Source::open(settings, policy, state, dead, pipeline)?;
    let (mut last_lag, mut last_pace) = (Instant::now(), Instant::now());
    let mut ahead = Pacer::default();
    let mut brokers = health::Watch::default();
    while !stop.is_cancelled() {
        let full = src.pipeline.is_full();
        if src.wait_out_stall(full) {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        src.apply_backpressure(&consumer, full)?;
        let polled = consumer.poll(Duration::from_millis(if src.paused { 5 } else { 20 }));
        src.after_rebalance()?;
        match polled {
            // A skipped or sought-past message ends this round.
            Some(Ok(m)) if !src.take(&consumer, &m)? => continue,
            Some(Ok(_)) | None => {}
            // Reported once per outage by the readiness check.
            Some(Err(e)) if context::is_connection_error(&e) => {
                src.shared.note_refusal(&e);
                tracing::debug!(error = %e, "Kafka consumer error");
            }
            Some(Err(e)) => tracing::warn!(error = %e, "Kafka consumer error"),
        }
        src.hand_over()?;
        src.check_commit(&consumer)?;
        if last_pace.elapsed() >= Duration::from_millis(200) {
            last_pace = Instant::now();
            lag::pace(&consumer, &src.shared, state, &mut ahead);
        }
        if last_lag.elapsed() >= Duration::from_secs(1) {
            last_lag = Instant::now();
            src.refused_from_the_start(settings)?;
            src.seek_overdue(&consumer);
            lag::report_lag(
                &src.shared,
                state,
                settings.ready_lag,
                &settings.brokers,
                &mut brokers,
            );
        }
    }
    src.stop(&consumer)
}

impl<'a> Source<'a> {
    fn open(
        settings: &'a KafkaSettings,
        policy: Option<CheckpointPolicy>,
        state: &'a State,
        dead: &'a mut DeadLetters,
        pipeline: &'a mut Pipeline,
    ) -> anyhow::Result<(Self, BaseConsumer<Ctx>)> {
        let resume = policy
            .as_ref()
            .map(|p| p.resume.clone())
            .unwrap_or_default();
        let every = policy.as_ref().map(|p| p.every);
        let units = policy.and_then(|p| p.units);
        let mut shared = Shared::new(resume.clone(), every.map(|_| pipeline.handle()));
        if let Some(u) = &units {
            shared = shared.with_units(u.store.clone());
        }
        let shared = Arc::new(shared);
        let consumer: BaseConsumer<Ctx> = client_config(settings)
            .create_with_context(Ctx {
                shared: shared.clone(),
            })
            .context("creating the Kafka consumer")?;
        let topics: Vec<&str> = settings.topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topics)
            .with_context(|| format!("subscribing to {topics:?}"))?;
        let dlq = DeadLetterTopic::open(settings)?;
        tracing::info!(brokers = %settings.brokers, topics = ?settings.topics, group = %settings.group_id, "consuming");
        let src = Source {
            state,
            dead,
            pipeline,
            shared,
            dlq,
            decoder: Decoder::default(),
            keys: keying::KeyCheck::default(),
            resume: Resume::new(&resume),
            batch: Batch::default(),
            paused: false,
            full_since: None,
            every,
            pending_commit: None,
            last_ckpt: Instant::now(),
            dirty: false,
            total: 0,
            units,
            horizon_sent: None,
            idle_check: Instant::now(),
        };
        Ok((src, consumer))
    }

    /// Stops the source when the brokers have refused the TLS handshake
    /// or the credentials since the start, with no broker ever answering:
    /// that is a configuration to fix (the CA, the certificates, the
    /// `sasl.*` options), and a service that keeps retrying it would only
    /// look alive. Once a broker has answered, a refusal is an outage
    /// like any other (readiness says so; librdkafka keeps retrying).
    fn refused_from_the_start(&self, settings: &KafkaSettings) -> anyhow::Result<()> {
        if let Ok(r) = self.shared.reach.lock()
            && let Some(why) = r.refused_from_the_start()
        {
            anyhow::bail!(
                "the Kafka brokers {} refused the connection and none has answered since the start: {why} (check security.protocol, ssl.ca.location, the client certificate and the sasl.* options)",
                settings.brokers
            );
        }
        Ok(())
    }

    /// A short stall (a checkpoint, a Parquet roll, a slow batch) is waited
    /// out without polling: librdkafka keeps its prefetched messages, and
    /// its bounded queue stops the fetcher when full.
    fn wait_out_stall(&mut self, full: bool) -> bool {
        if !full {
            self.full_since = None;
            return false;
        }
        !self.paused && self.full_since.get_or_insert_with(Instant::now).elapsed() < PAUSE_AFTER
    }

    /// Pauses the assignment while the pipeline stays full, resumes it when
    /// there is room (and re-reads it after a revoke).
    fn apply_backpressure(
        &mut self,
        consumer: &BaseConsumer<Ctx>,
        full: bool,
    ) -> anyhow::Result<()> {
        if full != self.paused || self.shared.revoked.swap(false, Ordering::Relaxed) {
            let assignment = consumer.assignment().context("reading the assignment")?;
            if full {
                consumer.pause(&assignment).context("pausing partitions")?;
                self.state.metrics.paused("backpressure");
            } else {
                consumer
                    .resume(&assignment)
                    .context("resuming partitions")?;
            }
            self.paused = full;
        }
        Ok(())
    }

    /// Applies what the rebalance callbacks asked during the poll: drops
    /// the batch in hand at a revoke; with partition units, drops the
    /// released units from the routing and restores the assigned ones.
    fn after_rebalance(&mut self) -> anyhow::Result<()> {
        if self.shared.drop_batch.swap(false, Ordering::Relaxed) {
            self.batch.drop_all();
        }
        if let Some(u) = &self.units {
            let released = self
                .shared
                .released
                .lock()
                .map(|mut r| std::mem::take(&mut *r))
                .unwrap_or_default();
            let adopt = self
                .shared
                .to_adopt
                .lock()
                .map(|mut r| std::mem::take(&mut *r))
                .unwrap_or_default();
            if !released.is_empty() {
                self.pipeline.release_units(&released);
            }
            if !adopt.is_empty() {
                let (resume, taken) = u.adopt(&adopt, self.pipeline)?;
                let m = &self.state.metrics.partitions;
                taken
                    .iter()
                    .for_each(|t| m.restored(label(&t.key), t.took.as_secs_f64()));
                if let Ok(mut sent) = self.shared.sent.lock() {
                    sent.extend(resume.iter().map(|(k, o)| (k.clone(), *o)));
                }
                self.resume.reseek(resume);
            }
            if self.shared.assign_seen.swap(false, Ordering::Relaxed) {
                self.pipeline.settle_released()?;
            }
            if !released.is_empty() || !adopt.is_empty() {
                self.state.set_partitions(self.pipeline.partitions());
            }
        }
        if let Ok(mut r) = self.shared.reseek.lock() {
            self.resume.reseek(std::mem::take(&mut *r));
        }
        Ok(())
    }

    /// Seeks held partitions whose resume point no message reached in
    /// time (see [`consumer::SEEK_UNASKED_AFTER`]); a failed seek (the
    /// partition not fetching yet) is tried again on the next round.
    fn seek_overdue(&mut self, consumer: &BaseConsumer<Ctx>) {
        let held = match self.shared.assigned.lock() {
            Ok(a) => a.clone(),
            Err(_) => return,
        };
        for (key, want) in self.resume.overdue(&held, Instant::now()) {
            match consumer.seek(&key.0, key.1, Offset::Offset(want), Duration::from_secs(1)) {
                Ok(()) => {
                    tracing::info!(topic = %key.0, partition = key.1, to = want, "no message since the partition was taken over: seeking to the checkpoint's offset");
                    self.resume.sought(&key);
                }
                Err(e) => {
                    tracing::debug!(topic = %key.0, partition = key.1, error = %e, "seeking to the checkpoint's offset: trying again");
                }
            }
        }
    }

    /// One message into the batch. False when it was skipped or sought
    /// past (the rest of this round is skipped too).
    fn take(
        &mut self,
        consumer: &BaseConsumer<Ctx>,
        m: &BorrowedMessage<'_>,
    ) -> anyhow::Result<bool> {
        let key = (m.topic().to_owned(), m.partition());
        match self.resume.step(&key, m.offset()) {
            Step::Skip => return Ok(false),
            Step::Seek(want) => {
                tracing::info!(topic = %key.0, partition = key.1, from = m.offset(), to = want, "seeking to the checkpoint's offset");
                consumer
                    .seek(&key.0, key.1, Offset::Offset(want), Duration::from_secs(10))
                    .context("seeking to the checkpoint offset")?;
                return Ok(false);
            }
            Step::Take => {}
        }
        let rec = Record {
            topic: m.topic(),
            partition: m.partition(),
            offset: m.offset(),
            key: m.key(),
            payload: m.payload().unwrap_or_default(),
            timestamp_ms: m.timestamp().to_millis(),
        };
        let samples = decode_record(
            &mut self.decoder,
            &rec,
            self.state,
            self.dead,
            self.dlq.as_ref(),
        );
        keying::report(self.keys.observe(rec.key, samples), rec.topic);
        if self.units.is_some() {
            let id = self.pipeline.partition_id(&key);
            if !self.pipeline.is_adopted(id) {
                // A message of a partition revoked in this poll (or not
                // taken over yet): its owner reads it from the checkpoint.
                tracing::debug!(topic = %key.0, partition = key.1, offset = m.offset(), "message of a partition not held: skipped");
                return Ok(false);
            }
            for s in samples.iter() {
                self.pipeline.note_partition(&s.gpu, id);
            }
        }
        self.batch
            .add(key, m.offset() + 1, rec.timestamp_ms, samples);
        Ok(true)
    }
}
