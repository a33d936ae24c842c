//! Fuzz target: restore of a random cut forest and of a thresholded
//! forest from their JSON snapshots (`from_json`, which checks version and
//! consistency). No bytes may panic, in restore or in the first scoring
//! and update after it; a restored forest writes JSON that restores to the
//! same JSON (round trip).
//!
//! The body is `bodies/restore_rcf.rs`, shared with the corpus replay test
//! (`tests/fuzz_replay.rs`), which runs every committed input in CI.
#![no_main]

#[path = "bodies/restore_rcf.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
