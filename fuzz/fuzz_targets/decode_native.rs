//! Fuzz target: the native JSON decoder (one message, then the same bytes
//! as JSON lines). No input may panic; every decoded sample, written back
//! as native JSON (`Sample`'s `Serialize`), must decode to itself when
//! its time is one RFC 3339 can write (years 0000–9999): epoch milliseconds
//! reach further, and the formatter then writes a longer year that no
//! RFC 3339 parser reads (whether such times are plausible at all is the
//! pipeline's event-time check, not the decoder's).
//!
//! The body is `bodies/decode_native.rs`, shared with the corpus replay test
//! (`tests/fuzz_replay.rs`), which runs every committed input in CI.
#![no_main]

#[path = "bodies/decode_native.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
