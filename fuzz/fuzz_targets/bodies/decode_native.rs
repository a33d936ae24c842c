//! Fuzz target: the native JSON decoder (one message, then the same bytes
//! as JSON lines). No input may panic; every decoded sample, written back
//! as native JSON (`Sample`'s `Serialize`), must decode to itself when
//! its time is one RFC 3339 can write (years 0000–9999): epoch milliseconds
//! reach further, and the formatter then writes a longer year that no
//! RFC 3339 parser reads (whether such times are plausible at all is the
//! pipeline's event-time check, not the decoder's).

use std::sync::LazyLock;

use features::DecodeOutput;
use features::decode::native;
use features::time::days_from_civil;

/// Epoch ms of the first and last days the RFC 3339 parser reads back:
/// years 0000 to 9999, less the last day of 9999, which lies past the end
/// of jiff's range.
static RFC3339_RANGE: LazyLock<(i64, i64)> = LazyLock::new(|| {
    let day = |y, m, d| days_from_civil(y, m, d).expect("a real date") * 86_400_000;
    (day(0, 1, 1), day(9999, 12, 30) - 1)
});

/// One input: what the fuzzer and the corpus replay run.
pub fn run(data: &[u8]) {
    let mut out = DecodeOutput::default();
    native::decode_into(data, &mut out);
    let samples = std::mem::take(&mut out.samples);
    let (min, max) = *RFC3339_RANGE;
    for s in samples.iter().filter(|s| (min..=max).contains(&s.ts_ms)) {
        let json = serde_json::to_vec(s).expect("a decoded sample serializes");
        let mut again = DecodeOutput::default();
        native::decode_into(&json, &mut again);
        assert!(
            again.errors.is_empty(),
            "re-decoding {} failed: {:?}",
            String::from_utf8_lossy(&json),
            again.errors
        );
        assert_eq!(again.samples.len(), 1);
        assert_eq!(
            &again.samples[0],
            s,
            "round trip of {}",
            String::from_utf8_lossy(&json)
        );
    }
    out.clear();
    native::decode_lines(data, &mut out);
}
