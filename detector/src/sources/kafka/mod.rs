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
//! - A message is one sample or a JSON array of samples (a host's GPUs),
//!   or dcgm-exporter text; undecodable messages are counted by reason and
//!   written to the dead-letter topic and/or file with the reason.
//! - Lag per partition (high watermark − next offset to process) comes from
//!   librdkafka's statistics and the source's own position.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use features::Sample;
use features::decode::{DecodeOutput, Encoding, adapter, native, sniff};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaResult;
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::{Offset, TopicPartitionList};

use super::pacing::{MAX_AHEAD_MS, Pacer};
use super::{BATCH, DeadLetters};
use crate::checkpoint::Offsets;
use crate::pipeline::{Pipeline, PipelineHandle};
use crate::state::State;

/// Kafka settings (validated config).
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaSettings {
    pub brokers: String,
    pub topics: Vec<String>,
    pub group_id: String,
    /// librdkafka client options passed through (SASL, TLS, tuning).
    pub options: BTreeMap<String, String>,
    pub dead_letter_topic: Option<String>,
    /// Ready once total lag (messages) is at most this.
    pub ready_lag: i64,
}

/// Longest a partial batch waits before it is sent.
const LINGER: Duration = Duration::from_millis(50);

/// State shared with the consumer context (rebalance and statistics
/// callbacks run inside `poll` on the source thread).
struct Shared {
    /// Next offset per partition of everything handed to the pipeline.
    sent: Mutex<Offsets>,
    /// Newest high watermark per partition, from statistics.
    high: Mutex<BTreeMap<(String, i32), i64>>,
    checkpointer: Option<PipelineHandle>,
    /// Set by a revoke: the loop must re-read its assignment.
    revoked: AtomicBool,
    /// Set by a revoke: the batch in hand (not yet handed over, so not in
    /// the checkpoint) is dropped; it is read again from the offsets.
    drop_batch: AtomicBool,
    /// Set by an assign: partitions whose data the pipeline already holds
    /// restart exactly after it, not at the group's committed offset.
    reseek: Mutex<Offsets>,
    /// Partitions assigned to this member (set by the rebalance callback).
    assigned: Mutex<Vec<(String, i32)>>,
    /// Newest event time handed over per partition, and when (wall) the
    /// partition last delivered a message.
    event_time: Mutex<BTreeMap<(String, i32), (i64, Instant)>>,
    /// Offset commits answered, and how many of those failed.
    commits: AtomicU64,
    commit_errors: AtomicU64,
}

/// The pipeline must stay full this long before the source pauses its
/// partitions. A pause drops librdkafka's prefetched messages, which are
/// fetched again on resume: pausing at every short stall made a broker
/// whose fetch cost grows with the backlog (tansu 0.6) fall further behind
/// after each one (BENCHMARKS.md, issue 7). Shorter stalls are waited out
/// without polling; the session stays alive (librdkafka heartbeats on its
/// own thread) and the group's `max.poll.interval.ms` (5 min) is far off.
const PAUSE_AFTER: Duration = Duration::from_secs(5);

/// A caught-up partition with no message for this long no longer holds
/// event time back (an idle partition must not stop the clock).
const IDLE_PARTITION: Duration = Duration::from_secs(5);

impl Shared {
    /// Fresh state: `sent` is where each partition resumes.
    fn new(sent: Offsets, checkpointer: Option<PipelineHandle>) -> Self {
        Shared {
            sent: Mutex::new(sent),
            high: Mutex::new(BTreeMap::new()),
            checkpointer,
            revoked: AtomicBool::new(false),
            drop_batch: AtomicBool::new(false),
            reseek: Mutex::new(Offsets::new()),
            event_time: Mutex::new(BTreeMap::new()),
            assigned: Mutex::new(Vec::new()),
            commits: AtomicU64::new(0),
            commit_errors: AtomicU64::new(0),
        }
    }

    /// The event time every assigned partition has reached: silence and
    /// alert timers run on it, so the GPUs of a partition that lags
    /// (fetches come a partition at a time, and a restart resumes them one
    /// by one) are not judged by another partition's clock. A partition
    /// stops holding time back only once it is caught up and has been
    /// quiet for [`IDLE_PARTITION`]. `None` when no partition counts.
    fn horizon(&self) -> Option<i64> {
        let (Ok(assigned), Ok(high), Ok(sent), Ok(et)) = (
            self.assigned.lock(),
            self.high.lock(),
            self.sent.lock(),
            self.event_time.lock(),
        ) else {
            return None;
        };
        assigned
            .iter()
            .filter(|k| {
                let caught_up = match (high.get(*k), sent.get(*k)) {
                    (Some(hi), Some(next)) => next >= hi,
                    (Some(hi), None) => *hi == 0,
                    (None, _) => false,
                };
                let quiet = et.get(*k).is_none_or(|e| e.1.elapsed() >= IDLE_PARTITION);
                !(caught_up && quiet)
            })
            .map(|k| et.get(k).map_or(i64::MIN, |e| e.0))
            .min()
    }
}

struct Ctx {
    shared: Arc<Shared>,
}

impl ClientContext for Ctx {
    fn stats(&self, stats: Statistics) {
        if let Ok(mut high) = self.shared.high.lock() {
            for (topic, t) in &stats.topics {
                for (p, part) in &t.partitions {
                    if *p >= 0 && part.hi_offset >= 0 {
                        high.insert((topic.clone(), *p), part.hi_offset);
                    }
                }
            }
        }
    }
}

impl ConsumerContext for Ctx {
    fn commit_callback(&self, result: KafkaResult<()>, _: &TopicPartitionList) {
        if let Err(e) = result {
            tracing::warn!(error = %e, "offset commit failed");
            self.shared.commit_errors.fetch_add(1, Ordering::Relaxed);
        }
        self.shared.commits.fetch_add(1, Ordering::Relaxed);
    }

    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(tpl) = rebalance else {
            if let Rebalance::Assign(tpl) = rebalance {
                if tpl.count() == 0 {
                    tracing::warn!(
                        "assigned no partitions: other members hold them all (if this is the only instance, the group still counts a dead member until its session.timeout.ms ends)"
                    );
                } else {
                    tracing::info!(partitions = tpl.count(), "partitions assigned");
                }
                let parts: Vec<(String, i32)> = tpl
                    .elements()
                    .iter()
                    .map(|e| (e.topic().to_owned(), e.partition()))
                    .collect();
                if let (Ok(sent), Ok(mut reseek)) =
                    (self.shared.sent.lock(), self.shared.reseek.lock())
                {
                    for k in &parts {
                        if let Some(o) = sent.get(k) {
                            reseek.insert(k.clone(), *o);
                        }
                    }
                }
                if let Ok(mut a) = self.shared.assigned.lock() {
                    *a = parts;
                }
            }
            return;
        };
        if let Ok(mut a) = self.shared.assigned.lock() {
            a.clear();
        }
        tracing::info!(
            partitions = tpl.count(),
            "partitions revoked: checkpointing"
        );
        self.shared.revoked.store(true, Ordering::Relaxed);
        self.shared.drop_batch.store(true, Ordering::Relaxed);
        let Some(cp) = &self.shared.checkpointer else {
            return;
        };
        let offsets = self
            .shared
            .sent
            .lock()
            .map(|o| o.clone())
            .unwrap_or_default();
        match cp.checkpoint_now(offsets) {
            Ok(w) => {
                // Async: a synchronous commit waits without a timeout, and
                // a coordinator busy rebalancing may never answer it.
                // Whoever gets the partition resumes from this commit or
                // an earlier one (at-least-once either way).
                if let Err(e) = commit(consumer, &w.offsets, CommitMode::Async) {
                    tracing::warn!(error = %e, "committing offsets at revoke");
                }
            }
            Err(e) => tracing::warn!(error = %e, "checkpoint at revoke failed"),
        }
    }
}

/// How long a clean stop waits for the broker to confirm its last commit.
const FINAL_COMMIT_WAIT: Duration = Duration::from_secs(5);

/// Commits `offsets` and waits up to `wait` for the broker's answer (a
/// synchronous commit waits without a timeout, and a stop must not hang
/// when the broker is gone). Whether the broker confirmed it.
fn final_commit(
    consumer: &BaseConsumer<Ctx>,
    shared: &Shared,
    offsets: &Offsets,
    wait: Duration,
) -> bool {
    if offsets.is_empty() {
        return true;
    }
    let before = shared.commits.load(Ordering::Relaxed);
    let errors = shared.commit_errors.load(Ordering::Relaxed);
    if let Err(e) = commit(consumer, offsets, CommitMode::Async) {
        tracing::warn!(error = %e, "committing offsets at stop");
        return false;
    }
    let t = Instant::now();
    while shared.commits.load(Ordering::Relaxed) == before && t.elapsed() < wait {
        // Serves the commit callback; a message it returns is not handed
        // over (so not in the checkpoint) and is read again after a restart.
        let _ = consumer.poll(Duration::from_millis(100));
    }
    shared.commits.load(Ordering::Relaxed) != before
        && shared.commit_errors.load(Ordering::Relaxed) == errors
}

fn commit(consumer: &BaseConsumer<Ctx>, offsets: &Offsets, mode: CommitMode) -> anyhow::Result<()> {
    if offsets.is_empty() {
        return Ok(());
    }
    let mut tpl = TopicPartitionList::new();
    for ((t, p), o) in offsets {
        tpl.add_partition_offset(t, *p, Offset::Offset(*o))?;
    }
    consumer.commit(&tpl, mode)?;
    Ok(())
}

/// Consumer options: ours first, then the operator's (which win).
pub fn client_config(s: &KafkaSettings) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.brokers)
        .set("group.id", &s.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("statistics.interval.ms", "1000")
        // A restarted instance takes its partitions back within seconds
        // (librdkafka's 45 s default keeps a dead member's partitions idle).
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "2000")
        .set("enable.partition.eof", "false")
        // A fetch waits at most 50 ms for data (librdkafka's default is
        // 500). Telemetry is a steady stream, so this costs a broker at most
        // twenty empty fetches a second, and it bounds how long a sample
        // sits in the broker. tansu 0.6 sleeps out the wait on *every*
        // fetch, full or not, and answers with what it found before the
        // sleep: the default capped it near 5 MB per 250 ms (~11 K
        // samples/s), and 100 ms kept most samples 0.5-1 s from broker to
        // decision where 50 ms keeps every sampled batch under 0.5 s
        // (BENCHMARKS.md, issue 7).
        .set("fetch.wait.max.ms", "50")
        // The group leader re-checks partition counts this often and
        // rebalances when they change (a topic unknown at join time would
        // otherwise stay unassigned for librdkafka's 5 min default).
        .set("topic.metadata.refresh.interval.ms", "10000");
    for (k, v) in &s.options {
        c.set(k, v);
    }
    c
}

/// How often to checkpoint, and whether a checkpoint directory exists.
pub struct CheckpointPolicy {
    pub every: Duration,
    /// Next offset per partition of the restored checkpoint.
    pub resume: Offsets,
}

/// Consumes until `stop` is set. Returns samples handed to the pipeline.
pub fn run(
    settings: &KafkaSettings,
    policy: Option<CheckpointPolicy>,
    state: &State,
    stop: &AtomicBool,
    dead: &mut DeadLetters,
    pipeline: &mut Pipeline,
) -> anyhow::Result<u64> {
    let shared = Arc::new(Shared::new(
        policy
            .as_ref()
            .map(|p| p.resume.clone())
            .unwrap_or_default(),
        policy.as_ref().map(|_| pipeline.handle()),
    ));
    let consumer: BaseConsumer<Ctx> = client_config(settings)
        .create_with_context(Ctx {
            shared: shared.clone(),
        })
        .context("creating the Kafka consumer")?;
    let topics: Vec<&str> = settings.topics.iter().map(String::as_str).collect();
    consumer
        .subscribe(&topics)
        .with_context(|| format!("subscribing to {topics:?}"))?;
    let dlq = match &settings.dead_letter_topic {
        Some(_) => Some(
            {
                let mut c = ClientConfig::new();
                c.set("bootstrap.servers", &settings.brokers);
                for (k, v) in &settings.options {
                    c.set(k, v);
                }
                c
            }
            .create::<ThreadedProducer<DefaultProducerContext>>()
            .context("creating the dead-letter producer")?,
        ),
        None => None,
    };
    tracing::info!(brokers = %settings.brokers, topics = ?settings.topics, group = %settings.group_id, "consuming");

    let mut resume: HashMap<(String, i32), (i64, bool)> = policy
        .as_ref()
        .map(|p| {
            p.resume
                .iter()
                .map(|(k, o)| (k.clone(), (*o, false)))
                .collect()
        })
        .unwrap_or_default();
    let mut out = DecodeOutput::default();
    let mut asm = adapter::Assembler::new(2_000);
    let mut batch: Vec<Sample> = Vec::with_capacity(BATCH);
    let mut batch_offsets: Offsets = Offsets::new();
    let mut batch_times: BTreeMap<(String, i32), i64> = BTreeMap::new();
    let mut batch_origin: Option<i64> = None;
    let mut batch_started = Instant::now();
    let mut paused = false;
    let mut pending_commit = None;
    let mut last_ckpt = Instant::now();
    let mut last_lag = Instant::now();
    let mut last_pace = Instant::now();
    let mut ahead = Pacer::default();
    let mut total = 0u64;
    // Something was handed over since the last checkpoint.
    let mut dirty = false;
    let every = policy.as_ref().map(|p| p.every);
    // Since when the pipeline's queues have been full (not yet paused).
    let mut full_since: Option<Instant> = None;

    while !stop.load(Ordering::Relaxed) {
        let full = pipeline.is_full();
        if !full {
            full_since = None;
        } else if !paused && full_since.get_or_insert_with(Instant::now).elapsed() < PAUSE_AFTER {
            // A short stall (a checkpoint, a Parquet roll, a slow batch):
            // wait without polling. librdkafka keeps its prefetched
            // messages, and its bounded queue stops the fetcher when full.
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if full != paused || shared.revoked.swap(false, Ordering::Relaxed) {
            let assignment = consumer.assignment().context("reading the assignment")?;
            if full {
                consumer.pause(&assignment).context("pausing partitions")?;
                state.metrics.paused("backpressure");
            } else {
                consumer
                    .resume(&assignment)
                    .context("resuming partitions")?;
            }
            paused = full;
        }
        let timeout = if paused { 5 } else { 20 };
        let polled = consumer.poll(Duration::from_millis(timeout));
        if shared.drop_batch.swap(false, Ordering::Relaxed) {
            batch.clear();
            batch_offsets.clear();
            batch_times.clear();
            batch_origin = None;
        }
        if let Ok(mut r) = shared.reseek.lock() {
            for (k, o) in std::mem::take(&mut *r) {
                resume.insert(k, (o, false));
            }
        }
        if let Some(msg) = polled {
            match msg {
                Ok(m) => {
                    let key = (m.topic().to_owned(), m.partition());
                    // Resume exactly at the checkpoint's offset.
                    if let Some((want, sought)) = resume.get_mut(&key) {
                        if m.offset() < *want {
                            continue;
                        }
                        if m.offset() > *want && !*sought {
                            *sought = true;
                            tracing::info!(topic = %key.0, partition = key.1, from = m.offset(), to = *want, "seeking to the checkpoint's offset");
                            consumer
                                .seek(
                                    &key.0,
                                    key.1,
                                    Offset::Offset(*want),
                                    Duration::from_secs(10),
                                )
                                .context("seeking to the checkpoint offset")?;
                            continue;
                        }
                        resume.remove(&key);
                    }
                    let payload = m.payload().unwrap_or_default();
                    out.clear();
                    match sniff(payload) {
                        Some(Encoding::Adapter) => match adapter::parse(payload) {
                            Ok(msg) => asm.push(msg, &mut out),
                            Err(e) => out.errors.push(e),
                        },
                        Some(Encoding::Native) | None => native::decode_into(payload, &mut out),
                        Some(_) => {
                            let o =
                                features::decode(payload, m.timestamp().to_millis().unwrap_or(0));
                            out.samples.extend(o.samples);
                            out.errors.extend(o.errors);
                        }
                    }
                    let source = format!("{}/{}@{}", key.0, key.1, m.offset());
                    for e in &out.errors {
                        dead.record(state, &source, e, payload);
                        if let (Some(p), Some(topic)) = (&dlq, &settings.dead_letter_topic) {
                            let headers = OwnedHeaders::new()
                                .insert(Header {
                                    key: "reason",
                                    value: Some(e.reason()),
                                })
                                .insert(Header {
                                    key: "source",
                                    value: Some(source.as_str()),
                                });
                            let mut rec = BaseRecord::<[u8], [u8]>::to(topic)
                                .payload(payload)
                                .headers(headers);
                            if let Some(k) = m.key() {
                                rec = rec.key(k);
                            }
                            if let Err((err, _)) = p.send(rec) {
                                tracing::warn!(error = %err, "dead-letter topic send failed");
                            }
                        }
                    }
                    if let Some(ts) = m.timestamp().to_millis() {
                        batch_origin = Some(batch_origin.map_or(ts, |o| o.min(ts)));
                    }
                    if batch.is_empty() {
                        batch_started = Instant::now();
                    }
                    if let Some(newest) = out.samples.iter().map(|s| s.ts_ms).max() {
                        let t = batch_times.entry(key.clone()).or_insert(i64::MIN);
                        *t = (*t).max(newest);
                    }
                    batch.append(&mut out.samples);
                    batch_offsets.insert(key, m.offset() + 1);
                }
                Err(e) => tracing::warn!(error = %e, "Kafka consumer error"),
            }
        }
        let due = batch.len() >= BATCH || (!batch.is_empty() && batch_started.elapsed() >= LINGER);
        let ckpt_due = every.is_some_and(|e| last_ckpt.elapsed() >= e) && pending_commit.is_none();
        if (due && !paused) || (ckpt_due && !batch_offsets.is_empty()) {
            total += batch.len() as u64;
            state
                .metrics
                .samples_in
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let b = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
            // The horizon from before this batch: every partition's samples
            // up to it are already in the shards. Including the batch would
            // let silence be judged at its end while its own samples (the
            // host peers that show a GPU is lost, not its host) are still
            // unprocessed.
            let horizon = shared.horizon();
            if let Ok(mut sent) = shared.sent.lock() {
                sent.append(&mut batch_offsets);
            }
            if let Ok(mut et) = shared.event_time.lock() {
                let now = Instant::now();
                for (k, t) in std::mem::take(&mut batch_times) {
                    let e = et.entry(k).or_insert((i64::MIN, now));
                    *e = (e.0.max(t), now);
                }
            }
            pipeline.send_from(b, batch_origin.take(), horizon)?;
            batch_offsets.clear();
            dirty = true;
        }
        if ckpt_due && dirty {
            dirty = false;
            last_ckpt = Instant::now();
            if let Some(cp) = &shared.checkpointer {
                let offsets = shared.sent.lock().map(|o| o.clone()).unwrap_or_default();
                pending_commit = Some(cp.request(offsets)?);
            }
        }
        if let Some(rx) = &pending_commit {
            match rx.try_recv() {
                Ok(Ok(w)) => {
                    pending_commit = None;
                    if let Err(e) = commit(&consumer, &w.offsets, CommitMode::Async) {
                        tracing::warn!(error = %e, "committing offsets");
                    }
                }
                Ok(Err(e)) => {
                    pending_commit = None;
                    tracing::error!(error = %e, "checkpoint failed; offsets not committed");
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    anyhow::bail!("the pipeline stopped")
                }
            }
        }
        if last_pace.elapsed() >= Duration::from_millis(200) {
            last_pace = Instant::now();
            pace(&consumer, &shared, state, &mut ahead);
        }
        if last_lag.elapsed() >= Duration::from_secs(1) {
            last_lag = Instant::now();
            report_lag(&shared, state, settings.ready_lag);
        }
    }
    if !batch.is_empty() {
        total += batch.len() as u64;
        pipeline.send_from(batch, batch_origin, shared.horizon())?;
        if let Ok(mut sent) = shared.sent.lock() {
            sent.append(&mut batch_offsets);
        }
    }
    // A clean stop checkpoints and commits everything handed over.
    if let Some(cp) = &shared.checkpointer {
        let offsets = shared.sent.lock().map(|o| o.clone()).unwrap_or_default();
        let w = cp.checkpoint_now(offsets)?;
        if final_commit(&consumer, &shared, &w.offsets, FINAL_COMMIT_WAIT) {
            tracing::info!(
                seq = w.seq,
                "final checkpoint written and offsets committed"
            );
        } else {
            // The checkpoint holds the offsets and a restart seeks to
            // them, so nothing is lost or read twice beyond re-sends.
            tracing::warn!(
                seq = w.seq,
                wait_s = FINAL_COMMIT_WAIT.as_secs(),
                "final checkpoint written; the broker did not confirm the offset commit in time (unreachable?): a restart resumes from the checkpoint"
            );
        }
    }
    dead.flush();
    Ok(total)
}

/// Pauses partitions more than [`MAX_AHEAD_MS`] ahead of the horizon for
/// [`super::pacing::AHEAD_GRACE`] and resumes them once the others are within half of that.
fn pace(consumer: &BaseConsumer<Ctx>, shared: &Shared, state: &State, ahead: &mut Pacer) {
    let horizon = shared.horizon().filter(|h| *h != i64::MIN);
    let times: Vec<((String, i32), i64)> = match shared.event_time.lock() {
        Ok(et) => et.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        Err(_) => return,
    };
    let now = Instant::now();
    for (k, t) in times {
        let far = horizon.is_some_and(|h| t > h + MAX_AHEAD_MS);
        let near = horizon.is_none_or(|h| t <= h + MAX_AHEAD_MS / 2);
        let change = ahead.decide(&k, far, near, now);
        let Some(pause) = change else { continue };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&k.0, k.1);
        let r = if pause {
            consumer.pause(&tpl)
        } else {
            consumer.resume(&tpl)
        };
        match r {
            Ok(()) if pause => {
                state.metrics.paused("ahead");
                ahead.paused.insert(k);
            }
            Ok(()) => {
                ahead.paused.remove(&k);
            }
            Err(e) => tracing::warn!(error = %e, "pacing a partition"),
        }
    }
}

/// Publishes lag per partition and readiness (caught up within the bound).
fn report_lag(shared: &Shared, state: &State, ready_lag: i64) {
    let (Ok(high), Ok(sent)) = (shared.high.lock(), shared.sent.lock()) else {
        return;
    };
    if high.is_empty() {
        return;
    }
    let mut total = 0i64;
    for ((t, p), hi) in high.iter() {
        let next = sent.get(&(t.clone(), *p)).copied().unwrap_or(0);
        let lag = (hi - next).max(0);
        total += lag;
        state.metrics.set_lag(format!("{t}/{p}"), lag);
    }
    let ready = total <= ready_lag;
    if ready != state.is_ready() {
        tracing::info!(lag = total, ready, "consumer lag");
    }
    state.set_ready(ready);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_with_no_broker_does_not_wait_for_its_commit() {
        let shared = Arc::new(Shared::new(Offsets::new(), None));
        // Nothing listens on the discard port.
        let settings = KafkaSettings {
            brokers: "127.0.0.1:9".into(),
            topics: vec!["telemetry".into()],
            group_id: "forewarn-test".into(),
            options: BTreeMap::new(),
            dead_letter_topic: None,
            ready_lag: 0,
        };
        let consumer: BaseConsumer<Ctx> = client_config(&settings)
            .create_with_context(Ctx {
                shared: shared.clone(),
            })
            .expect("consumer");
        let mut offsets = Offsets::new();
        offsets.insert(("telemetry".into(), 0), 42);
        let t = Instant::now();
        let confirmed = final_commit(&consumer, &shared, &offsets, Duration::from_secs(1));
        assert!(!confirmed, "no broker confirmed anything");
        // Bounded by the wait (plus one poll), not by the broker.
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(final_commit(
            &consumer,
            &shared,
            &Offsets::new(),
            Duration::ZERO
        ));
    }
}
