//! Fuzz target: prometheus-kafka-adapter JSON lines, each a message
//! through one `Decoder` (parse + assembler), then the end of input. No
//! input may panic; after `finish` nothing is left pending, and the
//! assembler never emits more samples than it was given metrics.
//!
//! The body is `bodies/decode_adapter.rs`, shared with the corpus replay test
//! (`tests/fuzz_replay.rs`), which runs every committed input in CI.
#![no_main]

#[path = "bodies/decode_adapter.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
