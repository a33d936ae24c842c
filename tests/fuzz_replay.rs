//! Every committed fuzz input (`fuzz/corpus/<target>/`) through its fuzz
//! target's body (`fuzz/fuzz_targets/bodies/`), in the ordinary test build:
//! the inputs that once crashed or hung stay fixed, without cargo-fuzz or an
//! instrumented build (docs/fuzzing.md). A panic names the input.

use std::path::{Path, PathBuf};

#[path = "../fuzz/fuzz_targets/bodies/config.rs"]
mod config;
#[path = "../fuzz/fuzz_targets/bodies/decode_adapter.rs"]
mod decode_adapter;
#[path = "../fuzz/fuzz_targets/bodies/decode_native.rs"]
mod decode_native;
#[path = "../fuzz/fuzz_targets/bodies/decode_nvsmi.rs"]
mod decode_nvsmi;
#[path = "../fuzz/fuzz_targets/bodies/decode_prom.rs"]
mod decode_prom;
#[path = "../fuzz/fuzz_targets/bodies/decode_stream.rs"]
mod decode_stream;
#[path = "../fuzz/fuzz_targets/bodies/restore_alerts.rs"]
mod restore_alerts;
#[path = "../fuzz/fuzz_targets/bodies/restore_rcf.rs"]
mod restore_rcf;

#[test]
fn replay_config() {
    replay("config", config::run);
}

#[test]
fn replay_decode_adapter() {
    replay("decode_adapter", decode_adapter::run);
}

#[test]
fn replay_decode_native() {
    replay("decode_native", decode_native::run);
}

#[test]
fn replay_decode_nvsmi() {
    replay("decode_nvsmi", decode_nvsmi::run);
}

#[test]
fn replay_decode_prom() {
    replay("decode_prom", decode_prom::run);
}

#[test]
fn replay_decode_stream() {
    replay("decode_stream", decode_stream::run);
}

#[test]
fn replay_restore_alerts() {
    replay("restore_alerts", restore_alerts::run);
}

#[test]
fn replay_restore_rcf() {
    replay("restore_rcf", restore_rcf::run);
}

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    let files = corpus(target);
    assert!(!files.is_empty(), "{target}: empty corpus");
    for f in &files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("reading {}: {e}", f.display()));
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{target}: {} panicked", f.display());
    }
}
