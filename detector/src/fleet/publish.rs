//! Writing to the fleet topic (see [`super`]): the alert thread's rounds,
//! REST's silence commands and the stage owner's events and snapshots.
//!
//! One producer per instance, ordered (one request in flight, so a retry
//! never reorders two records). Sends are asynchronous; a failed delivery
//! is counted and logged. A round larger than [`CHUNK`] assessments goes
//! out in pieces, each naming the partitions and horizon, racks and
//! evictions in the last.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use alerts::AlertEvent;
use features::GpuId;
use features::expected::rack::RackReading;
use models::assess::Assessment;
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};

use super::{FleetError, Record, Round, SilenceCommand, WireAssessment, WireSilence};
use crate::sources::kafka::KafkaSettings;

/// Assessments per record (a record stays well under a broker's 1 MB).
pub const CHUNK: usize = 1_000;

/// Counts failed deliveries.
#[derive(Default, Debug)]
pub struct Delivery {
    pub failed: AtomicU64,
    pub sent: AtomicU64,
    /// Payload bytes handed to the producer.
    pub bytes: AtomicU64,
}

/// Records the fleet topic's writer delivered or lost.
pub const RECORDS: &str = "forewarn_fleet_records_total";
/// Payload bytes written to the fleet topic.
pub const BYTES: &str = "forewarn_fleet_bytes_total";

impl crate::metrics::SourceMetrics for Delivery {
    fn render(&self) -> String {
        use prometheus::{IntCounter, IntCounterVec, Opts, Registry};
        let reg = Registry::new();
        if let Ok(c) = IntCounterVec::new(
            Opts::new(
                RECORDS,
                "Records this instance wrote to the fleet topic, by result (failed: not delivered, logged).",
            ),
            &["result"],
        ) {
            c.with_label_values(&["sent"])
                .inc_by(self.sent.load(Relaxed));
            c.with_label_values(&["failed"])
                .inc_by(self.failed.load(Relaxed));
            let _ = reg.register(Box::new(c));
        }
        if let Ok(c) = IntCounter::new(
            BYTES,
            "Payload bytes this instance wrote to the fleet topic.",
        ) {
            c.inc_by(self.bytes.load(Relaxed));
            let _ = reg.register(Box::new(c));
        }
        let mut s = String::new();
        let _ = prometheus::TextEncoder::new().encode_utf8(&reg.gather(), &mut s);
        s
    }
}

/// The producer's context: the shared counters.
pub struct DeliveryCtx(Arc<Delivery>);

impl ClientContext for DeliveryCtx {}

impl ProducerContext for DeliveryCtx {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.sent.fetch_add(1, Relaxed);
            }
            Err((e, _)) => {
                let n = self.0.failed.fetch_add(1, Relaxed);
                if n.is_multiple_of(100) {
                    tracing::error!(error = %e, failed = n + 1, "fleet topic: a record was not delivered");
                }
            }
        }
    }
}

/// The instance's writer to the fleet topic.
pub struct Publisher {
    producer: ThreadedProducer<DeliveryCtx>,
    topic: String,
    instance: String,
    pub delivery: Arc<Delivery>,
    /// The last round's (partitions, horizon): an empty round that
    /// changes neither is not sent.
    last: Mutex<(Vec<String>, Option<i64>)>,
    /// Failed deliveries counted at the last [`Publisher::confirm`].
    confirmed_failed: AtomicU64,
}

impl Publisher {
    /// A producer for `topic` with the source's client options.
    pub fn open(kafka: &KafkaSettings, topic: &str, instance: &str) -> Result<Self, FleetError> {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &kafka.brokers);
        for (k, v) in &kafka.options {
            c.set(k, v);
        }
        c.set("max.in.flight.requests.per.connection", "1")
            .set("linger.ms", "5")
            .set("message.max.bytes", "4000000");
        let delivery = Arc::new(Delivery::default());
        let producer = c.create_with_context(DeliveryCtx(delivery.clone()))?;
        Ok(Publisher {
            producer,
            topic: topic.to_owned(),
            instance: instance.to_owned(),
            delivery,
            last: Mutex::new((Vec::new(), None)),
            confirmed_failed: AtomicU64::new(0),
        })
    }

    fn send(&self, record: &Record) {
        let bytes = match super::encode(record) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "fleet topic: record not sent");
                return;
            }
        };
        let mut rec = BaseRecord::<[u8], [u8]>::to(&self.topic)
            .payload(&bytes)
            .partition(super::PARTITION);
        // A full local queue: wait for room rather than lose the record.
        loop {
            match self.producer.send(rec) {
                Ok(()) => {
                    self.delivery.bytes.fetch_add(bytes.len() as u64, Relaxed);
                    return;
                }
                Err((e, back)) => {
                    if e.rdkafka_error_code() != Some(rdkafka::types::RDKafkaErrorCode::QueueFull) {
                        self.delivery.failed.fetch_add(1, Relaxed);
                        tracing::error!(error = %e, "fleet topic: record not sent");
                        return;
                    }
                    rec = back;
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }

    /// Publishes one round of this instance's assessments.
    pub fn round(
        &self,
        partitions: Vec<String>,
        horizon_ms: Option<i64>,
        assessments: &[Assessment],
        racks: &[RackReading],
        evicted: &[GpuId],
    ) {
        let empty = assessments.is_empty() && racks.is_empty() && evicted.is_empty();
        if let Ok(mut last) = self.last.lock() {
            if empty && last.0 == partitions && last.1 == horizon_ms {
                return;
            }
            *last = (partitions.clone(), horizon_ms);
        }
        let chunks: Vec<&[Assessment]> = if assessments.is_empty() {
            vec![&[]]
        } else {
            assessments.chunks(CHUNK).collect()
        };
        let n = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let last = i + 1 == n;
            let round = Round {
                instance: self.instance.clone(),
                partitions: partitions.clone(),
                horizon_ms,
                assessments: chunk.iter().map(WireAssessment::from).collect(),
                racks: if last { racks.to_vec() } else { Vec::new() },
                evicted: if last { evicted.to_vec() } else { Vec::new() },
            };
            self.send(&Record::Round(round));
        }
    }

    /// Publishes a silence change and waits (up to 10 s) until the broker
    /// has it, so REST answers only for a change the stage will see.
    pub fn silence(&self, cmd: SilenceCommand) -> Result<(), FleetError> {
        let failed = self.delivery.failed.load(Relaxed);
        self.send(&Record::Silence(cmd));
        self.producer.flush(Duration::from_secs(10))?;
        if self.delivery.failed.load(Relaxed) != failed {
            return Err(FleetError::Topic {
                topic: self.topic.clone(),
                problem: "the silence was not delivered".into(),
            });
        }
        Ok(())
    }

    /// The stage owner's delivered events.
    pub fn events(&self, events: &[AlertEvent]) {
        if !events.is_empty() {
            self.send(&Record::Events(events.to_vec()));
        }
    }

    /// Keys of events whose notifications every receiver accepted.
    pub fn delivered(&self, keys: Vec<(String, alerts::Status, i64)>) {
        if !keys.is_empty() {
            self.send(&Record::Delivered(keys));
        }
    }

    /// The stage owner's silences and active alerts.
    pub fn snapshot(&self, silences: Vec<WireSilence>, active: Vec<AlertEvent>) {
        self.send(&Record::Snapshot { silences, active });
    }

    /// Waits up to `timeout` until every record queued so far is on the
    /// broker. An error when some did not get there, or some record sent
    /// since the last call failed: a partition checkpoint taken now would
    /// hold state whose assessments the fleet never got (a `gpu_lost` is
    /// judged once), so the barrier leaves the partitions unwritten and
    /// their offsets uncommitted.
    pub fn confirm(&self, timeout: Duration) -> Result<(), FleetError> {
        let flushed = self.producer.flush(timeout);
        let failed = self.delivery.failed.load(Relaxed);
        let before = self.confirmed_failed.swap(failed, Relaxed);
        flushed?;
        if failed != before {
            return Err(FleetError::Topic {
                topic: self.topic.clone(),
                problem: format!(
                    "{} record(s) not delivered since the last checkpoint",
                    failed - before
                ),
            });
        }
        Ok(())
    }

    /// Waits for what is queued (clean stop).
    pub fn flush(&self) {
        if let Err(e) = self.producer.flush(Duration::from_secs(10)) {
            tracing::warn!(error = %e, "fleet topic: records still queued at stop");
        }
    }
}
