//! Helpers shared by the end-to-end tests (`tests/e2e/`): finding the real
//! `forewarn` binary and running it, scratch directories, free ports, small
//! HTTP and Prometheus-text readers, a real broker ([`broker`]), a real S3
//! server ([`s3`]), a real HTTP receiver ([`receiver`]) and the service around them ([`service`]). The tests drive the built binary, not the
//! library, so they see what an operator sees.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `forewarn` binary in the same target directory as the test binary.
/// `cargo test` builds a package's binaries only for that package's own
/// integration tests, and these tests live in another package, so nothing
/// here builds it: `scripts/test.sh` runs `cargo build -p detector --bin
/// forewarn` first (run it yourself before `cargo test -p forewarn-tests`,
/// or a stale binary is tested).
pub fn forewarn_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = dir.join("forewarn");
    assert!(
        bin.exists(),
        "{} missing: run `cargo build -p detector --bin forewarn` first (scripts/test.sh does)",
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

/// SIGTERM (a clean stop: a `serve` instance leaves its group,
/// checkpoints, finishes its exports) and waits up to a minute for the exit.
pub fn terminate(child: &mut std::process::Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(sent.success());
    let t = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "serve did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A free TCP port on 127.0.0.1 (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

pub mod alertmanager;
pub mod broker;
pub mod prometheus;
pub mod receiver;
pub mod s3;
pub mod service;
pub mod tls;

/// `GET http://127.0.0.1:<port><path>`: the body, or `None` if the server
/// is not answering or the status is not 200.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    http_status(port, path).and_then(|(code, body)| (code == 200).then_some(body))
}

/// A counter or gauge from Prometheus text (sum over its label sets).
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `GET http://127.0.0.1:<port><path>`: the status code and body, or `None`
/// if the server is not answering.
pub fn http_status(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

/// A simulated fleet as JSON lines in `<dir>/sim/telemetry.jsonl` (with
/// `labels.csv` beside it): `gpus` GPUs for `hours`, `seed`, and the
/// failure rate per GPU-day (`None`: the simulator's default).
pub fn simulate_fleet(dir: &Path, gpus: u32, hours: u32, seed: u64, failure_rate: Option<f64>) {
    let (gpus, hours, seed) = (gpus.to_string(), hours.to_string(), seed.to_string());
    let mut args = vec![
        "simulate", "--gpus", &gpus, "--hours", &hours, "--seed", &seed, "--format", "jsonl",
        "--out", "sim",
    ];
    let rate = failure_rate.map(|r| r.to_string());
    if let Some(r) = &rate {
        args.extend(["--failure-rate", r.as_str()]);
    }
    forewarn(&args, dir);
}
