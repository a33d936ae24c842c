//! Event time and durations for all of forewarn, on `jiff`: RFC 3339 (the
//! telemetry and alert contracts), nvidia-smi's `2026/07/14 08:12:38.696`
//! (taken as UTC), civil dates for partition names, and the one duration
//! grammar every config section and CLI flag accepts ([`parse_duration`]).
//!
//! The engine never reads the wall clock: every timestamp is event time in
//! epoch milliseconds (`i64`), handed in by the caller. Parsing is on the
//! decode hot path and must never panic; jiff does the calendar, this module
//! only pins which spellings the contracts accept and the exact output bytes.

mod duration;
mod error;

pub use duration::{
    LegacyUnit, duration_ms, format_duration, legacy_number, parse_duration,
    parse_duration_or_legacy, serde,
};
pub use error::TimeError;

use jiff::Timestamp;
use jiff::civil::{Date, DateTime, Time};
use jiff::fmt::temporal::{Pieces, PiecesOffset};
use jiff::tz::Offset;

/// Days in the Gregorian calendar's 400-year cycle: the calendar repeats
/// exactly after it, which lets any `i64` time be shifted into jiff's range
/// (years -9999..=9999) and its year shifted back.
const DAYS_PER_CYCLE: i64 = 146_097;
const MS_PER_DAY: i64 = 86_400_000;
const MS_PER_CYCLE: i64 = DAYS_PER_CYCLE * MS_PER_DAY;

/// The longest text handed to jiff (a nanosecond fraction and an offset fit).
const MAX_TIMESTAMP_LEN: usize = 40;

/// Parses RFC 3339 (`2026-11-29T17:00:00.000Z`, `…+02:00`, `t` or a space
/// for `T`, or no zone = UTC) and nvidia-smi's `2026/11/29 17:00:00.000`.
/// Returns epoch milliseconds (fraction truncated), or `None` when the text
/// is not such a time.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    parse(s.trim(), false)
}

/// Parses a strict RFC 3339 timestamp (an offset or `Z` is required; any
/// fraction digits, truncated to milliseconds) into epoch milliseconds.
pub fn parse_rfc3339(text: &str) -> Result<i64, TimeError> {
    parse(text, true).ok_or_else(|| TimeError::Timestamp(text.to_owned()))
}

/// The one parser behind [`parse_timestamp`] and [`parse_rfc3339`]. jiff
/// reads the broader Temporal ISO 8601 grammar; the shape check keeps the
/// contracts' subset (full date, `T`/`t`/space, seconds present), so that
/// e.g. `2026-11-29T17:00` stays a bad timestamp as it always was.
fn parse(s: &str, need_offset: bool) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b.len() > MAX_TIMESTAMP_LEN {
        return None;
    }
    let sep = b[4];
    let slashed = sep == b'/' && !need_offset;
    if !(sep == b'-' || slashed) || b[7] != sep || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let mut buf = [0u8; MAX_TIMESTAMP_LEN];
    let text = &mut buf[..b.len()];
    text.copy_from_slice(b);
    if slashed {
        (text[4], text[7]) = (b'-', b'-');
    }
    let pieces = Pieces::parse(&*text).ok()?;
    if pieces.time_zone_annotation().is_some() {
        return None;
    }
    let offset = match pieces.offset() {
        None if need_offset => return None,
        None | Some(PiecesOffset::Zulu) => Offset::UTC,
        Some(PiecesOffset::Numeric(n)) => n.offset(),
        Some(_) => return None,
    };
    let dt = pieces.date().to_datetime(pieces.time()?);
    let ts = offset.to_timestamp(dt).ok()?;
    i64::try_from(ts.as_nanosecond().div_euclid(1_000_000)).ok()
}

/// The UTC civil date and time of epoch milliseconds, for any `i64`: the
/// year is an `i64` because `i64` milliseconds reach far past year 9999.
fn civil_utc(ts_ms: i64) -> (i64, DateTime) {
    let cycles = ts_ms.div_euclid(MS_PER_CYCLE);
    // Within one cycle of the epoch (years 1970..2370): always in range.
    let in_cycle = ts_ms.rem_euclid(MS_PER_CYCLE);
    let dt = Timestamp::from_millisecond(in_cycle)
        .map(|t| Offset::UTC.to_datetime(t))
        .unwrap_or_default();
    (i64::from(dt.year()) + 400 * cycles, dt)
}

/// The civil date of a day count since 1970-01-01 (inverse of
/// [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let cycles = days.div_euclid(DAYS_PER_CYCLE);
    let (y, dt) = civil_utc(days.rem_euclid(DAYS_PER_CYCLE) * MS_PER_DAY);
    (y + 400 * cycles, dt.month() as u32, dt.day() as u32)
}

/// Days since 1970-01-01 of a proleptic Gregorian date; `None` when the
/// date does not exist (February 30th, month 13).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> Option<i64> {
    let cycles = (y - 1970).div_euclid(400);
    let year = i16::try_from(y - 400 * cycles).ok()?;
    let date = Date::new(year, i8::try_from(m).ok()?, i8::try_from(d).ok()?).ok()?;
    let secs = Offset::UTC
        .to_timestamp(date.to_datetime(Time::midnight()))
        .ok()?
        .as_second();
    Some(secs.div_euclid(86_400) + cycles * DAYS_PER_CYCLE)
}

/// Formats epoch milliseconds as RFC 3339 UTC with milliseconds
/// (`2026-11-29T17:00:00.250Z`).
pub fn format_rfc3339_ms(ts_ms: i64) -> String {
    write_rfc3339(ts_ms, 23)
}

/// Formats epoch milliseconds as RFC 3339 UTC to the second (alert contract).
pub fn format_rfc3339_s(ts_ms: i64) -> String {
    write_rfc3339(ts_ms, 19)
}

/// Formats epoch milliseconds as RFC 3339 UTC; milliseconds are printed only
/// when non-zero (`2026-11-29T17:03:00Z`, `2026-11-29T17:03:00.250Z`): the
/// alert events' and silences' form.
pub fn format_rfc3339(ts_ms: i64) -> String {
    let width = if ts_ms.rem_euclid(1000) == 0 { 19 } else { 23 };
    write_rfc3339(ts_ms, width)
}

/// `YYYY-MM-DDTHH:MM:SS[.mmm]Z`, cut to `width` characters before the `Z`.
/// Written digit by digit (REST formats 50 of these per lookup, alert events
/// several); years outside 0–9999 go through `format!`, which decides their
/// width.
fn write_rfc3339(ts_ms: i64, width: usize) -> String {
    let (y, dt) = civil_utc(ts_ms);
    let ms = ts_ms.rem_euclid(1000) as u32;
    let fields = [
        dt.month() as u32,
        dt.day() as u32,
        dt.hour() as u32,
        dt.minute() as u32,
        dt.second() as u32,
    ];
    let Some(y) = u32::try_from(y).ok().filter(|y| *y <= 9999) else {
        let [mo, d, h, mi, s] = fields;
        let full = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}");
        let cut = full.len() - (23 - width);
        return format!("{}Z", &full[..cut]);
    };
    let mut b = *b"0000-00-00T00:00:00.000Z";
    let [mo, d, h, mi, s] = fields;
    for (range, v) in [
        (0..4, y),
        (5..7, mo),
        (8..10, d),
        (11..13, h),
        (14..16, mi),
        (17..19, s),
        (20..23, ms),
    ] {
        let mut v = v;
        for c in b[range].iter_mut().rev() {
            *c = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }
    b[width] = b'Z';
    b[..=width].iter().map(|&c| char::from(c)).collect()
}

#[cfg(test)]
mod tests;
