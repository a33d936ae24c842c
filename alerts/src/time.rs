//! Event-time helpers: epoch milliseconds <-> RFC 3339, and the small
//! humantime-ish duration parser used by every config section.
//!
//! The engine never reads the wall clock: every timestamp is event time in
//! epoch milliseconds (`i64`), handed in by the caller. These helpers exist so
//! the crate needs no date library: the civil-date conversion is Howard
//! Hinnant's `days_from_civil` / `civil_from_days` algorithm.

use std::time::Duration;

/// Milliseconds in one second, minute, hour and day (used by the parsers).
const MS_PER_SEC: i64 = 1_000;
const MS_PER_DAY: i64 = 86_400_000;

/// Why a timestamp or duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// The text is not `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
    #[error("invalid RFC 3339 timestamp {0:?}")]
    Timestamp(String),
    /// The text is not a sequence of `<number><unit>` with units ms, s, m, h, d, w.
    #[error("invalid duration {0:?} (expected e.g. \"30s\", \"5m\", \"4h\", \"1h30m\")")]
    Duration(String),
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

/// Formats epoch milliseconds as RFC 3339 UTC; milliseconds are printed only
/// when non-zero (`2026-11-29T17:03:00Z`, `2026-11-29T17:03:00.250Z`).
pub fn format_rfc3339(ms: i64) -> String {
    let days = ms.div_euclid(MS_PER_DAY);
    let rem = ms.rem_euclid(MS_PER_DAY);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, frac) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / MS_PER_SEC % 60,
        rem % MS_PER_SEC,
    );
    if frac == 0 {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    } else {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{frac:03}Z")
    }
}

/// Parses an RFC 3339 timestamp (any offset, any fraction digits; the
/// fraction is truncated to milliseconds) into epoch milliseconds.
pub fn parse_rfc3339(text: &str) -> Result<i64, TimeError> {
    let err = || TimeError::Timestamp(text.to_owned());
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return Err(err());
    }
    if b[13] != b':' || b[16] != b':' {
        return Err(err());
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, TimeError> {
        let s = text.get(r).ok_or_else(err)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(err());
        }
        s.parse::<i64>().map_err(|_| err())
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(err());
    }
    let mut i = 19;
    let mut frac_ms = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(err());
        }
        let digits = &text[start..i.min(start + 3)];
        frac_ms = digits.parse::<i64>().map_err(|_| err())? * 10_i64.pow(3 - digits.len() as u32);
    }
    let offset_ms = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            let off = (oh * 60 + om) * 60_000;
            if *sign == b'+' { off } else { -off }
        }
        _ => return Err(err()),
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s.min(59);
    Ok(secs * MS_PER_SEC + frac_ms - offset_ms)
}

/// Parses a duration such as `"250ms"`, `"30s"`, `"5m"`, `"4h"`, `"2d"`,
/// `"1w"` or a concatenation (`"1h30m"`). `"0"` and `"0s"` are zero.
pub fn parse_duration(text: &str) -> Result<Duration, TimeError> {
    let err = || TimeError::Duration(text.to_owned());
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total: u64 = 0;
    let mut rest = t;
    if rest.is_empty() {
        return Err(err());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(err());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| err())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit_ms: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            _ => return Err(err()),
        };
        rest = &rest[unit_len..];
        total = n
            .checked_mul(unit_ms)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(err)?;
    }
    Ok(Duration::from_millis(total))
}

/// A duration as signed milliseconds, saturating (config durations are far
/// below `i64::MAX` ms, about 292 million years).
pub fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips() {
        for ms in [
            0,
            1_764_435_780_000,
            1_764_435_780_250,
            -86_400_000,
            951_782_400_000,
        ] {
            assert_eq!(parse_rfc3339(&format_rfc3339(ms)), Ok(ms), "{ms}");
        }
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            parse_rfc3339("2026-11-29T17:03:00Z").map(format_rfc3339),
            Ok("2026-11-29T17:03:00Z".to_owned())
        );
        assert_eq!(
            parse_rfc3339("2026-11-29T18:03:00.5+01:00"),
            parse_rfc3339("2026-11-29T17:03:00.500Z")
        );
        assert!(parse_rfc3339("2026-11-29").is_err());
        assert!(parse_rfc3339("2026-13-29T17:03:00Z").is_err());
        assert!(parse_rfc3339("2026-11-29T17:03:00").is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        for bad in ["", "5", "m", "5x", "-5m", "5 m"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
