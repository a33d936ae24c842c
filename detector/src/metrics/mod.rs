//! Prometheus metrics. The hot path bumps plain atomics and small maps
//! (no registry lookups per sample); a scrape copies them into a fresh
//! `prometheus` registry, whose text encoder (exposition format 0.0.4)
//! writes the page and escapes label values. Metric names are constants
//! here, not ad-hoc strings at call sites; other programs scrape them, so
//! names, types, labels and help texts do not change.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use alerts::AlertEvent;
use prometheus::{IntCounterVec, Opts, Registry};

mod operator;
mod page;
pub mod partitions;
pub use operator::{FleetInfo, SEVERITIES, STATES};
pub use page::Histogram;
use page::Page;

pub const SAMPLES_IN: &str = "forewarn_samples_ingested_total";
pub const DECODE_ERRORS: &str = "forewarn_decode_errors_total";
pub const REJECTED: &str = "forewarn_samples_rejected_total";
pub const ASSESSMENTS: &str = "forewarn_assessments_total";
pub const ALERT_EVENTS: &str = "forewarn_alert_events_total";
pub const SHARD_LATENCY: &str = "forewarn_stage_batch_seconds";
pub const GPUS: &str = "forewarn_gpus";
pub const LAG: &str = "forewarn_consumer_lag";
pub const MODEL_VERSION: &str = "forewarn_model_info";
pub const MODEL_RELOADS: &str = "forewarn_model_reloads_total";
pub const SINK_DELIVERED: &str = "forewarn_sink_delivered_total";
pub const SINK_RETRIES: &str = "forewarn_sink_failures_total";
pub const SINK_DEAD: &str = "forewarn_sink_dead_lettered_total";
pub const SINK_PENDING: &str = "forewarn_sink_pending";
pub const DECISION_LATENCY: &str = "forewarn_broker_to_decision_seconds";
pub const CHECKPOINTS: &str = "forewarn_checkpoints_total";
pub const CHECKPOINT_BYTES: &str = "forewarn_checkpoint_bytes";
pub const CHECKPOINT_SECONDS: &str = "forewarn_checkpoint_write_seconds";
pub const SOURCE_PAUSES: &str = "forewarn_source_pauses_total";
pub const COMPONENT_UP: &str = "forewarn_component_up";
pub const KAFKA_BROKER_UP: &str = "forewarn_kafka_broker_up";
pub const SIGNAL_PRESENT: &str = "forewarn_input_signal_present";

/// Metrics a source keeps itself (remote-write requests, scrape targets),
/// rendered as exposition text and appended to the page.
pub trait SourceMetrics: Send + Sync + std::fmt::Debug {
    fn render(&self) -> String;
}

#[derive(Debug)]
pub struct Metrics {
    /// The running source's own metrics, if it keeps any.
    pub source: std::sync::OnceLock<std::sync::Arc<dyn SourceMetrics>>,
    /// The fleet topic's writer (docs/scaling.md), when there is one.
    pub fleet: std::sync::OnceLock<std::sync::Arc<dyn SourceMetrics>>,
    pub samples_in: AtomicU64,
    pub assessments: AtomicU64,
    pub gpus: AtomicU64,
    decode_errors: Mutex<BTreeMap<&'static str, u64>>,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    /// Partition pauses by the Kafka source, by reason.
    pauses: Mutex<BTreeMap<&'static str, u64>>,
    alert_events: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    lag: Mutex<BTreeMap<String, i64>>,
    /// Samples, checkpoint sizes and restore times per partition.
    pub partitions: partitions::PartitionFigures,
    /// Whether the Kafka brokers answer: 1, 0, or -1 (not consuming from
    /// Kafka: the gauge is left out).
    kafka_broker_up: AtomicI64,
    pub shard_latency: Histogram,
    /// Broker append (or produce) time to the alert decision, per batch.
    pub decision_latency: Histogram,
    pub checkpoints: AtomicU64,
    checkpoint_bytes: AtomicU64,
    pub checkpoint_latency: Histogram,
    /// Which signals detection reads the input has carried.
    pub coverage: crate::coverage::Coverage,
    /// Wall time of the newest batch the pipeline took in (0: none yet).
    last_ingest_ms: AtomicI64,
    /// The fleet's robust event time the pipeline reached (0: none yet).
    event_ms: AtomicI64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            source: std::sync::OnceLock::new(),
            fleet: std::sync::OnceLock::new(),
            samples_in: AtomicU64::new(0),
            assessments: AtomicU64::new(0),
            gpus: AtomicU64::new(0),
            decode_errors: Mutex::default(),
            rejected: Mutex::default(),
            pauses: Mutex::default(),
            alert_events: Mutex::default(),
            lag: Mutex::default(),
            partitions: partitions::PartitionFigures::default(),
            kafka_broker_up: AtomicI64::new(-1),
            shard_latency: Histogram::new(SHARD_LATENCY, "Time a shard spends on one batch."),
            decision_latency: Histogram::new(
                DECISION_LATENCY,
                "Kafka message timestamp to alert decision, per batch (oldest message).",
            ),
            checkpoints: AtomicU64::new(0),
            checkpoint_bytes: AtomicU64::new(0),
            checkpoint_latency: Histogram::new(
                CHECKPOINT_SECONDS,
                "Time to encode and write a checkpoint.",
            ),
            coverage: crate::coverage::Coverage::default(),
            last_ingest_ms: AtomicI64::new(0),
            event_ms: AtomicI64::new(0),
        }
    }
}

fn bump(m: &Mutex<BTreeMap<&'static str, u64>>, reason: &'static str, n: u64) {
    if let Ok(mut m) = m.lock() {
        *m.entry(reason).or_default() += n;
    }
}

fn rows(m: &Mutex<BTreeMap<&'static str, u64>>) -> Vec<(&'static str, u64)> {
    m.lock()
        .map(|m| m.iter().map(|(k, v)| (*k, *v)).collect())
        .unwrap_or_default()
}

/// The model fields `/metrics` shows.
#[derive(Debug, Clone, Copy)]
pub struct ModelInfo<'a> {
    pub version: &'a str,
    pub reloads: u64,
    pub refused: u64,
}

/// The alert outbox's per-receiver delivery counters.
#[derive(Debug, Clone, Copy)]
pub struct SinkInfo<'a> {
    pub outbox: &'a alerts::Outbox,
    pub receivers: &'a [String],
}

impl Metrics {
    pub fn decode_error(&self, reason: &'static str) {
        bump(&self.decode_errors, reason, 1);
    }

    /// `forewarn_decode_errors_total` by reason, as `/metrics` shows it.
    pub fn decode_errors_by_reason(&self) -> Vec<(&'static str, u64)> {
        rows(&self.decode_errors)
    }

    pub fn rejected(&self, reason: &'static str) {
        bump(&self.rejected, reason, 1);
    }

    /// The Kafka source paused partitions (`reason`: why).
    pub fn paused(&self, reason: &'static str) {
        bump(&self.pauses, reason, 1);
    }

    pub fn alert_event(&self, e: &AlertEvent) {
        if let Ok(mut m) = self.alert_events.lock() {
            *m.entry((e.severity.as_str(), e.status.as_str()))
                .or_default() += 1;
        }
    }

    pub fn checkpoint_written(&self, bytes: u64, seconds: f64) {
        self.checkpoints.fetch_add(1, Relaxed);
        self.checkpoint_bytes.store(bytes, Relaxed);
        self.checkpoint_latency.observe(seconds);
    }

    pub fn set_lag(&self, partition: String, lag: i64) {
        if let Ok(mut m) = self.lag.lock() {
            m.insert(partition, lag);
        }
    }

    /// The consumer lag gauge: partition → messages behind.
    pub fn lags(&self) -> BTreeMap<String, i64> {
        self.lag.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Drops the lag of every partition but `partitions` (those this
    /// instance no longer reads).
    pub fn keep_lag(&self, partitions: &[String]) {
        if let Ok(mut m) = self.lag.lock() {
            m.retain(|k, _| partitions.contains(k));
        }
    }

    /// The pipeline took in a batch at wall time `wall_ms`, its event
    /// clock now at `event_ms`.
    pub fn batch_taken(&self, wall_ms: i64, event_ms: Option<i64>) {
        self.last_ingest_ms.store(wall_ms, Relaxed);
        if let Some(t) = event_ms {
            self.event_ms.store(t, Relaxed);
        }
    }

    /// The Kafka source's judgement of its brokers.
    pub fn set_kafka_broker_up(&self, up: bool) {
        self.kafka_broker_up.store(i64::from(up), Relaxed);
    }

    /// The Prometheus text exposition (format 0.0.4).
    pub fn render(
        &self,
        model: ModelInfo<'_>,
        sinks: Option<SinkInfo<'_>>,
        components: &[(String, i64)],
        fleet: &FleetInfo,
    ) -> String {
        let p = Page(Registry::new());
        operator::render(
            &p,
            fleet,
            self.last_ingest_ms.load(Relaxed),
            self.event_ms.load(Relaxed),
        );
        p.gauges(
            COMPONENT_UP,
            "1 while a component works, 0 while it is degraded (retrying a fault) or stopped; /healthz says which and why.",
            "component",
            components.iter().map(|(n, v)| (n.as_str(), *v)),
        );
        p.counter(
            SAMPLES_IN,
            "Telemetry samples decoded and handed to the pipeline.",
            self.samples_in.load(Relaxed),
        );
        p.counter(
            ASSESSMENTS,
            "GPU assessments produced by the models.",
            self.assessments.load(Relaxed),
        );
        p.gauge(
            GPUS,
            "GPUs known to the pipeline.",
            gauge(self.gpus.load(Relaxed)),
        );
        p.gauges(
            SIGNAL_PRESENT,
            "1 once any sample carried the signal (one of its DCGM fields), 0 while none has: detection that reads it is blind (docs/inputs/scrape.md, the counters list).",
            "signal",
            self.coverage.present(),
        );
        p.counters(
            DECODE_ERRORS,
            "Messages or records that could not be decoded, by reason.",
            "reason",
            rows(&self.decode_errors),
        );
        p.counters(
            REJECTED,
            "Samples rejected by the feature stage, by reason.",
            "reason",
            rows(&self.rejected),
        );
        p.counters(
            SOURCE_PAUSES,
            "Times the Kafka source paused its partitions, by reason (a pause drops librdkafka's prefetched messages, which are fetched again on resume).",
            "reason",
            rows(&self.pauses),
        );
        if let Ok(c) = IntCounterVec::new(
            Opts::new(ALERT_EVENTS, "Alert state changes, by severity and status."),
            &["severity", "status"],
        ) {
            if let Ok(m) = self.alert_events.lock() {
                for ((sev, status), v) in m.iter() {
                    c.with_label_values(&[*sev, *status]).inc_by(*v);
                }
            }
            p.add(c);
        }
        if let Ok(m) = self.lag.lock() {
            p.gauges(
                LAG,
                "Consumer lag in messages, by topic-partition.",
                "partition",
                m.iter().map(|(k, v)| (k.as_str(), *v)),
            );
        }
        self.partitions.render(&p);
        let broker_up = self.kafka_broker_up.load(Relaxed);
        if broker_up >= 0 {
            p.gauge(
                KAFKA_BROKER_UP,
                "Whether the Kafka source's brokers answer (0 while none has for a few seconds; /readyz is then 503).",
                broker_up,
            );
        }
        p.add(self.shard_latency.0.clone());
        p.add(self.decision_latency.0.clone());
        p.add(self.checkpoint_latency.0.clone());
        p.counter(
            CHECKPOINTS,
            "Checkpoints written.",
            self.checkpoints.load(Relaxed),
        );
        p.gauge(
            CHECKPOINT_BYTES,
            "Size of the newest checkpoint.",
            gauge(self.checkpoint_bytes.load(Relaxed)),
        );
        p.gauges(
            MODEL_VERSION,
            "Loaded model versions.",
            "version",
            [(model.version, 1)],
        );
        p.counters(
            MODEL_RELOADS,
            "Failure-model reloads, by result.",
            "result",
            [("loaded", model.reloads), ("refused", model.refused)],
        );
        if let Some(s) = sinks {
            render_sinks(&p, s);
        }
        let mut text = p.text();
        if let Some(source) = self.source.get() {
            text.push_str(&source.render());
        }
        if let Some(fleet) = self.fleet.get() {
            text.push_str(&fleet.render());
        }
        text
    }
}

fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Per-receiver delivery counters of the alert outbox.
fn render_sinks(p: &Page, s: SinkInfo<'_>) {
    let stat = |r: &String, f: fn(&alerts::outbox::DeliveryStats) -> &AtomicU64| {
        s.outbox.stats(r).map_or(0, |st| f(st).load(Relaxed))
    };
    let each = |f: fn(&alerts::outbox::DeliveryStats) -> &AtomicU64| {
        s.receivers
            .iter()
            .map(move |r| (r.as_str(), stat(r, f)))
            .collect::<Vec<_>>()
    };
    p.counters(
        SINK_DELIVERED,
        "Notifications a receiver accepted.",
        "receiver",
        each(|st| &st.delivered),
    );
    p.counters(
        SINK_RETRIES,
        "Failed delivery attempts (retried).",
        "receiver",
        each(|st| &st.retries),
    );
    p.counters(
        SINK_DEAD,
        "Notifications given up on (dead-lettered).",
        "receiver",
        each(|st| &st.dead_lettered),
    );
    p.float_gauges(
        operator::SINK_OLDEST,
        "Age of a receiver's oldest notification still waiting in the outbox (0 when none waits).",
        "receiver",
        s.receivers.iter().map(|r| {
            let age = s.outbox.oldest_pending_age(r).unwrap_or_default();
            (r.as_str(), age.as_secs_f64())
        }),
    );
    p.gauges(
        SINK_PENDING,
        "Notifications waiting in the outbox.",
        "receiver",
        s.receivers
            .iter()
            .map(|r| (r.as_str(), gauge(s.outbox.pending(r) as u64))),
    );
}

#[cfg(test)]
mod deploy_tests;
