//! Fuzz target: the dcgm-exporter Prometheus text decoder. No input may
//! panic; decoding is deterministic (the same bytes twice give the same
//! samples and errors).
//!
//! The body is `bodies/decode_prom.rs`, shared with the corpus replay test
//! (`tests/fuzz_replay.rs`), which runs every committed input in CI.
#![no_main]

#[path = "bodies/decode_prom.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
