//! Never silently broken: the real `forewarn serve` when its parts fail.
//!
//! - The alert outbox's disk is full (a real 1 MiB tmpfs filled to the
//!   last byte, or, where mounting is not allowed, the receiver's directory
//!   replaced by a file): ingest and scoring go on to the end of the input,
//!   `/readyz` answers 503 naming the outbox, `/healthz` shows it degraded,
//!   an ERROR is logged; once space returns every alert event is delivered,
//!   exactly once.
//! - A part that stops (a shard or the alert thread panicking, the source
//!   failing on a bad Kafka option) is logged at ERROR with its cause, and
//!   the process exits non-zero within seconds.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use forewarn_tests::receiver::Receiver;
use forewarn_tests::{forewarn_bin, free_port, http_status, metric, scratch, simulate_fleet};
use serde_json::Value;

/// Kills the service when the test ends, passed or panicked.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(dir: &Path, port: u16, config: &str, env: &[(&str, String)]) -> Service {
    std::fs::write(dir.join("forewarn.toml"), config).expect("config");
    let mut cmd = Command::new(forewarn_bin());
    cmd.args(["serve", "--config", "forewarn.toml", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .current_dir(dir)
        .env("FOREWARN_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("serve.log")).expect("log"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    Service(cmd.spawn().expect("spawn forewarn serve"))
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default()
}

/// Waits for the process to exit on its own.
fn exit_within(svc: &mut Service, timeout: Duration) -> (ExitStatus, Duration) {
    let start = Instant::now();
    loop {
        if let Some(st) = svc.0.try_wait().expect("try_wait") {
            return (st, start.elapsed());
        }
        assert!(
            start.elapsed() < timeout,
            "forewarn did not exit within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// (status, dedup_key) of every alert event the service logged.
fn logged_events(text: &str) -> BTreeMap<(String, String), u32> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.contains(" dedup_key=")) {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(|v| v.to_ascii_lowercase())
        };
        if let (Some(status), Some(key)) = (field("status="), field("dedup_key=")) {
            *out.entry((status, key)).or_default() += 1;
        }
    }
    out
}

fn received_events(rx: &Receiver) -> BTreeMap<(String, String), u32> {
    let mut out = BTreeMap::new();
    for v in rx.bodies("/hook") {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_ascii_lowercase();
        *out.entry((s("status"), s("dedup_key"))).or_default() += 1;
    }
    out
}

/// Every event to one webhook, at once, through the outbox in `outbox`.
fn files_config(outbox: &str) -> String {
    format!(
        r#"[source]
type = "files"
files = ["sim/telemetry.jsonl"]

[alerts.route]
receiver = "hook"
group_by = ["..."]
group_wait = "0s"

[[alerts.receivers]]
type = "webhook"
name = "hook"
url = {{ env = "FW_E2E_HOOK" }}

[alerts.outbox]
dir = "{outbox}"
initial_backoff = "100ms"
"#
    )
}

/// Mounts a 1 MiB tmpfs at `dir` (root only); false where not allowed.
fn mount_tmpfs(dir: &Path) -> bool {
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(dir)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Writes `path` until the filesystem has no space left.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).expect("filler");
    let block = vec![0u8; 4096];
    while f.write_all(&block).and_then(|()| f.sync_data()).is_ok() {}
}

#[test]
fn a_full_outbox_disk_holds_alerts_then_delivers_each_once() {
    let dir = scratch("outbox-full");
    simulate_fleet(&dir, 64, 8, 5, Some(0.5));
    // The reference: the same input with a healthy disk.
    let clean = {
        let rx = Receiver::start();
        let port = free_port();
        let _svc = spawn(
            &dir,
            port,
            &files_config("outbox-clean"),
            &[("FW_E2E_HOOK", format!("http://127.0.0.1:{}/hook", rx.port))],
        );
        wait_for("the clean run to finish", Duration::from_secs(120), || {
            log(&dir).contains("source finished")
        });
        let mut seen = 0;
        wait_for(
            "the clean run's deliveries to settle",
            Duration::from_secs(60),
            || {
                std::thread::sleep(Duration::from_secs(1));
                let now = rx.bodies("/hook").len();
                std::mem::replace(&mut seen, now) == now && now > 0
            },
        );
        received_events(&rx)
    };
    assert!(clean.len() >= 4, "the fleet raised alerts: {clean:?}");

    let outbox = dir.join("outbox");
    std::fs::create_dir_all(&outbox).expect("outbox dir");
    let tmpfs = mount_tmpfs(&outbox);
    let _unmount = Unmount(tmpfs.then(|| outbox.clone()));
    // The outbox's layout exists (as after any earlier run); then its disk fills.
    std::fs::create_dir_all(outbox.join("hook/dead")).expect("layout");
    std::fs::write(outbox.join("ledger.log"), b"").expect("ledger");
    let blocked = outbox.join("hook");
    if tmpfs {
        fill(&outbox.join("filler"));
    } else {
        std::fs::rename(&blocked, outbox.join("hook.away")).expect("move");
        std::fs::write(&blocked, b"not a directory").expect("block");
    }

    let rx = Receiver::start();
    let port = free_port();
    let mut svc = spawn(
        &dir,
        port,
        &files_config("outbox"),
        &[("FW_E2E_HOOK", format!("http://127.0.0.1:{}/hook", rx.port))],
    );
    // Readiness fails, naming the outbox; liveness holds (restarting would
    // not free the disk) and names it degraded.
    let to_503 = wait_for(
        "/readyz 503 naming the outbox",
        Duration::from_secs(90),
        || http_status(port, "/readyz").is_some_and(|(c, b)| c == 503 && b.contains("outbox")),
    );
    let (code, body) = http_status(port, "/healthz").expect("healthz");
    assert_eq!(code, 200, "{body}");
    let health: Value = serde_json::from_str(&body).expect("healthz JSON");
    assert_eq!(
        health["components"]["outbox"]["condition"], "degraded",
        "{body}"
    );
    assert!(
        log(&dir).contains("ERROR") && log(&dir).contains("component degraded"),
        "an ERROR names the fault:\n{}",
        log(&dir)
    );
    // Ingest and scoring go on to the end of the input meanwhile.
    let total = std::fs::read_to_string(dir.join("sim/telemetry.jsonl"))
        .expect("telemetry")
        .lines()
        .count() as f64;
    wait_for("the whole input ingested", Duration::from_secs(120), || {
        http_status(port, "/metrics")
            .is_some_and(|(_, m)| metric(&m, "forewarn_samples_ingested_total") >= total)
    });
    let metrics = http_status(port, "/metrics").expect("metrics").1;
    assert!(
        metrics.contains("forewarn_component_up{component=\"outbox\"} 0"),
        "{metrics}"
    );
    assert!(
        rx.bodies("/hook").is_empty(),
        "nothing could be stored, so nothing sent"
    );

    // Space returns: everything that waited is stored and delivered, once.
    if tmpfs {
        std::fs::remove_file(outbox.join("filler")).expect("free space");
    } else {
        std::fs::remove_file(&blocked).expect("unblock");
        std::fs::rename(outbox.join("hook.away"), &blocked).expect("move back");
    }
    let back = wait_for("/readyz 200 again", Duration::from_secs(30), || {
        http_status(port, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    let n: u32 = clean.values().sum();
    wait_for("every alert delivered", Duration::from_secs(60), || {
        received_events(&rx).values().sum::<u32>() >= n
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        received_events(&rx),
        clean,
        "each alert of the clean run delivered exactly once"
    );
    let logged = logged_events(&log(&dir));
    assert!(
        clean.keys().all(|k| logged.contains_key(k)),
        "and logged as it happened"
    );
    eprintln!(
        "outbox full ({}): /readyz 503 after {to_503:?}, 200 again {back:?} after space returned; {n} events delivered once",
        if tmpfs { "tmpfs" } else { "blocked directory" }
    );
    let _ = svc.0.kill();
    let _ = svc.0.wait();
}

/// Unmounts the test's tmpfs when the test ends, passed or panicked.
struct Unmount(Option<std::path::PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = Command::new("umount").arg(p).status();
        }
    }
}

/// A simulated fleet on the demo's defaults, REST on `port`.
const SIMULATOR: &str = "[source]\ntype = \"simulator\"\ngpus = 64\nspeed = 600\n";

#[test]
fn a_stopped_part_is_named_and_the_process_exits_non_zero() {
    for part in ["shard-1", "alert_stage"] {
        let dir = scratch(&format!("supervise-{part}"));
        let port = free_port();
        let mut svc = spawn(
            &dir,
            port,
            SIMULATOR,
            &[("FOREWARN_INJECT_PANIC", part.to_owned())],
        );
        let (status, took) = exit_within(&mut svc, Duration::from_secs(30));
        let text = log(&dir);
        assert!(!status.success(), "{part}: exit {status}");
        assert!(
            text.contains("component stopped") && text.contains(part),
            "{part}: the log names it:\n{text}"
        );
        assert!(text.contains("unrecoverable"), "{part}:\n{text}");
        eprintln!("{part} panicked: exited {status} after {took:?}");
    }

    // A source that cannot start (librdkafka refuses an option): refused
    // by the start-up check, before anything runs (tests/e2e/startup.rs).
    let dir = scratch("supervise-source");
    let port = free_port();
    let config = "[source]\ntype = \"kafka\"\nbrokers = \"127.0.0.1:1\"\n[source.options]\n\"no.such.option\" = \"1\"\n";
    let mut svc = spawn(&dir, port, config, &[]);
    let (status, took) = exit_within(&mut svc, Duration::from_secs(30));
    let text = log(&dir);
    assert!(!status.success(), "exit {status}");
    assert!(
        text.contains("Kafka source") && text.contains("no.such.option"),
        "the log names the source and the option:\n{text}"
    );
    eprintln!("bad Kafka option: exited {status} after {took:?}");
}
