//! Label matchers shared by routes, silences and inhibition rules, in
//! Alertmanager's syntax: `name="v"`, `name!="v"`, `name=~"re"`, `name!~"re"`.
//! Regexes are anchored at both ends, as in Alertmanager. Names resolve
//! through [`AlertEvent::field`], so `kind`, `severity` and `scope` match too.
//! A missing label matches as the empty string (Alertmanager semantics).

use regex::Regex;

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
    Eq(String),
    Ne(String),
    Re(Regex),
    NotRe(Regex),
}

/// One compiled matcher.
#[derive(Debug, Clone)]
pub struct Matcher {
    name: String,
    op: Op,
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
            Some(inner) => inner
                .strip_suffix('"')
                .ok_or_else(syntax)?
                .replace("\\\"", "\"")
                .replace("\\\\", "\\"),
            None if !raw.contains('"') => raw.to_owned(),
            None => return Err(syntax()),
        };
        let regex = |v: &str| {
            Regex::new(&format!("^(?:{v})$")).map_err(|e| MatcherError::Regex {
                matcher: text.to_owned(),
                reason: e.to_string(),
            })
        };
        let op = match op {
            "=" => Op::Eq(value),
            "!=" => Op::Ne(value),
            "=~" => Op::Re(regex(&value)?),
            _ => Op::NotRe(regex(&value)?),
        };
        Ok(Self {
            name: name.to_owned(),
            op,
        })
    }

    /// An equality matcher (for code that builds silences directly).
    pub fn equal(name: &str, value: &str) -> Self {
        Self {
            name: name.to_owned(),
            op: Op::Eq(value.to_owned()),
        }
    }

    /// Whether the alert satisfies this matcher.
    pub fn matches(&self, alert: &AlertEvent) -> bool {
        self.matches_value(alert.field(&self.name).unwrap_or(""))
    }

    /// Whether a field value satisfies this matcher.
    pub fn matches_value(&self, v: &str) -> bool {
        match &self.op {
            Op::Eq(x) => v == x,
            Op::Ne(x) => v != x,
            Op::Re(r) => r.is_match(v),
            Op::NotRe(r) => !r.is_match(v),
        }
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
}
