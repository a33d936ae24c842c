use super::*;
use proptest::prelude::*;

#[test]
fn parses_contract_forms() {
    let base = parse_timestamp("2026-11-29T17:00:00.000Z").expect("valid");
    assert_eq!(base, 1_795_971_600_000);
    assert_eq!(parse_timestamp("2026-11-29T17:00:00Z"), Some(base));
    assert_eq!(parse_timestamp("2026-11-29t17:00:00z"), Some(base));
    assert_eq!(parse_timestamp("2026-11-29 17:00:00"), Some(base));
    assert_eq!(parse_timestamp(" 2026-11-29T17:00:00 "), Some(base));
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
        "2026-02-30T00:00:00Z",
        "2026-11-29T17:00",
        "2026-11-29T17:00Z",
        "2026-11-29",
        "2026-11-29T17:00:00Zjunk",
        "2026-11-29T17:00:00Z[UTC]",
        "2026/11-29 17:00:00",
    ] {
        assert_eq!(parse_timestamp(bad), None, "{bad}");
    }
}

#[test]
fn strict_rfc3339_needs_a_zone() {
    assert_eq!(
        parse_rfc3339("2026-11-29T18:03:00.5+01:00"),
        parse_rfc3339("2026-11-29T17:03:00.500Z")
    );
    assert_eq!(parse_rfc3339("1969-12-31T23:59:59.9995Z"), Ok(-1));
    for bad in [
        "2026-11-29",
        "2026-13-29T17:03:00Z",
        "2026-11-29T17:03:00",
        "2026/11/29T17:03:00Z",
    ] {
        assert!(parse_rfc3339(bad).is_err(), "{bad}");
    }
}

#[test]
fn formats() {
    let t = 1_795_971_600_250;
    assert_eq!(format_rfc3339_ms(t), "2026-11-29T17:00:00.250Z");
    assert_eq!(format_rfc3339_s(t), "2026-11-29T17:00:00Z");
    assert_eq!(format_rfc3339(t), "2026-11-29T17:00:00.250Z");
    assert_eq!(format_rfc3339(t - 250), "2026-11-29T17:00:00Z");
    assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(format_rfc3339_ms(-1), "1969-12-31T23:59:59.999Z");
    assert_eq!(format_rfc3339_ms(i64::MAX), "292278994-08-17T07:12:55.807Z");
    assert_eq!(
        format_rfc3339_ms(i64::MIN),
        "-292275055-05-16T16:47:04.192Z"
    );
    assert_eq!(
        format_rfc3339_s(-62_167_219_200_001),
        "-001-12-31T23:59:59Z"
    );
}

#[test]
fn civil_days() {
    assert_eq!(civil_from_days(0), (1970, 1, 1));
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
    assert_eq!(days_from_civil(2026, 11, 29), Some(20_786));
    assert_eq!(days_from_civil(2026, 2, 30), None);
    assert_eq!(
        days_from_civil(12_000, 3, 1).map(civil_from_days),
        Some((12_000, 3, 1))
    );
}

proptest! {
    #[test]
    fn round_trip(ms in -50_000_000_000_000i64..50_000_000_000_000i64) {
        prop_assert_eq!(parse_timestamp(&format_rfc3339_ms(ms)), Some(ms));
        prop_assert_eq!(parse_rfc3339(&format_rfc3339(ms)), Ok(ms));
        prop_assert_eq!(parse_timestamp(&format_rfc3339_s(ms)), Some(ms.div_euclid(1000) * 1000));
    }

    #[test]
    fn days_round_trip(days in -100_000_000i64..100_000_000) {
        let (y, m, d) = civil_from_days(days);
        prop_assert_eq!(days_from_civil(y, m, d), Some(days));
    }

    #[test]
    fn never_panics(s in ".{0,40}") {
        let _ = parse_timestamp(&s);
        let _ = parse_rfc3339(&s);
        let _ = parse_duration(&s);
    }
}
