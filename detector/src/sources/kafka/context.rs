//! The consumer's rebalance context: state shared between the poll loop
//! and librdkafka's callbacks (which run inside `poll` on the source
//! thread), the callbacks themselves (statistics → high watermarks and
//! broker contact, global errors, commit answers, checkpoint-and-commit
//! before a revoke, resume points after an assign), and offset commits.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::statistics::Statistics;
use rdkafka::{Offset, TopicPartitionList};

use super::health::Reachability;
use crate::checkpoint::Offsets;
use crate::pipeline::PipelineHandle;

/// State shared with the consumer context (rebalance and statistics
/// callbacks run inside `poll` on the source thread).
pub(super) struct Shared {
    /// Next offset per partition of everything handed to the pipeline.
    pub(super) sent: Mutex<Offsets>,
    /// Newest high watermark per partition, from statistics.
    pub(super) high: Mutex<BTreeMap<(String, i32), i64>>,
    pub(super) checkpointer: Option<PipelineHandle>,
    /// Set by a revoke: the loop must re-read its assignment.
    pub(super) revoked: AtomicBool,
    /// Set by a revoke: the batch in hand (not yet handed over, so not in
    /// the checkpoint) is dropped; it is read again from the offsets.
    pub(super) drop_batch: AtomicBool,
    /// Set by an assign: partitions whose data the pipeline already holds
    /// restart exactly after it, not at the group's committed offset.
    pub(super) reseek: Mutex<Offsets>,
    /// Partitions assigned to this member (set by the rebalance callback).
    pub(super) assigned: Mutex<Vec<(String, i32)>>,
    /// Newest event time handed over per partition, and when (wall) the
    /// partition last delivered a message.
    pub(super) event_time: Mutex<BTreeMap<(String, i32), (i64, Instant)>>,
    /// Offset commits answered, and how many of those failed.
    pub(super) commits: AtomicU64,
    pub(super) commit_errors: AtomicU64,
    /// Whether the brokers answer (from statistics and connection errors).
    pub(super) reach: Mutex<Reachability>,
    /// Partition-aligned state: partitions assigned whose units the loop
    /// must restore, and partitions released at a revoke whose units the
    /// loop must drop from its routing (see [`super::units`]).
    pub(super) units: bool,
    pub(super) to_adopt: Mutex<Vec<(String, i32)>>,
    /// An assignment came (maybe empty): the rebalance has settled.
    pub(super) assign_seen: AtomicBool,
    pub(super) released: Mutex<Vec<(String, i32)>>,
    /// The partition store (its locks are released at a revoke).
    pub(super) store: Option<crate::pipeline::run::SharedPartitionStore>,
}

/// A caught-up partition with no message for this long no longer holds
/// event time back (an idle partition must not stop the clock).
const IDLE_PARTITION: Duration = Duration::from_secs(5);

impl Shared {
    /// Fresh state: `sent` is where each partition resumes.
    pub(super) fn new(sent: Offsets, checkpointer: Option<PipelineHandle>) -> Self {
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
            reach: Mutex::new(Reachability::default()),
            units: false,
            to_adopt: Mutex::new(Vec::new()),
            assign_seen: AtomicBool::new(false),
            released: Mutex::new(Vec::new()),
            store: None,
        }
    }

    /// With partition-aligned state over `store`.
    pub(super) fn with_units(mut self, store: crate::pipeline::run::SharedPartitionStore) -> Self {
        self.units = true;
        self.store = Some(store);
        self
    }

    /// Next offset per partition of everything handed to the pipeline.
    pub(super) fn sent_offsets(&self) -> Offsets {
        self.sent.lock().map(|o| o.clone()).unwrap_or_default()
    }

    /// The event time every assigned partition has reached: silence and
    /// alert timers run on it, so the GPUs of a partition that lags
    /// (fetches come a partition at a time, and a restart resumes them one
    /// by one) are not judged by another partition's clock. A partition
    /// stops holding time back only once it is caught up and has been
    /// quiet for [`IDLE_PARTITION`]. `None` when no partition counts.
    pub(super) fn horizon(&self) -> Option<i64> {
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

pub(super) struct Ctx {
    pub(super) shared: std::sync::Arc<Shared>,
}

impl ClientContext for Ctx {
    fn error(&self, error: KafkaError, reason: &str) {
        self.on_error(&error, reason);
    }

    /// librdkafka's own log, as rdkafka logs it, except connection
    /// failures (`FAIL`): librdkafka repeats them at every reconnect
    /// attempt while a broker is away, and the outage is reported once by
    /// the poll loop with the newest of them.
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if fac == "FAIL" {
            tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}");
            self.shared.connection_error(message);
            if is_refusal_text(message)
                && let Ok(mut r) = self.shared.reach.lock()
            {
                r.refused = Some(message.to_owned());
            }
            return;
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", "librdkafka: {fac} {message}");
            }
            RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", "librdkafka: {fac} {message}");
            }
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", "librdkafka: {fac} {message}");
            }
            RDKafkaLogLevel::Debug => {
                tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}");
            }
        }
    }

    fn stats(&self, stats: Statistics) {
        if let Ok(mut r) = self.shared.reach.lock() {
            r.observe(
                stats.ts,
                stats.brokers.values().map(|b| (b.state.as_str(), b.rxidle)),
            );
        }
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

/// A lost or refused broker connection: librdkafka reports these as
/// global errors and as consumer errors from `poll`, at every reconnect
/// attempt while a broker is away.
pub(crate) fn is_connection_error(error: &KafkaError) -> bool {
    is_refusal(error)
        || matches!(
            error.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::AllBrokersDown
                    | RDKafkaErrorCode::BrokerTransportFailure
                    | RDKafkaErrorCode::Resolve
            )
        )
}

/// A broker that refuses us: a failed TLS handshake (a CA that did not
/// sign its certificate, a plaintext port) or refused SASL credentials.
/// librdkafka retries these like a lost connection.
pub(crate) fn is_refusal(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(RDKafkaErrorCode::SSL | RDKafkaErrorCode::Authentication)
    )
}

impl Shared {
    /// Keeps the newest connection failure for the outage report.
    pub(super) fn connection_error(&self, message: &str) {
        if let Ok(mut r) = self.reach.lock()
            && !message.is_empty()
        {
            r.last_error = Some(message.to_owned());
        }
    }
}

/// librdkafka's account of a failed connection that is a refusal (its
/// error code reaches a consumer only through `poll`, after the log line).
pub(crate) fn is_refusal_text(message: &str) -> bool {
    message.contains("SSL handshake failed") || message.contains("SASL authentication error")
}

impl Shared {
    /// Keeps a TLS or SASL refusal (a consumer gets them from `poll`, not
    /// through the error callback), with librdkafka's fuller account of
    /// it from the connection failure it logged just before.
    pub(super) fn note_refusal(&self, error: &KafkaError) {
        if is_refusal(error)
            && let Ok(mut r) = self.reach.lock()
        {
            r.refused = Some(r.last_error.clone().unwrap_or_else(|| error.to_string()));
        }
    }
}

impl Ctx {
    /// librdkafka's global errors. Losing the brokers is reported once per
    /// outage by the poll loop ([`super::health`]), so connection errors
    /// are kept for that report and logged at debug only.
    fn on_error(&self, error: &KafkaError, reason: &str) {
        if is_refusal(error)
            && let Ok(mut r) = self.shared.reach.lock()
        {
            r.refused = Some(if reason.is_empty() {
                error.to_string()
            } else {
                reason.to_owned()
            });
        }
        if is_connection_error(error) {
            tracing::debug!(error = %error, reason, "Kafka connection error");
        } else {
            tracing::error!(error = %error, reason, "Kafka client error");
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
                if self.shared.units
                    && let Ok(mut t) = self.shared.to_adopt.lock()
                {
                    t.extend(parts.iter().cloned());
                    self.shared.assign_seen.store(true, Ordering::Relaxed);
                }
                if let Ok(mut a) = self.shared.assigned.lock() {
                    *a = parts;
                }
            }
            return;
        };
        if self.shared.units {
            super::units::revoke(self, consumer, tpl);
            return;
        }
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
        let offsets = self.shared.sent_offsets();
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
pub(super) const FINAL_COMMIT_WAIT: Duration = Duration::from_secs(5);

/// Commits `offsets` and waits up to `wait` for the broker's answer (a
/// synchronous commit waits without a timeout, and a stop must not hang
/// when the broker is gone). Whether the broker confirmed it.
pub(super) fn final_commit(
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

pub(super) fn commit(
    consumer: &BaseConsumer<Ctx>,
    offsets: &Offsets,
    mode: CommitMode,
) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sources::kafka::{KafkaSettings, client_config};

    #[test]
    fn a_stop_with_no_broker_does_not_wait_for_its_commit() {
        let shared = Arc::new(Shared::new(Offsets::new(), None));
        // Nothing listens on the discard port.
        let settings = KafkaSettings {
            brokers: "127.0.0.1:9".into(),
            topics: vec!["telemetry".into()],
            group_id: "forewarn-test".into(),
            options: BTreeMap::new(),
            secrets: BTreeMap::new(),
            dead_letter_topic: None,
            fleet_topic: None,
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
