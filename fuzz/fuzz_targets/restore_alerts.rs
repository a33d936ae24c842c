//! Fuzz target: checkpoint restore of the alert stage, from the CBOR bytes
//! a checkpoint file holds: an `EngineSnapshot` restored into an
//! `AlertEngine`, and a `RouterSnapshot` into a `Dispatcher`, both under
//! the built-in default alert policy. No bytes may panic; a restored
//! state snapshots to bytes that restore to the same bytes (round trip);
//! the restored engine and dispatcher survive a tick.
//!
//! The body is `bodies/restore_alerts.rs`, shared with the corpus replay test
//! (`tests/fuzz_replay.rs`), which runs every committed input in CI.
#![no_main]

#[path = "bodies/restore_alerts.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
