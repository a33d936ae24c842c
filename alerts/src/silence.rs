//! Silences: maintenance windows that keep matching alerts from being
//! delivered. Checked by the engine when an alert is about to be notified
//! as firing (and again on every `tick`, so an alert still firing when its
//! silence ends is delivered then). A resolve of an alert that was already
//! delivered is still sent, so no incident is left open downstream.

use serde::{Deserialize, Serialize, Serializer};

use crate::alert::AlertEvent;
use crate::config::ConfigError;
use crate::matcher::{self, Matcher, MatcherSpec};
use crate::time;

/// Why a silence body (REST) was rejected, naming the JSON field
/// (`endsAt`, `matchers[1].value`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid silence: `{field}`: {problem}")]
pub struct SilenceError {
    /// JSON path of the offending field (`.` when the body as a whole is bad).
    pub field: String,
    /// What is wrong with it.
    pub problem: String,
}

impl SilenceError {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// A silence as posted to the REST API, in Alertmanager's shape:
/// `{"matchers": [{"name", "value", "isRegex", "isEqual"}], "startsAt",
/// "endsAt", "createdBy", "comment"}` (`id` optional: set to replace one).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SilenceBody {
    /// Id of the silence to replace (Alertmanager's update); the caller decides.
    #[serde(default)]
    pub id: Option<String>,
    /// All must match.
    pub matchers: Vec<MatcherSpec>,
    /// Start, RFC 3339.
    pub starts_at: String,
    /// End, RFC 3339 (exclusive).
    pub ends_at: String,
    /// Author.
    pub created_by: String,
    /// Reason.
    pub comment: String,
}

impl SilenceBody {
    /// Parses a JSON body; a type error or missing / unknown field names its path.
    pub fn from_json(text: &str) -> Result<Self, SilenceError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let mut path = e.path().to_string();
            let problem = e.into_inner().to_string();
            // A missing field is reported at its parent: name the field.
            if let Some(name) = problem
                .strip_prefix("missing field `")
                .and_then(|r| r.split('`').next())
            {
                path = match path.as_str() {
                    "." => name.to_owned(),
                    parent => format!("{parent}.{name}"),
                };
            }
            SilenceError::new(path, problem)
        })
    }

    /// Checks the values (no IO, no clock) and builds the [`Silence`] `id`.
    pub fn validate(&self, id: String) -> Result<Silence, SilenceError> {
        let ts = |name: &str, v: &str| {
            time::parse_rfc3339(v).map_err(|e| SilenceError::new(name, e.to_string()))
        };
        let (starts_at_ms, ends_at_ms) = (
            ts("startsAt", &self.starts_at)?,
            ts("endsAt", &self.ends_at)?,
        );
        if ends_at_ms <= starts_at_ms {
            return Err(SilenceError::new("endsAt", "must be after startsAt"));
        }
        if self.matchers.is_empty() {
            return Err(SilenceError::new(
                "matchers",
                "a silence needs at least one matcher",
            ));
        }
        let matchers = self
            .matchers
            .iter()
            .enumerate()
            .map(|(i, m)| {
                Matcher::from_spec(m).map_err(|e| {
                    let field = if matcher::valid_name(&m.name) {
                        "value"
                    } else {
                        "name"
                    };
                    SilenceError::new(format!("matchers[{i}].{field}"), e.to_string())
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if matchers.iter().all(|m| m.matches_value("")) {
            // Alertmanager's rule: a silence must not match every alert.
            return Err(SilenceError::new(
                "matchers",
                "at least one matcher must not match the empty string (this would silence everything)",
            ));
        }
        let text = |name: &str, v: &str| {
            if v.trim().is_empty() {
                Err(SilenceError::new(name, "must not be empty"))
            } else {
                Ok(v.to_owned())
            }
        };
        Ok(Silence {
            id,
            matchers,
            starts_at_ms,
            ends_at_ms,
            created_by: text("createdBy", &self.created_by)?,
            comment: text("comment", &self.comment)?,
        })
    }
}

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

/// One silence (Alertmanager's fields). Serializes in Alertmanager's JSON
/// shape (`startsAt` / `endsAt` RFC 3339) for the REST API; the state
/// (`pending` / `active` / `expired`) depends on time: [`Silence::state`].
#[derive(Debug, Clone, PartialEq)]
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

/// Where a silence is in time (Alertmanager's `status.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SilenceState {
    /// Starts later.
    Pending,
    /// In force.
    Active,
    /// Ended.
    Expired,
}

impl Serialize for Silence {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Shown<'a> {
            id: &'a str,
            matchers: &'a [Matcher],
            starts_at: String,
            ends_at: String,
            created_by: &'a str,
            comment: &'a str,
        }
        Shown {
            id: &self.id,
            matchers: &self.matchers,
            starts_at: time::format_rfc3339(self.starts_at_ms),
            ends_at: time::format_rfc3339(self.ends_at_ms),
            created_by: &self.created_by,
            comment: &self.comment,
        }
        .serialize(s)
    }
}

impl Silence {
    /// The same silence apart from its end (which expiring it moves): how
    /// a restored or saved silence is matched to the config's.
    pub fn same_but_end(&self, other: &Silence) -> bool {
        self.id == other.id
            && self.matchers == other.matchers
            && self.starts_at_ms == other.starts_at_ms
            && self.created_by == other.created_by
            && self.comment == other.comment
    }

    /// Parses and validates a REST body (see [`SilenceBody`]) as silence `id`.
    pub fn from_json(text: &str, id: String) -> Result<Self, SilenceError> {
        SilenceBody::from_json(text)?.validate(id)
    }

    /// Pending, active or expired at `now_ms`.
    /// Ended first: a pending silence expired early ends before it starts.
    pub fn state(&self, now_ms: i64) -> SilenceState {
        if now_ms >= self.ends_at_ms {
            SilenceState::Expired
        } else if now_ms < self.starts_at_ms {
            SilenceState::Pending
        } else {
            SilenceState::Active
        }
    }

    /// Whether the silence is in force at `now_ms`.
    pub fn active_at(&self, now_ms: i64) -> bool {
        self.starts_at_ms <= now_ms && now_ms < self.ends_at_ms
    }

    /// Whether the silence mutes `alert` at `now_ms`. `alertname` (what
    /// Alertmanager clients such as `amtool silence add NAME` match on, and
    /// what the Alertmanager receiver sends as the kind) is the alert's
    /// kind unless the alert has a label of that name.
    pub fn mutes(&self, alert: &AlertEvent, now_ms: i64) -> bool {
        self.active_at(now_ms)
            && self.matchers.iter().all(|m| {
                if m.name() == "alertname" && !alert.labels.contains_key("alertname") {
                    m.matches_value(&alert.kind)
                } else {
                    m.matches(alert)
                }
            })
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

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"matchers":[{"name":"host","value":"node-1","isRegex":false,"isEqual":true},
        {"name":"kind","value":"xid_.*","isRegex":true,"isEqual":false}],
        "startsAt":"2026-11-29T17:00:00Z","endsAt":"2026-11-29T19:00:00.5Z",
        "createdBy":"ops","comment":"reseat GPUs"}"#;

    fn field_of(body: &str) -> String {
        Silence::from_json(body, "s1".into())
            .map(|_| ())
            .expect_err("bad body")
            .field
    }

    #[test]
    fn a_json_body_builds_a_silence_and_serializes_back() {
        let s = Silence::from_json(GOOD, "s1".into()).expect("valid");
        assert_eq!(s.matchers[1].to_string(), "kind!~\"xid_.*\"");
        assert_eq!(s.ends_at_ms - s.starts_at_ms, 7_200_500);
        assert_eq!(s.state(s.starts_at_ms - 1), SilenceState::Pending);
        assert_eq!(s.state(s.starts_at_ms), SilenceState::Active);
        assert_eq!(s.state(s.ends_at_ms), SilenceState::Expired);
        let json = serde_json::to_value(&s).expect("serializes");
        assert_eq!(json["id"], "s1");
        assert_eq!(json["endsAt"], "2026-11-29T19:00:00.500Z");
        let mut back: serde_json::Value = serde_json::from_str(GOOD).expect("json");
        back["endsAt"] = json["endsAt"].clone();
        back["id"] = json["id"].clone();
        assert_eq!(json, back, "GET shows what was posted");
        // `isEqual` defaults to true, as in Alertmanager.
        let no_eq = GOOD.replace(r#","isEqual":true"#, "");
        let s2 = Silence::from_json(&no_eq, "s1".into()).expect("valid");
        assert_eq!(s2, s);
    }

    #[test]
    fn alertname_is_the_kind_for_alertmanager_clients() {
        use crate::alert::{Scope, Severity, Status};
        let mut a = AlertEvent {
            ts: 0,
            status: Status::Firing,
            severity: Severity::Critical,
            kind: "thermal".into(),
            scope: Scope::Gpu,
            labels: [("rack".to_owned(), "r1".to_owned())].into(),
            dedup_key: "k".into(),
            summary: String::new(),
            risk: 1.0,
            eta_hours: None,
            reasons: vec![],
        };
        let body = GOOD
            .replace(
                r#""name":"host","value":"node-1""#,
                r#""name":"alertname","value":"thermal""#,
            )
            .replace(
                r#""name":"kind","value":"xid_.*","isRegex":true,"isEqual":false"#,
                r#""name":"rack","value":"r1","isRegex":false,"isEqual":true"#,
            );
        let s = Silence::from_json(&body, "s".into()).expect("valid");
        let t = s.starts_at_ms;
        assert!(s.mutes(&a, t));
        a.kind = "power".into();
        assert!(!s.mutes(&a, t));
        a.labels.insert("alertname".into(), "thermal".into());
        assert!(s.mutes(&a, t), "a label of that name wins");
    }

    #[test]
    fn bad_bodies_name_the_field() {
        for (from, to, field) in [
            (r#""endsAt":"2026-11-29T19:00:00.5Z","#, "", "endsAt"),
            (r#""value":"node-1","#, "", "matchers[0].value"),
            ("2026-11-29T17:00:00Z", "yesterday", "startsAt"),
            ("2026-11-29T19:00:00.5Z", "2026-11-29T16:00:00Z", "endsAt"),
            (
                r#""isRegex":false"#,
                r#""isRegex":"no""#,
                "matchers[0].isRegex",
            ),
            ("xid_.*", "xid_(", "matchers[1].value"),
            (r#""name":"host""#, r#""name":"ho st""#, "matchers[0].name"),
            (r#""createdBy":"ops""#, r#""createdBy":" ""#, "createdBy"),
            (r#""comment""#, r#""typo":1,"comment""#, "typo"),
            ("{", "[", "."),
        ] {
            assert!(GOOD.contains(from), "{from}");
            assert_eq!(
                field_of(&GOOD.replacen(from, to, 1)),
                field,
                "{from} -> {to}"
            );
        }
        let missing = Silence::from_json(
            &GOOD.replace(r#""endsAt":"2026-11-29T19:00:00.5Z","#, ""),
            "s".into(),
        )
        .map(|_| ())
        .expect_err("missing");
        assert!(missing.to_string().contains("endsAt"), "{missing}");
        let empty = r#"{"matchers":[],"startsAt":"2026-11-29T17:00:00Z","endsAt":"2026-11-29T18:00:00Z","createdBy":"a","comment":"b"}"#;
        assert_eq!(field_of(empty), "matchers");
        let everything = GOOD
            .replace("node-1", "")
            .replace(r#""isEqual":false"#, r#""isEqual":true"#)
            .replace("xid_.*", ".*");
        assert_eq!(
            field_of(&everything),
            "matchers",
            "a silence must not match everything"
        );
    }
}
