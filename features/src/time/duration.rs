//! The one duration grammar of forewarn, for every config section and CLI
//! flag: jiff's "friendly" format — `250ms`, `90s`, `5m`, `1h30m`, `1h 30m`,
//! `24h`, `1.5h`, `7d`, `1w`, `2 hours` — plus a bare `0`. Days are 24 hours
//! and weeks 7 days (event time has no time zone); months and years are
//! refused, having no fixed length.
//!
//! The spellings that existed before the grammar was unified keep working
//! for now, with a deprecation warning naming the replacement: a bare number
//! in the unit its key or flag used to imply (`interval_s = 30` seconds,
//! `*_ms` milliseconds, `train --horizon 24` hours). See [`LegacyUnit`].

use std::fmt;
use std::time::Duration;

use jiff::fmt::friendly::{Designator, Spacing, SpanParser, SpanPrinter};
use jiff::{SignedDuration, SpanRelativeTo};

use super::error::TimeError;

static PARSER: SpanParser = SpanParser::new();

/// The unit a bare number meant in an old spelling of a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyUnit {
    /// `*_ms` integer keys.
    Millis,
    /// `*_s` keys (`interval_s`, `watch_interval_s`).
    Secs,
    /// `train --horizon 24`.
    Hours,
}

impl LegacyUnit {
    fn nanos(self) -> f64 {
        match self {
            LegacyUnit::Millis => 1e6,
            LegacyUnit::Secs => 1e9,
            LegacyUnit::Hours => 3.6e12,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            LegacyUnit::Millis => "milliseconds",
            LegacyUnit::Secs => "seconds",
            LegacyUnit::Hours => "hours",
        }
    }
}

/// Parses a duration in the grammar of the module docs. Errors name the
/// text and show examples; a bare number other than `0` is an error here
/// (see [`parse_duration_or_legacy`]).
pub fn parse_duration(text: &str) -> Result<Duration, TimeError> {
    let err = || TimeError::Duration(text.to_owned());
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let span = PARSER.parse_span(t).map_err(|_| err())?;
    let signed = span
        .to_duration(SpanRelativeTo::days_are_24_hours())
        .map_err(|_| err())?;
    Duration::try_from(signed).map_err(|_| err())
}

/// [`parse_duration`], or else a bare number read in the `legacy` unit with
/// a deprecation warning (`--horizon 24` is 24 hours). `what` names the key
/// or flag in the warning.
pub fn parse_duration_or_legacy(
    text: &str,
    legacy: LegacyUnit,
    what: &str,
) -> Result<Duration, TimeError> {
    parse_duration(text).or_else(|e| match text.trim().parse::<f64>() {
        Ok(v) => legacy_number(v, legacy, what).map_err(|_| e),
        Err(_) => Err(e),
    })
}

/// A bare number in the `legacy` unit (a TOML `interval_s = 0.5`), with a
/// deprecation warning that names `what` and the spelling to write instead.
/// Negative, NaN and unrepresentably large numbers are errors.
pub fn legacy_number(value: f64, legacy: LegacyUnit, what: &str) -> Result<Duration, TimeError> {
    let nanos = (value * legacy.nanos()).round();
    if !(0.0..=u64::MAX as f64).contains(&nanos) {
        return Err(TimeError::Duration(value.to_string()));
    }
    let d = Duration::from_nanos(nanos as u64);
    tracing::warn!(
        key = what,
        value,
        "deprecated duration spelling: a bare number of {}; write {:?}",
        legacy.suffix(),
        format_duration(d)
    );
    Ok(d)
}

/// A duration in the grammar's compact form (`1h30m`, `250ms`, `0s`), so a
/// printed value parses back to itself.
pub fn format_duration(d: Duration) -> String {
    static PRINTER: SpanPrinter = SpanPrinter::new()
        .designator(Designator::Compact)
        .spacing(Spacing::None);
    match SignedDuration::try_from(d) {
        Ok(sd) => PRINTER.duration_to_string(&sd),
        Err(_) => format!("{}s", d.as_secs()),
    }
}

/// A duration as signed milliseconds, saturating (config durations are far
/// below `i64::MAX` ms, about 292 million years).
pub fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// serde `deserialize_with` helpers for config fields: a string in the
/// grammar, or (the `*_or_*` forms, deprecated) a bare number in the unit
/// the old key implied. The `opt_*` forms are for `Option<Duration>` fields
/// with `#[serde(default)]`.
pub mod serde {
    use super::*;
    use ::serde::Deserializer;
    use ::serde::de::{self, Visitor};

    /// A string in the grammar; numbers are refused.
    pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor(None))
    }
    /// A string in the grammar, or a number of seconds (deprecated).
    pub fn duration_or_secs<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor(Some(LegacyUnit::Secs)))
    }
    /// A string in the grammar, or a number of milliseconds (deprecated).
    pub fn duration_or_millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor(Some(LegacyUnit::Millis)))
    }
    /// A string in the grammar, or a number of hours (deprecated).
    pub fn duration_or_hours<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_any(DurationVisitor(Some(LegacyUnit::Hours)))
    }
    /// [`duration`] for an `Option<Duration>` field.
    pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        duration(d).map(Some)
    }
    /// [`duration_or_secs`] for an `Option<Duration>` field.
    pub fn opt_duration_or_secs<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        duration_or_secs(d).map(Some)
    }
    /// [`duration_or_millis`] for an `Option<Duration>` field.
    pub fn opt_duration_or_millis<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        duration_or_millis(d).map(Some)
    }
    /// [`duration_or_hours`] for an `Option<Duration>` field.
    pub fn opt_duration_or_hours<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        duration_or_hours(d).map(Some)
    }

    /// Reads a string, or a number when a legacy unit is given.
    struct DurationVisitor(Option<LegacyUnit>);

    impl DurationVisitor {
        fn number<E: de::Error>(&self, v: f64) -> Result<Duration, E> {
            match self.0 {
                Some(unit) => legacy_number(v, unit, "config").map_err(E::custom),
                None => Err(E::custom(format!(
                    "a duration needs a unit: write e.g. \"{v}s\" or \"{v}m\""
                ))),
            }
        }
    }

    impl Visitor<'_> for DurationVisitor {
        type Value = Duration;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a duration such as \"90s\", \"5m\", \"1h30m\" or \"7d\"")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
            match self.0 {
                Some(unit) => parse_duration_or_legacy(v, unit, "config"),
                None => parse_duration(v),
            }
            .map_err(E::custom)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
            self.number(v as f64)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
            self.number(v as f64)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
            self.number(v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar() {
        let s = Duration::from_secs;
        for (text, want) in [
            ("90s", s(90)),
            ("5m", s(300)),
            ("1h30m", s(5400)),
            ("1h 30m", s(5400)),
            ("24h", s(86_400)),
            ("1.5h", s(5400)),
            ("7d", s(7 * 86_400)),
            ("1w", s(7 * 86_400)),
            ("2 hours", s(7200)),
            ("250ms", Duration::from_millis(250)),
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
            assert_eq!(parse_duration(&format_duration(want)), Ok(want), "{text}");
        }
        for bad in ["", "5", "m", "5x", "-5m", "1mo", "1y", "24"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(format_duration(s(5400)), "1h30m");
    }

    #[test]
    fn old_spellings_still_parse() {
        let h = parse_duration_or_legacy("24", LegacyUnit::Hours, "--horizon");
        assert_eq!(h, Ok(Duration::from_secs(86_400)));
        let h = parse_duration_or_legacy("1h30m", LegacyUnit::Hours, "--horizon");
        assert_eq!(h, Ok(Duration::from_secs(5400)));
        assert!(parse_duration_or_legacy("-1", LegacyUnit::Hours, "--horizon").is_err());
        assert!(parse_duration_or_legacy("x", LegacyUnit::Hours, "--horizon").is_err());
        let ms = legacy_number(0.5, LegacyUnit::Secs, "interval_s");
        assert_eq!(ms, Ok(Duration::from_millis(500)));
    }

    #[test]
    fn serde_helpers_take_strings_and_legacy_numbers() {
        #[derive(::serde::Deserialize)]
        struct C {
            #[serde(deserialize_with = "serde::duration_or_secs")]
            a: Duration,
            #[serde(default, deserialize_with = "serde::opt_duration_or_millis")]
            b: Option<Duration>,
            #[serde(default, deserialize_with = "serde::opt_duration")]
            c: Option<Duration>,
        }
        let c: C = serde_json::from_str(r#"{"a": 0.5, "b": 250}"#).expect("legacy numbers");
        assert_eq!(c.a, Duration::from_millis(500));
        assert_eq!(c.b, Some(Duration::from_millis(250)));
        assert_eq!(c.c, None);
        let c: C = serde_json::from_str(r#"{"a": "1m", "c": "2h"}"#).expect("strings");
        assert_eq!(c.a, Duration::from_secs(60));
        assert_eq!(c.c, Some(Duration::from_secs(7200)));
        assert!(serde_json::from_str::<C>(r#"{"a": "1m", "c": 5}"#).is_err());
    }
}
