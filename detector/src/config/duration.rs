//! Durations in `forewarn.toml`. Every duration key takes one spelling, a
//! string such as `"30s"`, `"5m"` or `"1h30m"` (the grammar of the alert
//! policy's durations). Files written before that spelling used numbers
//! under other names (`*_s` seconds, `*_ms` milliseconds); those keys still
//! work, each with a deprecation warning that names the new key and the
//! value spelled the new way. This module is the only place that parses a
//! duration string ([`parse`]) and the only place that knows both spellings
//! ([`either`]).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::error::{ConfigError, err};

/// A duration written as a string (`"30s"`, `"5m"`, `"1h30m"`), checked
/// when the file is read so that a bad one is reported at its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct ConfigDuration(pub Duration);

impl TryFrom<String> for ConfigDuration {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        parse(&text).map(ConfigDuration)
    }
}

/// Parses a duration string. The one call into a duration grammar in the
/// config, so that swapping the parser is a one-line change.
pub fn parse(text: &str) -> Result<Duration, String> {
    alerts::time::parse_duration(text).map_err(|e| e.to_string())
}

/// A duration in whole milliseconds in the largest unit that divides it
/// (`"90m"`, `"500ms"`), as the new spelling of a deprecated value; none
/// when it has a fraction of a millisecond (the grammar cannot say it).
pub fn spell(d: Duration) -> Option<String> {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return None;
    }
    let ms = d.as_millis();
    const UNITS: [(u128, &str); 5] = [
        (604_800_000, "w"),
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    for (size, unit) in UNITS {
        if ms != 0 && ms.is_multiple_of(size) {
            return Some(format!("{}{unit}", ms / size));
        }
    }
    Some(if ms == 0 {
        "0s".into()
    } else {
        format!("{ms}ms")
    })
}

/// The value of a duration key, from whichever spelling the file used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spelled<T> {
    /// Neither: the caller's default applies.
    Unset,
    /// The string spelling (`interval = "30s"`).
    New(Duration),
    /// The deprecated number (`interval_s = 30`), as written.
    Old(T),
}

/// Picks between the two spellings of one duration key (full key paths).
/// Both set is an error; the old one alone logs a deprecation warning
/// whose suggested spelling is `as_duration` of the value (none when the
/// value has no exact new spelling, e.g. a negative number, which the
/// caller's checks then reject as before).
pub fn either<T: Copy + fmt::Display>(
    new_key: &str,
    new: Option<ConfigDuration>,
    old_key: &str,
    old: Option<T>,
    as_duration: impl FnOnce(T) -> Option<Duration>,
) -> Result<Spelled<T>, ConfigError> {
    match (new, old) {
        (Some(_), Some(_)) => Err(err(
            old_key,
            format!("set either `{new_key}` or the deprecated `{old_key}`, not both"),
        )),
        (Some(d), None) => Ok(Spelled::New(d.0)),
        (None, Some(v)) => {
            let suggestion = as_duration(v)
                .and_then(spell)
                .map_or_else(|| "a duration such as \"30s\"".into(), |s| format!("{s:?}"));
            tracing::warn!(
                "config: `{old_key} = {v}` is deprecated; write `{new_key} = {suggestion}` instead"
            );
            Ok(Spelled::Old(v))
        }
        (None, None) => Ok(Spelled::Unset),
    }
}

/// A number of seconds as written in a deprecated `*_s` key, when it is
/// one (finite and not negative).
pub fn from_secs(v: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(v).ok()
}

/// A number of milliseconds as written in a deprecated `*_ms` key, when
/// it is one (not negative).
pub fn from_millis(v: i64) -> Option<Duration> {
    u64::try_from(v).ok().map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_alert_grammar() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5_400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse("30").is_err(), "a unit is required");
        assert!(parse("soon").is_err());
    }

    #[test]
    fn spells_in_the_largest_exact_unit() {
        assert_eq!(spell(Duration::from_secs(30)).as_deref(), Some("30s"));
        assert_eq!(spell(Duration::from_secs(5_400)).as_deref(), Some("90m"));
        assert_eq!(spell(Duration::from_millis(500)).as_deref(), Some("500ms"));
        assert_eq!(
            spell(Duration::from_secs(7 * 86_400)).as_deref(),
            Some("1w")
        );
        assert_eq!(spell(Duration::ZERO).as_deref(), Some("0s"));
        assert_eq!(spell(Duration::from_micros(1_500)), None);
        for d in [30_000, 5_400_000, 500, 0, 90_061_000] {
            let d = Duration::from_millis(d);
            let s = spell(d).expect("exact");
            assert_eq!(parse(&s), Ok(d), "{s} reads back");
        }
    }

    #[test]
    fn picks_one_spelling() {
        let d = ConfigDuration(Duration::from_secs(5));
        assert_eq!(
            either("a.every", Some(d), "a.every_s", None::<f64>, from_secs).ok(),
            Some(Spelled::New(Duration::from_secs(5)))
        );
        assert_eq!(
            either("a.every", None, "a.every_s", Some(0.5), from_secs).ok(),
            Some(Spelled::Old(0.5))
        );
        assert_eq!(
            either("a.every", None, "a.every_s", None::<f64>, from_secs).ok(),
            Some(Spelled::Unset)
        );
        let e = either("a.every", Some(d), "a.every_s", Some(5.0), from_secs)
            .expect_err("both spellings");
        assert_eq!(e.key, "a.every_s");
        assert_eq!(from_secs(-1.0), None);
        assert_eq!(from_millis(-1), None);
        assert_eq!(from_millis(1_500), Some(Duration::from_millis(1_500)));
    }
}
