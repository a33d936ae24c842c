//! The Kafka source's settings and the librdkafka client options built from
//! them: the consumer's (ours first, the operator's win) and the
//! dead-letter producer's. Secret option values are resolved into the
//! options at start ([`super::preflight`]) and never printed: `Debug`
//! shows them redacted.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{DefaultProducerContext, ThreadedProducer};

use super::secrets::{self, SecretRef};
use crate::checkpoint::Offsets;

impl std::fmt::Debug for KafkaSettings {
    /// Secret option values (however given) are shown redacted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSettings")
            .field("brokers", &self.brokers)
            .field("topics", &self.topics)
            .field("group_id", &self.group_id)
            .field("options", &secrets::redacted(&self.options))
            .field("secrets", &self.secrets)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .field("fleet_topic", &self.fleet_topic)
            .field("ready_lag", &self.ready_lag)
            .finish()
    }
}

/// Kafka settings (validated config).
#[derive(Clone, PartialEq)]
pub struct KafkaSettings {
    pub brokers: String,
    pub topics: Vec<String>,
    pub group_id: String,
    /// librdkafka client options passed through (SASL, TLS, tuning).
    pub options: BTreeMap<String, String>,
    /// Options whose values come from the environment or a file; moved
    /// into `options` by [`super::preflight`] when the service starts.
    pub secrets: BTreeMap<String, SecretRef>,
    pub dead_letter_topic: Option<String>,
    /// The group's internal fleet topic (`crate::fleet`), if any.
    pub fleet_topic: Option<String>,
    /// Ready once total lag (messages) is at most this.
    pub ready_lag: i64,
}

/// How often to checkpoint, and whether a checkpoint directory exists.
pub struct CheckpointPolicy {
    pub every: Duration,
    /// Next offset per partition of the restored checkpoint.
    pub resume: Offsets,
    /// Partition-aligned state: each partition's unit is restored on
    /// assign and handed over on revoke (docs/scaling.md).
    pub units: Option<super::units::PartitionUnits>,
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
        // sleep, so a long wait caps its throughput and holds samples back
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

/// The dead-letter topic's producer, when one is configured.
pub(super) fn dead_letter_producer(
    s: &KafkaSettings,
) -> anyhow::Result<Option<ThreadedProducer<DefaultProducerContext>>> {
    if s.dead_letter_topic.is_none() {
        return Ok(None);
    }
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.brokers);
    for (k, v) in &s.options {
        c.set(k, v);
    }
    c.create()
        .map(Some)
        .context("creating the dead-letter producer")
}
