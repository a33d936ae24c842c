//! Helpers shared by the end-to-end tests: finding the real `forewarn`
//! binary and running it, and scratch directories.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `forewarn` binary built by `cargo test --workspace` (cargo builds
/// every workspace binary before running tests), beside the test binary.
pub fn forewarn_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = dir.join("forewarn");
    assert!(
        bin.exists(),
        "{} missing: run `cargo test --workspace` (or `cargo build -p detector`) first",
        bin.display()
    );
    bin
}

/// Runs `forewarn <args>` and returns its output, failing with stderr when
/// it exits non-zero.
pub fn forewarn(args: &[&str], cwd: &Path) -> Output {
    let out = Command::new(forewarn_bin())
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("spawn forewarn");
    assert!(
        out.status.success(),
        "forewarn {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh scratch directory under the system temp dir.
pub fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("forewarn-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}
