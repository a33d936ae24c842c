//! Engine config: lifecycle rules, correlation, silences and inhibition, in
//! two layers (STYLE.md §5). [`RawEngineConfig`] is what the TOML says
//! (`deny_unknown_fields`, every default explained); [`EngineConfig`] is what
//! [`RawEngineConfig::validate`] makes of it, with typed durations and the
//! bad key named in every [`ConfigError`]. Routing and receivers live in
//! `route::config` and `sinks::config`; [`crate::RawConfig`] bundles all.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Deserialize;

pub use crate::inhibit::{InhibitRule, RawInhibitRule};
use crate::matcher;
pub use crate::silence::RawSilence;
use crate::silence::Silence;
use crate::time::{self, parse_duration};

mod correlation;
mod error;

pub use correlation::{JobRule, Level, RawCorrelation, RawJobRule, RawLevel};
pub use error::ConfigError;

/// Parses a duration field, naming the key on error.
pub(crate) fn duration(key: &str, text: &str) -> Result<Duration, ConfigError> {
    parse_duration(text).map_err(|e| ConfigError::new(key, e.to_string()))
}

/// `[lifecycle.default]`: defaults for every kind; `[lifecycle.kinds.<kind>]` overrides.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawLifecycle {
    /// Defaults for kinds without their own table.
    #[serde(default)]
    pub default: RawRule,
    /// Per-kind overrides; unset fields inherit the defaults above.
    #[serde(default)]
    pub kinds: BTreeMap<String, RawRule>,
    /// Labels naming the physical slot of a `gpu` source (e.g. `["host",
    /// "gpu_index"]`): a new GPU reporting from an occupied slot resolves the
    /// old GPU's alerts (it was replaced). Default empty: no detection.
    #[serde(default)]
    pub slot_labels: Vec<String>,
}

/// One lifecycle rule. Every field is optional; see the `DEFAULT_*` notes.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// Value (risk) at or above which the condition holds. Default 0.8.
    pub fire_at: Option<f64>,
    /// Value below which the condition clears (hysteresis); must be <= `fire_at`. Default 0.6.
    pub resolve_below: Option<f64>,
    /// How long the condition must hold before the alert fires. Default "5m".
    #[serde(rename = "for")]
    pub for_: Option<String>,
    /// How long the condition must stay clear before a firing alert resolves. Default "5m".
    pub resolve_after: Option<String>,
    /// No observation for this long resolves the alert (the source is gone). Default "30m".
    pub stale_after: Option<String>,
    /// Window in which repeated firings count as flapping. Default "1h".
    pub flap_window: Option<String>,
    /// Firings within `flap_window` that make the alert flapping. Default 3.
    pub flap_max_fires: Option<u32>,
    /// Clear time needed to resolve while flapping (replaces `resolve_after`). Default "30m".
    pub flap_resolve_after: Option<String>,
}

/// Defaults: a risk of 0.8 is the calibrated "act now" level of the models;
/// 0.6 leaves a band wide enough that score noise (±0.05) does not flap; 5
/// minutes is ten 30-s telemetry intervals; 30 minutes without data is far
/// beyond any scrape gap; three firings an hour is Alertmanager users'
/// common "flapping" complaint threshold.
const DEFAULT_FIRE_AT: f64 = 0.8;
const DEFAULT_RESOLVE_BELOW: f64 = 0.6;
const DEFAULT_FOR: &str = "5m";
const DEFAULT_RESOLVE_AFTER: &str = "5m";
const DEFAULT_STALE_AFTER: &str = "30m";
const DEFAULT_FLAP_WINDOW: &str = "1h";
const DEFAULT_FLAP_MAX_FIRES: u32 = 3;
const DEFAULT_FLAP_RESOLVE_AFTER: &str = "30m";

/// A validated lifecycle rule, in milliseconds of event time.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Condition holds at or above this value.
    pub fire_at: f64,
    /// Condition clears below this value.
    pub resolve_below: f64,
    /// Pending time before firing.
    pub for_ms: i64,
    /// Clear time before resolving.
    pub resolve_after_ms: i64,
    /// Silence from the source after which the alert resolves.
    pub stale_after_ms: i64,
    /// Flap counting window.
    pub flap_window_ms: i64,
    /// Firings in the window that mean flapping.
    pub flap_max_fires: u32,
    /// Clear time before resolving while flapping.
    pub flap_resolve_after_ms: i64,
}

impl RawRule {
    fn validate(&self, key: &str, base: Option<&Rule>) -> Result<Rule, ConfigError> {
        let dur = |name: &str, v: &Option<String>, default: &str, inherited: Option<i64>| match (
            v, inherited,
        ) {
            (Some(t), _) => duration(&format!("{key}{name}"), t).map(time::duration_ms),
            (None, Some(ms)) => Ok(ms),
            (None, None) => duration(&format!("{key}{name}"), default).map(time::duration_ms),
        };
        let rule = Rule {
            fire_at: self
                .fire_at
                .or(base.map(|b| b.fire_at))
                .unwrap_or(DEFAULT_FIRE_AT),
            resolve_below: self
                .resolve_below
                .or(base.map(|b| b.resolve_below))
                .unwrap_or(DEFAULT_RESOLVE_BELOW),
            for_ms: dur("for", &self.for_, DEFAULT_FOR, base.map(|b| b.for_ms))?,
            resolve_after_ms: dur(
                "resolve_after",
                &self.resolve_after,
                DEFAULT_RESOLVE_AFTER,
                base.map(|b| b.resolve_after_ms),
            )?,
            stale_after_ms: dur(
                "stale_after",
                &self.stale_after,
                DEFAULT_STALE_AFTER,
                base.map(|b| b.stale_after_ms),
            )?,
            flap_window_ms: dur(
                "flap_window",
                &self.flap_window,
                DEFAULT_FLAP_WINDOW,
                base.map(|b| b.flap_window_ms),
            )?,
            flap_max_fires: self
                .flap_max_fires
                .or(base.map(|b| b.flap_max_fires))
                .unwrap_or(DEFAULT_FLAP_MAX_FIRES),
            flap_resolve_after_ms: dur(
                "flap_resolve_after",
                &self.flap_resolve_after,
                DEFAULT_FLAP_RESOLVE_AFTER,
                base.map(|b| b.flap_resolve_after_ms),
            )?,
        };
        if !rule.fire_at.is_finite() {
            return Err(ConfigError::new(
                format!("{key}fire_at"),
                "must be a finite number",
            ));
        }
        if !(rule.resolve_below.is_finite() && rule.resolve_below <= rule.fire_at) {
            return Err(ConfigError::new(
                format!("{key}resolve_below"),
                "must be finite and <= fire_at",
            ));
        }
        if rule.stale_after_ms == 0 {
            return Err(ConfigError::new(format!("{key}stale_after"), "must be > 0"));
        }
        if rule.flap_max_fires == 0 {
            return Err(ConfigError::new(
                format!("{key}flap_max_fires"),
                "must be >= 1",
            ));
        }
        Ok(rule)
    }
}

/// The engine's sections of the config file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawEngineConfig {
    /// Lifecycle rules.
    #[serde(default)]
    pub lifecycle: RawLifecycle,
    /// Upward correlation.
    #[serde(default)]
    pub correlation: RawCorrelation,
    /// Silences known at startup (more can be added at run time).
    #[serde(default)]
    pub silences: Vec<RawSilence>,
    /// Inhibition rules.
    #[serde(default)]
    pub inhibit_rules: Vec<RawInhibitRule>,
}

/// The validated engine config.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Rule of kinds without their own.
    pub default_rule: Rule,
    /// Per-kind rules.
    pub rules: HashMap<String, Rule>,
    /// Correlation level per scope level (index = `Scope::level()`; gpu is always `None`).
    pub levels: [Option<Level>; 5],
    /// Kinds never correlated upward.
    pub exclude_kinds: Vec<String>,
    /// Job attribution rules per kind.
    pub job_rules: HashMap<String, JobRule>,
    /// Startup silences.
    pub silences: Vec<Silence>,
    /// Inhibition rules.
    pub inhibit_rules: Vec<InhibitRule>,
    /// Slot labels for replacement detection.
    pub slot_labels: Vec<String>,
}

impl EngineConfig {
    /// The rule of `kind`: its own, else the default.
    pub fn rule_for(&self, kind: &str) -> &Rule {
        self.rules.get(kind).unwrap_or(&self.default_rule)
    }
}

impl RawEngineConfig {
    /// Checks every field (no IO) and builds the typed config.
    pub fn validate(&self) -> Result<EngineConfig, ConfigError> {
        let default_rule = self
            .lifecycle
            .default
            .validate("lifecycle.default.", None)?;
        let mut rules = HashMap::new();
        for (kind, raw) in &self.lifecycle.kinds {
            rules.insert(
                kind.clone(),
                raw.validate(&format!("lifecycle.kinds.{kind}."), Some(&default_rule))?,
            );
        }
        let c = &self.correlation;
        let (levels, job_rules) = c.validate()?;
        let silences = self
            .silences
            .iter()
            .enumerate()
            .map(|(i, s)| s.validate(&format!("silences[{i}]"), format!("config-{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        let inhibit_rules = self
            .inhibit_rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let key = format!("inhibit_rules[{i}]");
                Ok(InhibitRule {
                    source: matcher::parse_all(
                        &format!("{key}.source_matchers"),
                        &r.source_matchers,
                    )?,
                    target: matcher::parse_all(
                        &format!("{key}.target_matchers"),
                        &r.target_matchers,
                    )?,
                    equal: r.equal.clone(),
                })
            })
            .collect::<Result<Vec<_>, ConfigError>>()?;
        Ok(EngineConfig {
            default_rule,
            rules,
            levels,
            exclude_kinds: c.exclude_kinds.clone(),
            job_rules,
            silences,
            inhibit_rules,
            slot_labels: self.lifecycle.slot_labels.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_rules_inherit_and_errors_name_the_key() {
        let raw: RawEngineConfig = toml::from_str(
            "[lifecycle.default]\nfire_at = 0.9\n[lifecycle.kinds.xid]\nfor = \"0s\"\n",
        )
        .expect("parses");
        let cfg = raw.validate().expect("valid");
        let xid = &cfg.rules["xid"];
        assert_eq!((xid.fire_at, xid.for_ms), (0.9, 0));
        assert_eq!(cfg.default_rule.for_ms, 300_000);

        let bad: RawEngineConfig =
            toml::from_str("[lifecycle.kinds.xid]\nfor = \"5 fortnights\"\n").expect("parses");
        assert_eq!(
            bad.validate().map(|_| ()).map_err(|e| e.key),
            Err("lifecycle.kinds.xid.for".to_owned())
        );
        let bad: RawEngineConfig =
            toml::from_str("[correlation.rack]\nmin_count = 2\nmin_fraction = 1.5\n")
                .expect("parses");
        assert_eq!(
            bad.validate().map(|_| ()).map_err(|e| e.key),
            Err("correlation.rack.min_fraction".to_owned())
        );
        assert!(
            toml::from_str::<RawEngineConfig>("[lifecycle.default]\nfire_att = 1.0\n").is_err()
        );
    }
}
