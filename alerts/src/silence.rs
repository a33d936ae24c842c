//! Silences: maintenance windows that keep matching alerts from being
//! delivered. Checked by the engine when an alert is about to be notified
//! as firing (and again on every `tick`, so an alert still firing when its
//! silence ends is delivered then). A resolve of an alert that was already
//! delivered is still sent, so no incident is left open downstream.

use serde::Deserialize;

use crate::alert::AlertEvent;
use crate::config::ConfigError;
use crate::matcher::{self, Matcher};
use crate::time;

/// `[[silences]]`: a maintenance window.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSilence {
    /// Matchers an alert must satisfy to be silenced.
    pub matchers: Vec<String>,
    /// Start, RFC 3339.
    pub starts_at: String,
    /// End, RFC 3339 (exclusive).
    pub ends_at: String,
    /// Who created it.
    pub created_by: String,
    /// Why (ticket, maintenance description).
    pub comment: String,
}

impl RawSilence {
    /// Validates into a [`Silence`] with the given id.
    pub fn validate(&self, key: &str, id: String) -> Result<Silence, ConfigError> {
        let ts = |name: &str, v: &str| {
            time::parse_rfc3339(v)
                .map_err(|e| ConfigError::new(format!("{key}.{name}"), e.to_string()))
        };
        let (starts_at_ms, ends_at_ms) = (
            ts("starts_at", &self.starts_at)?,
            ts("ends_at", &self.ends_at)?,
        );
        if ends_at_ms <= starts_at_ms {
            return Err(ConfigError::new(
                format!("{key}.ends_at"),
                "must be after starts_at",
            ));
        }
        if self.matchers.is_empty() {
            return Err(ConfigError::new(
                format!("{key}.matchers"),
                "a silence needs at least one matcher",
            ));
        }
        Ok(Silence {
            id,
            matchers: matcher::parse_all(&format!("{key}.matchers"), &self.matchers)?,
            starts_at_ms,
            ends_at_ms,
            created_by: self.created_by.clone(),
            comment: self.comment.clone(),
        })
    }
}

/// One silence (Alertmanager's fields).
#[derive(Debug, Clone)]
pub struct Silence {
    /// Identifier (`config-<n>` for silences from the config file).
    pub id: String,
    /// All must match.
    pub matchers: Vec<Matcher>,
    /// Start, epoch ms of event time (inclusive).
    pub starts_at_ms: i64,
    /// End, epoch ms of event time (exclusive).
    pub ends_at_ms: i64,
    /// Author.
    pub created_by: String,
    /// Reason.
    pub comment: String,
}

impl Silence {
    /// Whether the silence is in force at `now_ms`.
    pub fn active_at(&self, now_ms: i64) -> bool {
        self.starts_at_ms <= now_ms && now_ms < self.ends_at_ms
    }

    /// Whether the silence mutes `alert` at `now_ms`.
    pub fn mutes(&self, alert: &AlertEvent, now_ms: i64) -> bool {
        self.active_at(now_ms) && matcher::all_match(&self.matchers, alert)
    }
}

/// The set of known silences.
#[derive(Debug, Clone, Default)]
pub struct Silences {
    list: Vec<Silence>,
}

impl Silences {
    /// Starts with `list`.
    pub fn new(list: Vec<Silence>) -> Self {
        Self { list }
    }

    /// Adds or replaces (same id) a silence.
    pub fn upsert(&mut self, s: Silence) {
        match self.list.iter_mut().find(|x| x.id == s.id) {
            Some(slot) => *slot = s,
            None => self.list.push(s),
        }
    }

    /// Ends a silence now (it stays listed, like an expired Alertmanager silence).
    pub fn expire(&mut self, id: &str, now_ms: i64) -> bool {
        match self.list.iter_mut().find(|x| x.id == id) {
            Some(s) => {
                s.ends_at_ms = s.ends_at_ms.min(now_ms);
                true
            }
            None => false,
        }
    }

    /// Drops silences that ended before `before_ms`.
    pub fn gc(&mut self, before_ms: i64) {
        self.list.retain(|s| s.ends_at_ms >= before_ms);
    }

    /// The id of the first silence muting `alert` at `now_ms`.
    pub fn muted_by(&self, alert: &AlertEvent, now_ms: i64) -> Option<&str> {
        self.list
            .iter()
            .find(|s| s.mutes(alert, now_ms))
            .map(|s| s.id.as_str())
    }

    /// All silences.
    pub fn list(&self) -> &[Silence] {
        &self.list
    }
}
