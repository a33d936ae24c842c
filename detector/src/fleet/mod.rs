//! The fleet topic: one alert stage and one view for every instance of a
//! consumer group (issue #31, docs/scaling.md).
//!
//! With `source.fleet_topic` set, an instance's alert thread no longer
//! judges its own partitions' assessments: it publishes each round of them
//! ([`Record::Round`]) to the fleet topic, a single-partition internal
//! topic. Two readers consume it in every instance:
//!
//! - the **fleet alert stage** ([`owner`]): a consumer group of its own
//!   (`<group>.alert-stage`), so exactly one instance at a time owns the
//!   topic's partition and runs correlation, inhibition, silences,
//!   lifecycle and the outbox over the whole fleet; its state is
//!   checkpointed to the checkpoint store like a telemetry partition's and
//!   restored by whichever instance owns the partition next;
//! - the **view** ([`view`]): every instance reads every record and keeps
//!   the fleet-wide risk table, alerts and silences that REST serves, so
//!   any instance answers for any GPU.
//!
//! Silences created or expired on any instance travel as
//! [`Record::Silence`] commands to the owner, which publishes the resulting
//! list ([`Record::Snapshot`]); the owner also publishes the alert events it
//! made ([`Record::Events`]), which the views show, and, once its outbox has
//! handed them to every receiver, their keys ([`Record::Delivered`]), which a
//! new owner uses to skip what its predecessor already sent.
//!
//! Records are CBOR; [`encode`] / [`decode`] name the problem on bad bytes.

use std::sync::Arc;

use alerts::{AlertEvent, Silence};
use features::GpuId;
use features::expected::rack::RackReading;
use models::assess::Assessment;
use serde::{Deserialize, Serialize};

pub mod owner;
pub mod publish;
pub mod stage;
pub mod view;

#[cfg(test)]
mod publish_tests;
#[cfg(test)]
mod tests;

/// The fleet topic's one partition.
pub const PARTITION: i32 = 0;

/// The consumer group of the fleet alert stage, from the telemetry group.
pub fn stage_group(group: &str) -> String {
    format!("{group}.alert-stage")
}

/// One record of the fleet topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    /// A piece of one instance's round of assessments.
    Round(Round),
    /// A silence to add or expire, from the instance whose REST took it.
    Silence(SilenceCommand),
    /// Alert state changes the stage's owner made (what views show).
    Events(Vec<AlertEvent>),
    /// Alert state changes whose notifications every receiver has accepted
    /// (the owner's outbox held nothing more when this was written), as
    /// (dedup key, status, event time): a new owner does not send these
    /// again; any other it holds from its catch-up it sends (at least once).
    Delivered(Vec<(String, alerts::Status, i64)>),
    /// The owner's silences and active alerts (after a silence change and
    /// at every stage checkpoint): a view that starts late catches up.
    Snapshot {
        silences: Vec<WireSilence>,
        active: Vec<AlertEvent>,
    },
}

/// What one instance's alert thread took from its shards in one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// The instance ([`crate::checkpoint::partitions::instance_id`]).
    pub instance: String,
    /// Telemetry partitions the instance holds (`topic-partition`).
    pub partitions: Vec<String>,
    /// Event time every partition of the instance that is behind has
    /// reached; `None`: none is behind.
    pub horizon_ms: Option<i64>,
    pub assessments: Vec<WireAssessment>,
    pub racks: Vec<RackReading>,
    /// GPUs the instance stopped tracking (admission's limit).
    pub evicted: Vec<GpuId>,
}

/// An assessment with its topology (which `Assessment` does not serialize).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireAssessment {
    pub a: Assessment,
    pub host: Option<Arc<str>>,
    pub rack: Option<Arc<str>>,
    pub cluster: Option<Arc<str>>,
    pub model: Option<Arc<str>>,
    pub job: Option<Arc<str>>,
}

impl From<&Assessment> for WireAssessment {
    fn from(a: &Assessment) -> Self {
        let t = &a.topo;
        WireAssessment {
            host: t.host.clone(),
            rack: t.rack.clone(),
            cluster: t.cluster.clone(),
            model: t.model.clone(),
            job: t.job.clone(),
            a: a.clone(),
        }
    }
}

impl WireAssessment {
    /// The assessment with its topology back in place.
    pub fn into_assessment(self) -> Assessment {
        let mut a = self.a;
        a.topo.host = self.host;
        a.topo.rack = self.rack;
        a.topo.cluster = self.cluster;
        a.topo.model = self.model;
        a.topo.job = self.job;
        a
    }
}

/// A silence change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SilenceCommand {
    Add(WireSilence),
    Expire { id: String, at_ms: i64 },
}

/// A silence on the wire: the silences file's record.
pub use crate::silence_file::SilenceRecord as WireSilence;

/// The silences of `list` that compile (a bad one is logged and skipped).
pub fn silences_of(list: &[WireSilence]) -> Vec<Silence> {
    list.iter()
        .filter_map(|w| match w.to_silence() {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(error = format!("{e:#}"), "fleet topic: silence skipped");
                None
            }
        })
        .collect()
}

/// Fleet topic failures.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error("fleet topic record: {0}")]
    Decode(String),
    #[error("fleet topic record not encoded: {0}")]
    Encode(String),
    #[error("fleet topic {topic:?}: {problem}")]
    Topic { topic: String, problem: String },
    #[error("fleet topic: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
}

/// A record's bytes.
pub fn encode(r: &Record) -> Result<Vec<u8>, FleetError> {
    let mut out = Vec::new();
    ciborium::into_writer(r, &mut out).map_err(|e| FleetError::Encode(e.to_string()))?;
    Ok(out)
}

/// The record in `bytes` (at `offset`, named in the error).
pub fn decode(bytes: &[u8], offset: i64) -> Result<Record, FleetError> {
    ciborium::from_reader(bytes)
        .map_err(|e| FleetError::Decode(format!("offset {offset}: not a fleet record ({e})")))
}
