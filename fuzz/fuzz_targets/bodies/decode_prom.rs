//! Fuzz target: the dcgm-exporter Prometheus text decoder. No input may
//! panic; decoding is deterministic (the same bytes twice give the same
//! samples and errors).

use features::DecodeOutput;
use features::decode::prom;

/// Event time of a scrape without timestamps (2026-01-01T00:00:00Z).
const DEFAULT_TS_MS: i64 = 1_767_225_600_000;

/// One input: what the fuzzer and the corpus replay run.
pub fn run(data: &[u8]) {
    let mut out = DecodeOutput::default();
    prom::decode_into(data, DEFAULT_TS_MS, &mut out);
    let (n, errors) = (out.samples.len(), out.errors.clone());
    out.clear();
    prom::decode_into(data, DEFAULT_TS_MS, &mut out);
    assert_eq!(out.samples.len(), n);
    assert_eq!(out.errors, errors);
}
