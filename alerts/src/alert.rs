//! The alert contract (`shared/contracts/alerts.md`): one [`AlertEvent`] is
//! one state change of one alert. Every sink is a mapping of this type and the
//! `file` / `webhook` sinks write it verbatim, so its JSON shape is exact:
//! `ts` is RFC 3339 on the wire and epoch milliseconds in memory, `eta_hours`
//! is omitted when unknown, and there are no other fields.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::time;

/// Alert labels: identity (`gpu`, `host`, ...) and context (`job`, `model`).
/// Sorted, so grouping keys and JSON output are deterministic.
pub type Labels = BTreeMap<String, String>;

/// Whether the alert is active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The cause is present.
    Firing,
    /// The cause is gone (or its source was retired / replaced).
    Resolved,
}

/// How urgently a human must act.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Recorded only.
    Info,
    /// Goes to a channel.
    Warning,
    /// Pages a human now.
    Critical,
}

/// The breadth of what the alert is about, narrowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One GPU (label `gpu`).
    Gpu,
    /// One host (label `host`).
    Host,
    /// One rack (label `rack`).
    Rack,
    /// One cluster (label `cluster`).
    Cluster,
    /// The whole fleet (no label; its identity value is `fleet`).
    Fleet,
}

impl Scope {
    /// Every scope, narrowest first (index = [`Scope::level`]).
    pub const ALL: [Scope; 5] = [
        Scope::Gpu,
        Scope::Host,
        Scope::Rack,
        Scope::Cluster,
        Scope::Fleet,
    ];

    /// Position in [`Scope::ALL`].
    pub fn level(self) -> usize {
        self as usize
    }

    /// The label that names a member of this scope (`None` for the fleet).
    pub fn label(self) -> Option<&'static str> {
        match self {
            Scope::Gpu => Some("gpu"),
            Scope::Host => Some("host"),
            Scope::Rack => Some("rack"),
            Scope::Cluster => Some("cluster"),
            Scope::Fleet => None,
        }
    }

    /// The value identifying this scope's member in `labels` (`fleet` for the fleet).
    pub fn value_in(self, labels: &Labels) -> Option<&str> {
        match self.label() {
            Some(l) => labels.get(l).map(String::as_str),
            None => Some("fleet"),
        }
    }

    /// Lowercase name as in the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Gpu => "gpu",
            Scope::Host => "host",
            Scope::Rack => "rack",
            Scope::Cluster => "cluster",
            Scope::Fleet => "fleet",
        }
    }
}

impl Severity {
    /// Lowercase name as in the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

impl Status {
    /// Lowercase name as in the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Firing => "firing",
            Status::Resolved => "resolved",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of evidence, strongest first in [`AlertEvent::reasons`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// Which signal (a metric name, a peer comparison, `member`, ...).
    pub signal: String,
    /// What it showed, for a human.
    pub detail: String,
}

/// One state change of one alert: the contract shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertEvent {
    /// Event time of the change, epoch ms (RFC 3339 in JSON).
    #[serde(serialize_with = "ser_ts", deserialize_with = "de_ts")]
    pub ts: i64,
    /// `firing` or `resolved`.
    pub status: Status,
    /// `critical`, `warning` or `info`.
    pub severity: Severity,
    /// Stable machine name of the cause.
    pub kind: String,
    /// Breadth of the alert.
    pub scope: Scope,
    /// The scope's label, every wider one known, and context.
    pub labels: Labels,
    /// `forewarn/<scope>/<scope value>/<kind>`, stable for the incident.
    pub dedup_key: String,
    /// One human sentence.
    pub summary: String,
    /// Risk in `[0, 1]` (the observed value that drove the alert).
    pub risk: f64,
    /// Hours until a forecast limit is reached, when a trend says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_hours: Option<f64>,
    /// The evidence, strongest first.
    pub reasons: Vec<Reason>,
}

impl AlertEvent {
    /// The value of a label, or of a pseudo-label `kind`, `severity`,
    /// `scope`, `status`, `dedup_key` when no real label has that name.
    /// Matchers (routes, silences, inhibition) look names up through this.
    pub fn field(&self, name: &str) -> Option<&str> {
        if let Some(v) = self.labels.get(name) {
            return Some(v);
        }
        match name {
            "kind" => Some(&self.kind),
            "severity" => Some(self.severity.as_str()),
            "scope" => Some(self.scope.as_str()),
            "status" => Some(self.status.as_str()),
            "dedup_key" => Some(&self.dedup_key),
            _ => None,
        }
    }
}

/// The contract's `dedup_key`: `forewarn/<scope>/<scope label value>/<kind>`.
pub fn dedup_key(scope: Scope, value: &str, kind: &str) -> String {
    format!("forewarn/{}/{value}/{kind}", scope.as_str())
}

fn ser_ts<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&time::format_rfc3339(*ms))
}

fn de_ts<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let text = String::deserialize(d)?;
    time::parse_rfc3339(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_example_round_trips_exactly() {
        let json = r#"{"ts":"2026-11-29T17:03:00Z","status":"firing","severity":"critical","kind":"hbm_ecc_trend","scope":"gpu","labels":{"cluster":"east-1","gpu":"GPU-3b1c","host":"node-0042","rack":"r07"},"dedup_key":"forewarn/gpu/GPU-3b1c/hbm_ecc_trend","summary":"s","risk":0.93,"eta_hours":9.0,"reasons":[{"signal":"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL","detail":"rate 40/h"}]}"#;
        let ev: AlertEvent = serde_json::from_str(json).expect("contract example parses");
        assert_eq!(
            ev.dedup_key,
            dedup_key(Scope::Gpu, "GPU-3b1c", "hbm_ecc_trend")
        );
        assert_eq!(serde_json::to_string(&ev).expect("serializes"), json);
        let mut no_eta = ev.clone();
        no_eta.eta_hours = None;
        let text = serde_json::to_string(&no_eta).expect("serializes");
        assert!(!text.contains("eta_hours"));
        assert!(
            serde_json::from_str::<AlertEvent>(&json.replace("\"risk\"", "\"extra\":1,\"risk\""))
                .is_err()
        );
    }
}
