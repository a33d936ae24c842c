//! `[correlation]` of the engine config (part of [`super`]): the levels'
//! thresholds (GPUs of a host, hosts of a rack, racks of a cluster,
//! clusters of the fleet) and the rules attributing a kind to a workload.

use std::collections::HashMap;

use serde::Deserialize;

use super::error::ConfigError;
use crate::alert::Severity;

/// `[correlation]`: upward correlation thresholds per scope level.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCorrelation {
    /// Members of one host (GPUs) turning bad together raise one host alert.
    #[serde(default = "default_host")]
    pub host: Option<RawLevel>,
    /// Hosts of one rack turning bad together raise one rack alert.
    #[serde(default = "default_rack")]
    pub rack: Option<RawLevel>,
    /// Racks of one cluster turning bad together raise one cluster alert.
    #[serde(default = "default_cluster")]
    pub cluster: Option<RawLevel>,
    /// Clusters of the fleet turning bad together raise one fleet alert. Off by default.
    #[serde(default)]
    pub fleet: Option<RawLevel>,
    /// Kinds never correlated upward (independent per-device faults). Default none.
    #[serde(default)]
    pub exclude_kinds: Vec<String>,
    /// Rules attributing a kind to a workload label (application XIDs to the `job`).
    #[serde(default)]
    pub job: Vec<RawJobRule>,
}

impl Default for RawCorrelation {
    fn default() -> Self {
        Self {
            host: default_host(),
            rack: default_rack(),
            cluster: default_cluster(),
            fleet: None,
            exclude_kinds: Vec::new(),
            job: Vec::new(),
        }
    }
}

// Defaults: half of an 8-GPU host (4) is far beyond chance co-failure of
// independent GPUs; for racks and clusters two bad children that are also
// at least half of the known ones (a rack of 8 hosts needs 4), holding at
// least four member alerts between them (`min_alerts`' default), is the
// smallest pattern that points at shared power / cooling / network.
fn default_host() -> Option<RawLevel> {
    Some(RawLevel {
        min_count: 4,
        min_fraction: 0.5,
        min_alerts: None,
    })
}
fn default_rack() -> Option<RawLevel> {
    Some(RawLevel {
        min_count: 2,
        min_fraction: 0.5,
        min_alerts: None,
    })
}
fn default_cluster() -> Option<RawLevel> {
    Some(RawLevel {
        min_count: 2,
        min_fraction: 0.5,
        min_alerts: None,
    })
}

/// Thresholds of one level: all must hold.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawLevel {
    /// Minimum number of bad direct children (GPUs of a host, hosts of a rack, ...).
    pub min_count: u32,
    /// Minimum fraction of the known direct children that are bad, in (0, 1].
    pub min_fraction: f64,
    /// Minimum member alerts of the kind under the group's bad children
    /// together. Default: `min_count` for hosts (a GPU holds one alert of a
    /// kind), twice `min_count` above: a host with one alerting GPU is what
    /// one GPU's own fault looks like, so two such hosts are two GPU faults,
    /// not a rack incident (on fifteen full random-precursor seeds 7 of
    /// the 10 rack warnings formed that way, each hiding its GPUs' names).
    #[serde(default)]
    pub min_alerts: Option<u32>,
}

/// `[[correlation.job]]`: when at least `min_count` members sharing one
/// value of `label` show `kinds` together, the cause is the workload, not
/// the hardware: the member alerts get `severity` (info: recorded, not paged).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJobRule {
    /// Kinds this applies to (e.g. `["app_xid"]`).
    pub kinds: Vec<String>,
    /// Workload label. Default `job`.
    #[serde(default = "default_job_label")]
    pub label: String,
    /// Members of one workload needed. Default 2 (one GPU alone is not a pattern).
    #[serde(default = "default_job_min")]
    pub min_count: u32,
    /// Severity given to attributed alerts. Default `info`.
    #[serde(default = "default_job_severity")]
    pub severity: Severity,
}

fn default_job_label() -> String {
    "job".to_owned()
}
fn default_job_min() -> u32 {
    2
}
fn default_job_severity() -> Severity {
    Severity::Info
}

/// A validated correlation level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    /// Minimum bad children.
    pub min_count: u32,
    /// Minimum bad fraction of known children.
    pub min_fraction: f64,
    /// Minimum member alerts under the bad children together.
    pub min_alerts: u32,
}

/// A validated job rule.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRule {
    /// Workload label.
    pub label: String,
    /// Members needed.
    pub min_count: u32,
    /// Severity given to attributed alerts.
    pub severity: Severity,
}

/// `host`: the host level, whose children (GPUs) hold one alert of a kind
/// each (`min_alerts`' default).
fn level(key: &str, raw: Option<RawLevel>, host: bool) -> Result<Option<Level>, ConfigError> {
    let Some(l) = raw else { return Ok(None) };
    let min_alerts = l.min_alerts.unwrap_or(if host {
        l.min_count
    } else {
        l.min_count.saturating_mul(2)
    });
    if min_alerts == 0 {
        return Err(ConfigError::new(
            format!("{key}.min_alerts"),
            "must be >= 1",
        ));
    }
    if l.min_count == 0 {
        return Err(ConfigError::new(format!("{key}.min_count"), "must be >= 1"));
    }
    if !(l.min_fraction > 0.0 && l.min_fraction <= 1.0) {
        return Err(ConfigError::new(
            format!("{key}.min_fraction"),
            "must be in (0, 1]",
        ));
    }
    Ok(Some(Level {
        min_count: l.min_count,
        min_fraction: l.min_fraction,
        min_alerts,
    }))
}

/// Validated levels per scope level (index = `Scope::level()`; gpu is
/// always `None`) and job rules per kind.
pub(super) type Validated = ([Option<Level>; 5], HashMap<String, JobRule>);

impl RawCorrelation {
    /// The validated levels (index = `Scope::level()`; gpu is always
    /// `None`) and job rules per kind.
    pub(super) fn validate(&self) -> Result<Validated, ConfigError> {
        let levels = [
            None,
            level("correlation.host", self.host, true)?,
            level("correlation.rack", self.rack, false)?,
            level("correlation.cluster", self.cluster, false)?,
            level("correlation.fleet", self.fleet, false)?,
        ];
        let mut job_rules = HashMap::new();
        for (i, j) in self.job.iter().enumerate() {
            let key = format!("correlation.job[{i}]");
            if j.min_count == 0 {
                return Err(ConfigError::new(format!("{key}.min_count"), "must be >= 1"));
            }
            if j.kinds.is_empty() {
                return Err(ConfigError::new(
                    format!("{key}.kinds"),
                    "must name at least one kind",
                ));
            }
            let rule = JobRule {
                label: j.label.clone(),
                min_count: j.min_count,
                severity: j.severity,
            };
            for k in &j.kinds {
                if job_rules.insert(k.clone(), rule.clone()).is_some() {
                    return Err(ConfigError::new(
                        format!("{key}.kinds"),
                        format!("kind {k:?} has two job rules"),
                    ));
                }
            }
        }
        Ok((levels, job_rules))
    }
}
