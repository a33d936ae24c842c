//! Prometheus metrics, rendered by hand in the text exposition format.
//! Metric names are constants here, not ad-hoc strings at call sites.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use alerts::AlertEvent;

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

/// Upper bounds (seconds) of the latency histograms: 0.5 ms to 10 s.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A fixed-bucket histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, seconds: f64) {
        let i = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add((seconds * 1e6) as u64, Relaxed);
    }

    /// The upper bound of the bucket holding quantile `q` (None if empty).
    pub fn quantile_bound(&self, q: f64) -> Option<f64> {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let want = (q * total as f64).ceil() as u64;
        let mut cum = 0;
        for (i, c) in counts.iter().enumerate() {
            cum += c;
            if cum >= want {
                return Some(BUCKETS.get(i).copied().unwrap_or(f64::INFINITY));
            }
        }
        Some(f64::INFINITY)
    }

    fn render(&self, s: &mut String, name: &str, help: &str) {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cum = 0;
        for (i, b) in BUCKETS.iter().enumerate() {
            cum += self.counts[i].load(Relaxed);
            let _ = writeln!(s, "{name}_bucket{{le=\"{b}\"}} {cum}");
        }
        cum += self.counts[BUCKETS.len()].load(Relaxed);
        let _ = writeln!(
            s,
            "{name}_bucket{{le=\"+Inf\"}} {cum}\n{name}_sum {}\n{name}_count {cum}",
            self.sum_us.load(Relaxed) as f64 / 1e6
        );
    }
}

#[derive(Debug, Default)]
pub struct Metrics {
    pub samples_in: AtomicU64,
    pub assessments: AtomicU64,
    pub gpus: AtomicU64,
    decode_errors: Mutex<BTreeMap<&'static str, u64>>,
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    /// Partition pauses by the Kafka source, by reason.
    pauses: Mutex<BTreeMap<&'static str, u64>>,
    alert_events: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    lag: Mutex<BTreeMap<String, i64>>,
    pub shard_latency: Histogram,
    /// Broker append (or produce) time to the alert decision, per batch.
    pub decision_latency: Histogram,
    pub checkpoints: AtomicU64,
    checkpoint_bytes: AtomicU64,
    pub checkpoint_latency: Histogram,
}

fn bump(m: &Mutex<BTreeMap<&'static str, u64>>, reason: &'static str, n: u64) {
    if let Ok(mut m) = m.lock() {
        *m.entry(reason).or_default() += n;
    }
}

impl Metrics {
    pub fn decode_error(&self, reason: &'static str) {
        bump(&self.decode_errors, reason, 1);
    }

    pub fn rejected(&self, reason: &'static str) {
        bump(&self.rejected, reason, 1);
    }

    /// The Kafka source paused partitions (`reason`: why).
    pub fn paused(&self, reason: &'static str) {
        bump(&self.pauses, reason, 1);
    }

    pub fn decode_errors_total(&self) -> u64 {
        self.decode_errors
            .lock()
            .map(|m| m.values().sum())
            .unwrap_or(0)
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

    /// The Prometheus text exposition.
    pub fn render(&self, model: &crate::reload::ModelStatus) -> String {
        let mut s = String::new();
        let counter = |s: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        counter(
            &mut s,
            SAMPLES_IN,
            "Telemetry samples decoded and handed to the pipeline.",
            self.samples_in.load(Relaxed),
        );
        counter(
            &mut s,
            ASSESSMENTS,
            "GPU assessments produced by the models.",
            self.assessments.load(Relaxed),
        );
        let _ = writeln!(
            s,
            "# HELP {GPUS} GPUs known to the pipeline.\n# TYPE {GPUS} gauge\n{GPUS} {}",
            self.gpus.load(Relaxed)
        );
        for (name, help, map) in [
            (
                DECODE_ERRORS,
                "Messages or records that could not be decoded, by reason.",
                &self.decode_errors,
            ),
            (
                REJECTED,
                "Samples rejected by the feature stage, by reason.",
                &self.rejected,
            ),
            (
                SOURCE_PAUSES,
                "Times the Kafka source paused its partitions, by reason (a pause drops librdkafka's prefetched messages, which are fetched again on resume).",
                &self.pauses,
            ),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter");
            if let Ok(m) = map.lock() {
                for (reason, v) in m.iter() {
                    let _ = writeln!(s, "{name}{{reason=\"{reason}\"}} {v}");
                }
            }
        }
        let _ = writeln!(
            s,
            "# HELP {ALERT_EVENTS} Alert state changes, by severity and status.\n# TYPE {ALERT_EVENTS} counter"
        );
        if let Ok(m) = self.alert_events.lock() {
            for ((sev, status), v) in m.iter() {
                let _ = writeln!(
                    s,
                    "{ALERT_EVENTS}{{severity=\"{sev}\",status=\"{status}\"}} {v}"
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP {LAG} Consumer lag in messages, by topic-partition.\n# TYPE {LAG} gauge"
        );
        if let Ok(m) = self.lag.lock() {
            for (p, v) in m.iter() {
                let _ = writeln!(s, "{LAG}{{partition=\"{p}\"}} {v}");
            }
        }
        self.shard_latency
            .render(&mut s, SHARD_LATENCY, "Time a shard spends on one batch.");
        self.decision_latency.render(
            &mut s,
            DECISION_LATENCY,
            "Kafka message timestamp to alert decision, per batch (oldest message).",
        );
        self.checkpoint_latency.render(
            &mut s,
            CHECKPOINT_SECONDS,
            "Time to encode and write a checkpoint.",
        );
        counter(
            &mut s,
            CHECKPOINTS,
            "Checkpoints written.",
            self.checkpoints.load(Relaxed),
        );
        let _ = writeln!(
            s,
            "# HELP {CHECKPOINT_BYTES} Size of the newest checkpoint.\n# TYPE {CHECKPOINT_BYTES} gauge\n{CHECKPOINT_BYTES} {}",
            self.checkpoint_bytes.load(Relaxed)
        );
        let _ = writeln!(
            s,
            "# HELP {MODEL_VERSION} Loaded model versions.\n# TYPE {MODEL_VERSION} gauge\n{MODEL_VERSION}{{version=\"{}\"}} 1",
            model.version
        );
        let _ = writeln!(
            s,
            "# HELP {MODEL_RELOADS} Failure-model reloads, by result.\n# TYPE {MODEL_RELOADS} counter\n{MODEL_RELOADS}{{result=\"loaded\"}} {}\n{MODEL_RELOADS}{{result=\"refused\"}} {}",
            model.reloads, model.refused
        );
        s
    }
}

/// Per-receiver delivery counters of the alert outbox.
pub fn render_sinks(s: &mut String, outbox: &alerts::Outbox, receivers: &[String]) {
    let rows: [(&str, &str, &str); 4] = [
        (
            SINK_DELIVERED,
            "counter",
            "Notifications a receiver accepted.",
        ),
        (
            SINK_RETRIES,
            "counter",
            "Failed delivery attempts (retried).",
        ),
        (
            SINK_DEAD,
            "counter",
            "Notifications given up on (dead-lettered).",
        ),
        (
            SINK_PENDING,
            "gauge",
            "Notifications waiting in the outbox.",
        ),
    ];
    for (name, kind, help) in rows {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for r in receivers {
            let v = match (name, outbox.stats(r)) {
                (SINK_PENDING, _) => outbox.pending(r) as u64,
                (SINK_DELIVERED, Some(st)) => st.delivered.load(Relaxed),
                (SINK_RETRIES, Some(st)) => st.retries.load(Relaxed),
                (SINK_DEAD, Some(st)) => st.dead_lettered.load(Relaxed),
                _ => 0,
            };
            let _ = writeln!(s, "{name}{{receiver=\"{r}\"}} {v}");
        }
    }
}
