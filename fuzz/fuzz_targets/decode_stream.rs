//! Fuzz target: `Decoder::read`, the path of files and stdin (sniffing,
//! whole-file scrapes and CSV, JSON lines with the adapter assembler). No
//! input may panic; a line decodes to the same errors as a message of the
//! same bytes; the last unit comes once, last.
//!
//! The body is `bodies/decode_stream.rs`, shared with the corpus replay test
//! (`tests/fuzz_replay.rs`), which runs every committed input in CI.
#![no_main]

#[path = "bodies/decode_stream.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
