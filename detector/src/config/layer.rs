//! The `[alerts]` table layered over the built-in alert policy
//! ([`DEFAULT_ALERTS`]): a file that only adds a route keeps the built-in
//! lifecycle rules, correlation exclusions and file receiver. Rules:
//!
//! - tables merge key by key, at every depth (`lifecycle.kinds.xid`,
//!   `correlation.host`, `route`, `outbox`);
//! - `receivers` merge by `name`: a receiver named like a built-in one
//!   replaces it whole, others are added;
//! - every other array (`exclude_kinds`, `routes`, `silences`,
//!   `inhibit_rules`, `group_by`, …) and every value replaces the built-in one;
//! - `base = "none"` starts from nothing: the table is the whole policy.
//!
//! `forewarn config check` prints the result.

use toml::{Table, Value};

use super::error::{ConfigError, err};

/// The alert policy under every `[alerts]` table (unless `base = "none"`).
pub const DEFAULT_ALERTS: &str = include_str!("default_alerts.toml");

/// The built-in policy as a table.
fn builtin() -> Result<Table, ConfigError> {
    toml::from_str(DEFAULT_ALERTS).map_err(|e| err("alerts (built-in policy)", e.message()))
}

/// The layered policy as TOML: the built-in one with `user` over it.
pub fn layered(user: Option<&Table>) -> Result<Table, ConfigError> {
    let from_nothing = user
        .and_then(|t| t.get("base"))
        .and_then(Value::as_str)
        .is_some_and(|b| b == "none");
    let mut merged = if from_nothing {
        Table::new()
    } else {
        builtin()?
    };
    if let Some(user) = user {
        for (key, value) in user {
            if key == "base" {
                continue;
            }
            if key == "receivers" {
                merge_receivers(&mut merged, value.clone());
            } else {
                merge_into(&mut merged, key, value.clone());
            }
        }
    }
    Ok(merged)
}

/// The layered policy, typed.
pub fn effective(user: Option<&Table>) -> Result<alerts::RawConfig, ConfigError> {
    Value::Table(layered(user)?)
        .try_into()
        .map_err(|e: toml::de::Error| err("alerts", e.message().trim_end()))
}

fn merge_into(base: &mut Table, key: &str, value: Value) {
    match (base.get_mut(key), value) {
        (Some(Value::Table(b)), Value::Table(over)) => {
            for (k, v) in over {
                merge_into(b, &k, v);
            }
        }
        (_, value) => {
            base.insert(key.to_owned(), value);
        }
    }
}

fn merge_receivers(base: &mut Table, value: Value) {
    let Value::Array(over) = value else {
        // Not an array: let the typed parse name the error.
        base.insert("receivers".into(), value);
        return;
    };
    let name = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_owned);
    let list = match base.get_mut("receivers") {
        Some(Value::Array(list)) => list,
        _ => {
            base.insert("receivers".into(), Value::Array(over));
            return;
        }
    };
    for receiver in over {
        let same =
            name(&receiver).and_then(|n| list.iter().position(|r| name(r) == Some(n.clone())));
        match same {
            Some(i) => list[i] = receiver,
            None => list.push(receiver),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        toml::from_str(text).expect("toml")
    }

    #[test]
    fn a_route_alone_keeps_the_builtin_policy() {
        let user = table(
            r#"
[[receivers]]
type = "webhook"
name = "hook"
url = "http://127.0.0.1:9/x"

[[route.routes]]
matchers = ['severity="critical"']
receiver = "hook"
"#,
        );
        let merged = effective(Some(&user)).expect("layered");
        let builtin = effective(None).expect("builtin");
        assert_eq!(
            merged.correlation.exclude_kinds, builtin.correlation.exclude_kinds,
            "exclude_kinds kept"
        );
        assert!(merged.lifecycle.kinds.contains_key("hbm_ecc_trend"));
        let names: Vec<&str> = merged.receivers.iter().map(|r| r.name()).collect();
        assert_eq!(names, ["file", "hook"]);
        assert_eq!(merged.route.receiver.as_deref(), Some("file"));
        assert_eq!(merged.route.routes.len(), 1);
        assert_eq!(merged.route.group_interval.as_deref(), Some("1m"));
    }

    #[test]
    fn keys_override_and_receivers_replace_by_name() {
        let user = table(
            r#"
[lifecycle.kinds.anomaly]
for = "30m"

[[receivers]]
type = "file"
name = "file"
path = "elsewhere.jsonl"
"#,
        );
        let merged = layered(Some(&user)).expect("layered");
        let anomaly = &merged["lifecycle"]["kinds"]["anomaly"];
        assert_eq!(anomaly["for"].as_str(), Some("30m"));
        assert_eq!(
            anomaly["fire_at"].as_float(),
            Some(0.45),
            "sibling keys kept"
        );
        let receivers = merged["receivers"].as_array().expect("array");
        assert_eq!(receivers.len(), 1);
        assert_eq!(receivers[0]["path"].as_str(), Some("elsewhere.jsonl"));
    }

    #[test]
    fn base_none_starts_from_nothing() {
        let user = table(
            r#"
base = "none"
[route]
receiver = "f"
[[receivers]]
type = "file"
name = "f"
path = "a.jsonl"
"#,
        );
        let merged = effective(Some(&user)).expect("layered");
        assert!(merged.lifecycle.kinds.is_empty());
        assert!(merged.correlation.exclude_kinds.is_empty());
        assert_eq!(merged.receivers.len(), 1);
    }
}
