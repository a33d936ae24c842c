//! Fuzz target: the config parsers of the library crates, from TOML text:
//! the alerts file (`alerts::RawConfig`, engine, routes, receivers,
//! outbox) and the feature stage's `[features]` table. No text may panic
//! in parsing or validation. (The detector's own `RawConfig` bundles these
//! with its source sections; fuzzing it would instrument librdkafka, arrow
//! and parquet too: see docs/fuzzing.md.)
//!
//! The body is `bodies/config.rs`, shared with the corpus replay test
//! (`tests/fuzz_replay.rs`), which runs every committed input in CI.
#![no_main]

#[path = "bodies/config.rs"]
mod body;

libfuzzer_sys::fuzz_target!(|data: &[u8]| body::run(data));
