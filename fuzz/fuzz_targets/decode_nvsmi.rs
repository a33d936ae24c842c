//! Fuzz target: the `nvidia-smi --query-gpu … --format=csv` decoder. No
//! input may panic; a sample never comes without its GPU id.
//!
//! The body is `bodies/decode_nvsmi.rs`, shared with the corpus replay test
//! (`tests/fuzz_replay.rs`), which runs every committed input in CI.
#![no_main]

#[path = "bodies/decode_nvsmi.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
