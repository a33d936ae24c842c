//! Label matchers shared by routes, silences and inhibition rules, in
//! Alertmanager's syntax: `name="v"`, `name!="v"`, `name=~"re"`, `name!~"re"`.
//! Regexes are anchored at both ends, as in Alertmanager. Names resolve
//! through [`AlertEvent::field`], so `kind`, `severity` and `scope` match too.
//! A missing label matches as the empty string (Alertmanager semantics).

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::alert::AlertEvent;

/// Why a matcher string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MatcherError {
    /// Not of the form `name<op>"value"`.
    #[error(
        "invalid matcher {0:?} (expected name=\"value\", name!=\"value\", name=~\"re\" or name!~\"re\")"
    )]
    Syntax(String),
    /// The regex does not compile.
    #[error("invalid regex in matcher {matcher:?}: {reason}")]
    Regex {
        /// The matcher text.
        matcher: String,
        /// The regex crate's explanation.
        reason: String,
    },
}

#[derive(Debug, Clone)]
enum Op {
    Eq,
    Ne,
    Re(Regex),
    NotRe(Regex),
}

/// One compiled matcher. Keeps the value as written (a regex without the
/// anchors added here) so it can be shown, serialized and rebuilt.
#[derive(Debug, Clone)]
pub struct Matcher {
    name: String,
    value: String,
    op: Op,
}

/// A matcher in Alertmanager's JSON shape (`{name, value, isRegex, isEqual}`,
/// as in its silences API); `isEqual` defaults to true as there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatcherSpec {
    /// Label (or pseudo-label: `kind`, `severity`, `scope`) name.
    pub name: String,
    /// Value, or regex when `is_regex`.
    pub value: String,
    /// `value` is a regex (anchored at both ends).
    pub is_regex: bool,
    /// Matches when equal (true) or when not equal (false).
    #[serde(default = "default_is_equal")]
    pub is_equal: bool,
}

fn default_is_equal() -> bool {
    true
}

fn anchored(text: &str, v: &str) -> Result<Regex, MatcherError> {
    Regex::new(&format!("^(?:{v})$")).map_err(|e| MatcherError::Regex {
        matcher: text.to_owned(),
        reason: e.to_string(),
    })
}

pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

impl Matcher {
    /// Parses `name="value"` (quotes optional for plain values).
    pub fn parse(text: &str) -> Result<Self, MatcherError> {
        let syntax = || MatcherError::Syntax(text.to_owned());
        let t = text.trim();
        let name_len = t
            .bytes()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == b'_')
            .count();
        if name_len == 0 {
            return Err(syntax());
        }
        let (name, rest) = t.split_at(name_len);
        let (op, raw) = ["=~", "!~", "!=", "="]
            .iter()
            .find_map(|op| rest.trim_start().strip_prefix(op).map(|r| (*op, r.trim())))
            .ok_or_else(syntax)?;
        let value = match raw.strip_prefix('"') {
            Some(inner) => unescape(inner.strip_suffix('"').ok_or_else(syntax)?),
            None if !raw.contains('"') => raw.to_owned(),
            None => return Err(syntax()),
        };
        let op = match op {
            "=" => Op::Eq,
            "!=" => Op::Ne,
            "=~" => Op::Re(anchored(text, &value)?),
            _ => Op::NotRe(anchored(text, &value)?),
        };
        Ok(Self {
            name: name.to_owned(),
            value,
            op,
        })
    }

    /// Builds a matcher from its JSON shape (regexes compiled here).
    pub fn from_spec(spec: &MatcherSpec) -> Result<Self, MatcherError> {
        if !valid_name(&spec.name) {
            return Err(MatcherError::Syntax(spec.name.clone()));
        }
        let op = match (spec.is_regex, spec.is_equal) {
            (false, true) => Op::Eq,
            (false, false) => Op::Ne,
            (true, true) => Op::Re(anchored(&spec.value, &spec.value)?),
            (true, false) => Op::NotRe(anchored(&spec.value, &spec.value)?),
        };
        Ok(Self {
            name: spec.name.clone(),
            value: spec.value.clone(),
            op,
        })
    }

    /// The JSON shape of this matcher.
    pub fn spec(&self) -> MatcherSpec {
        MatcherSpec {
            name: self.name.clone(),
            value: self.value.clone(),
            is_regex: matches!(self.op, Op::Re(_) | Op::NotRe(_)),
            is_equal: matches!(self.op, Op::Eq | Op::Re(_)),
        }
    }

    /// An equality matcher (for code that builds silences directly).
    pub fn equal(name: &str, value: &str) -> Self {
        Self {
            name: name.to_owned(),
            value: value.to_owned(),
            op: Op::Eq,
        }
    }

    /// The label (or pseudo-label) name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the alert satisfies this matcher.
    pub fn matches(&self, alert: &AlertEvent) -> bool {
        self.matches_value(alert.field(&self.name).unwrap_or(""))
    }

    /// Whether a field value satisfies this matcher.
    pub fn matches_value(&self, v: &str) -> bool {
        match &self.op {
            Op::Eq => v == self.value,
            Op::Ne => v != self.value,
            Op::Re(r) => r.is_match(v),
            Op::NotRe(r) => !r.is_match(v),
        }
    }
}

fn unescape(inner: &str) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('\\', Some(n @ ('"' | '\\'))) => {
                out.push(n);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// Alertmanager syntax, quoted and escaped: parsing it gives the same matcher.
impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Re(_) => "=~",
            Op::NotRe(_) => "!~",
        };
        let escaped = self.value.replace('\\', "\\\\").replace('"', "\\\"");
        write!(f, "{}{op}\"{escaped}\"", self.name)
    }
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.value == other.value
            && std::mem::discriminant(&self.op) == std::mem::discriminant(&other.op)
    }
}

impl Serialize for Matcher {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.spec().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Matcher {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let spec = MatcherSpec::deserialize(d)?;
        Matcher::from_spec(&spec).map_err(serde::de::Error::custom)
    }
}

/// Parses a list of matchers, naming the config key and index on error.
pub fn parse_all(key: &str, texts: &[String]) -> Result<Vec<Matcher>, crate::config::ConfigError> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            Matcher::parse(t)
                .map_err(|e| crate::config::ConfigError::new(format!("{key}[{i}]"), e.to_string()))
        })
        .collect()
}

/// Whether every matcher matches (an empty list matches everything).
pub fn all_match(matchers: &[Matcher], alert: &AlertEvent) -> bool {
    matchers.iter().all(|m| m.matches(alert))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::{Scope, Severity, Status};

    fn alert() -> AlertEvent {
        AlertEvent {
            ts: 0,
            status: Status::Firing,
            severity: Severity::Critical,
            kind: "thermal".into(),
            scope: Scope::Gpu,
            labels: [("host".to_owned(), "node-1".to_owned())].into(),
            dedup_key: "k".into(),
            summary: String::new(),
            risk: 1.0,
            eta_hours: None,
            reasons: vec![],
        }
    }

    #[test]
    fn matchers_follow_alertmanager_syntax() {
        let a = alert();
        for (m, want) in [
            ("host=\"node-1\"", true),
            ("host!=\"node-1\"", false),
            ("host=~\"node-.*\"", true),
            ("host=~\"node\"", false),
            ("host!~\"x.*\"", true),
            ("severity=critical", true),
            ("kind=~\"thermal|power\"", true),
            ("job=\"\"", true),
        ] {
            assert_eq!(Matcher::parse(m).map(|x| x.matches(&a)), Ok(want), "{m}");
        }
        for bad in ["=x", "host", "host=\"x", "host=~\"(\""] {
            assert!(Matcher::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn display_and_json_shape_round_trip() {
        for text in [
            r#"host="node-1""#,
            r#"job!="a \"quoted\" \\ name""#,
            r#"host=~"node\d+|gpu-.*""#,
            r#"kind!~"xid_(48|79)""#,
        ] {
            let m = Matcher::parse(text).expect("valid");
            let again = Matcher::parse(&m.to_string()).expect("display parses");
            assert_eq!(again, m, "{text} -> {m}");
            assert_eq!(Matcher::from_spec(&m.spec()).expect("spec builds"), m);
        }
        let re = Matcher::parse(r#"host=~"node\d+""#).expect("valid");
        assert_eq!(
            re.spec(),
            MatcherSpec {
                name: "host".into(),
                value: r"node\d+".into(),
                is_regex: true,
                is_equal: true
            }
        );
        assert!(re.matches_value("node12") && !re.matches_value("xnode12"));
    }
}
