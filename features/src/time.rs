//! Event-time parsing and formatting: RFC 3339 (the contract), epoch
//! milliseconds, and nvidia-smi's `2026/07/14 08:12:38.696` (taken as UTC).
//! Hand-written because it is on the decode hot path and must never panic.

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil` algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count since 1970-01-01 (inverse of
/// [`days_from_civil`]).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn digits(b: &[u8], at: usize, n: usize) -> Option<u32> {
    let s = b.get(at..at + n)?;
    let mut v = 0u32;
    for c in s {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u32::from(c - b'0');
    }
    Some(v)
}

/// Parses RFC 3339 (`2026-11-29T17:00:00.000Z`, `…+02:00`, a space for `T`,
/// or no zone = UTC) and nvidia-smi's `2026/11/29 17:00:00.000`. Returns epoch
/// milliseconds, or `None` when the text is not such a time.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    let year = digits(b, 0, 4)?;
    let sep = *b.get(4)?;
    if !(sep == b'-' || sep == b'/') || b.get(7) != Some(&sep) {
        return None;
    }
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    if !matches!(b.get(10), Some(b'T' | b't' | b' '))
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
    {
        return None;
    }
    let (h, mi, sec) = (digits(b, 11, 2)?, digits(b, 14, 2)?, digits(b, 17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        let mut scale = 100;
        while let Some(c) = b.get(i).filter(|c| c.is_ascii_digit()) {
            ms += i64::from(c - b'0') * scale;
            scale /= 10;
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset_min: i64 = match b.get(i) {
        None => 0,
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&c @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let off = i64::from(digits(b, i + 1, 2)? * 60 + digits(b, i + 4, 2)?);
            if c == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + sec) - offset_min * 60;
    Some(secs * 1000 + ms)
}

/// Formats epoch milliseconds as RFC 3339 UTC with milliseconds.
pub fn format_rfc3339_ms(ts_ms: i64) -> String {
    match rfc3339_digits(ts_ms) {
        Some(b) => b.iter().map(|&c| char::from(c)).collect(),
        None => format_rfc3339_ms_slow(ts_ms),
    }
}

/// Formats epoch milliseconds as RFC 3339 UTC to the second (alert contract).
pub fn format_rfc3339_s(ts_ms: i64) -> String {
    match rfc3339_digits(ts_ms) {
        Some(b) => b[..19]
            .iter()
            .map(|&c| char::from(c))
            .chain(std::iter::once('Z'))
            .collect(),
        None => {
            let s = format_rfc3339_ms_slow(ts_ms);
            format!("{}Z", &s[..19])
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` without `format!` (REST formats 50 of these
/// per lookup, alert events several); `None` outside years 0–9999, whose
/// width `format!` decides.
fn rfc3339_digits(ts_ms: i64) -> Option<[u8; 24]> {
    let secs = ts_ms.div_euclid(1000);
    let ms = ts_ms.rem_euclid(1000) as u32;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let y = u32::try_from(y).ok().filter(|y| *y <= 9999)?;
    let sod = secs.rem_euclid(86_400) as u32;
    let mut b = *b"0000-00-00T00:00:00.000Z";
    for (range, v) in [
        (0..4, y),
        (5..7, m),
        (8..10, d),
        (11..13, sod / 3600),
        (14..16, sod / 60 % 60),
        (17..19, sod % 60),
        (20..23, ms),
    ] {
        let mut v = v;
        for c in b[range].iter_mut().rev() {
            *c = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }
    Some(b)
}

fn format_rfc3339_ms_slow(ts_ms: i64) -> String {
    let secs = ts_ms.div_euclid(1000);
    let ms = ts_ms.rem_euclid(1000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_contract_forms() {
        let base = parse_timestamp("2026-11-29T17:00:00.000Z").expect("valid");
        assert_eq!(base, 1_795_971_600_000);
        assert_eq!(parse_timestamp("2026-11-29T17:00:00Z"), Some(base));
        assert_eq!(parse_timestamp("2026-11-29 17:00:00"), Some(base));
        assert_eq!(parse_timestamp("2026-11-29T19:00:00+02:00"), Some(base));
        assert_eq!(parse_timestamp("2026/11/29 17:00:00.250"), Some(base + 250));
        assert_eq!(
            parse_timestamp("2026-11-29T17:00:00.123456789Z"),
            Some(base + 123)
        );
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-11-29T17:00",
            "2026-11-29T17:00:00Zjunk",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(
            format_rfc3339_ms(1_795_971_600_250),
            "2026-11-29T17:00:00.250Z"
        );
        assert_eq!(format_rfc3339_s(1_795_971_600_250), "2026-11-29T17:00:00Z");
    }

    proptest! {
        #[test]
        fn round_trip(ms in -50_000_000_000_000i64..50_000_000_000_000i64) {
            prop_assert_eq!(parse_timestamp(&format_rfc3339_ms(ms)), Some(ms));
        }

        #[test]
        fn the_digit_formatter_writes_what_format_does(ms in -500_000_000_000_000i64..500_000_000_000_000i64) {
            let slow = format_rfc3339_ms_slow(ms);
            prop_assert_eq!(format_rfc3339_ms(ms), slow.clone());
            prop_assert_eq!(format_rfc3339_s(ms), format!("{}Z", &slow[..19]));
        }

        #[test]
        fn never_panics(s in ".{0,40}") {
            let _ = parse_timestamp(&s);
        }
    }
}
