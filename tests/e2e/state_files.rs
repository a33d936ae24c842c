//! State on disk, with the real binary: a silence made through REST with
//! the simulator (no checkpoints) is there after a restart; a second
//! `forewarn serve` on the same directories exits non-zero naming the lock
//! and its holder; a damaged newest checkpoint (Kafka, on the real broker)
//! is skipped with an ERROR naming it and the service resumes from the one
//! before.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use forewarn_tests::broker::Broker;
use forewarn_tests::{forewarn_bin, free_port, http_get, metric, scratch, simulate_fleet};

const TOKEN: &str = "e2e-state-token";

/// Kills the service when the test ends, passed or panicked.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(dir: &Path, log: &str) -> Child {
    Command::new(forewarn_bin())
        .args(["serve", "--config", "forewarn.toml"])
        .current_dir(dir)
        .env("FOREWARN_API_TOKEN", TOKEN)
        .env("FOREWARN_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join(log))
                .expect("serve log"),
        )
        .spawn()
        .expect("spawn forewarn serve")
}

/// A log file without ANSI colour codes.
fn log_text(path: &Path) -> String {
    let raw = std::fs::read_to_string(path).expect("log");
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            for d in it.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Waits for `f`; on timeout fails with the service's log at `log`.
fn wait_for(what: &str, timeout: Duration, log: &Path, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        if start.elapsed() >= timeout {
            let text = if log.exists() {
                log_text(log)
            } else {
                String::new()
            };
            panic!("timed out waiting for {what}; the service logged:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `POST` with the token; (status line, body).
fn post(port: u16, path: &str, body: &str) -> (String, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

fn simulator_config(dir: &Path, api: u16) {
    std::fs::write(
        dir.join("forewarn.toml"),
        format!(
            r#"
[source]
type = "simulator"
gpus = 64
speed = 600

[api]
listen = "127.0.0.1:{api}"

[export]
enabled = false
"#
        ),
    )
    .expect("config");
}

#[test]
fn a_rest_silence_survives_a_restart_and_a_second_process_is_refused() {
    let dir = scratch("state-sim");
    let api = free_port();
    simulator_config(&dir, api);
    let svc = Service(spawn(&dir, "serve.log"));
    wait_for(
        "the API",
        Duration::from_secs(60),
        &dir.join("serve.log"),
        || http_get(api, "/healthz").is_some(),
    );
    let body = r#"{"matchers":[{"name":"rack","value":"r07","isRegex":false}],"startsAt":"2026-01-01T00:00:00Z","endsAt":"2126-01-01T00:00:00Z","createdBy":"e2e","comment":"CDU swap"}"#;
    let (status, answer) = post(api, "/v1/silences", body);
    assert!(status.contains(" 201"), "{status}: {answer}");
    let id = serde_json::from_str::<serde_json::Value>(&answer).expect("json")["id"]
        .as_str()
        .expect("id")
        .to_string();
    assert!(dir.join("forewarn-silences.json").exists());

    // The same directories again (another port): refused at once, named.
    let other = free_port();
    let out = Command::new(forewarn_bin())
        .args(["serve", "--config", "forewarn.toml", "--listen"])
        .arg(format!("127.0.0.1:{other}"))
        .current_dir(&dir)
        .env("FOREWARN_API_TOKEN", TOKEN)
        .output()
        .expect("second serve");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the second process started: {err}");
    assert!(
        err.contains("is locked by another forewarn process")
            && err.contains(&format!("(pid {})", svc.0.id()))
            && err.contains("forewarn-outbox"),
        "{err}"
    );

    // kill -9 (no shutdown path), restart: the silence is back.
    drop(svc);
    let _svc = Service(spawn(&dir, "serve2.log"));
    wait_for(
        "the API again",
        Duration::from_secs(60),
        &dir.join("serve2.log"),
        || http_get(api, "/healthz").is_some(),
    );
    let list = http_get(api, "/v1/silences").expect("silences");
    assert!(list.contains(&id), "{id} missing after a restart: {list}");
    let log = log_text(&dir.join("serve2.log"));
    assert!(log.contains("silences loaded"), "{log}");
    drop(_svc);
    std::fs::remove_dir_all(&dir).ok();
}

fn kafka_config(dir: &Path, broker: &str, api: u16) {
    std::fs::write(
        dir.join("forewarn.toml"),
        format!(
            r#"
[source]
type = "kafka"
brokers = "{broker}"
topics = ["telemetry"]
group_id = "forewarn-e2e-state"
ready_lag = 0

[checkpoint]
dir = "ckpt"
interval = "500ms"

[api]
listen = "127.0.0.1:{api}"

[export]
enabled = false
"#
        ),
    )
    .expect("config");
}

/// Checkpoint files, oldest first.
fn checkpoints(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("ckpt"))
        .expect("ckpt dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "cbor"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_damaged_newest_checkpoint_is_skipped_and_the_one_before_restored() {
    let dir = scratch("state-kafka");
    let Some(broker) = Broker::start(&dir.join("broker")) else {
        return;
    };
    broker.create_topic("telemetry", 2);
    simulate_fleet(&dir, 32, 2, 8, None);
    let api = free_port();
    kafka_config(&dir, &broker.addr(), api);
    let svc = Service(spawn(&dir, "serve.log"));
    wait_for(
        "the API",
        Duration::from_secs(60),
        &dir.join("serve.log"),
        || http_get(api, "/healthz").is_some(),
    );
    // Paced (2 event hours in ~8 s), so that checkpoints come at
    // different offsets (the source checkpoints only when they moved).
    let replay = Command::new(forewarn_bin())
        .args(["replay", "--input", "sim/telemetry.jsonl", "--brokers"])
        .arg(broker.addr())
        .args(["--topic", "telemetry", "--speed", "900"])
        .current_dir(&dir)
        .stderr(Stdio::null())
        .output()
        .expect("replay");
    assert!(replay.status.success(), "replay failed");
    wait_for(
        "three checkpoints, caught up",
        Duration::from_secs(120),
        &dir.join("serve.log"),
        || {
            http_get(api, "/metrics")
                .is_some_and(|m| metric(&m, "forewarn_checkpoints_total") >= 3.0)
                && http_get(api, "/readyz").is_some()
        },
    );
    // Stopped for good (no shutdown checkpoint), then the newest damaged:
    // a flipped byte in the middle of its payload.
    drop(svc);
    let files = checkpoints(&dir);
    assert!(files.len() >= 2, "{files:?}");
    let newest = files[files.len() - 1].clone();
    let before = files[files.len() - 2].clone();
    let mut bytes = std::fs::read(&newest).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&newest, &bytes).expect("damage");

    // Restarted after the killed member's session expired (10 s): on tansu
    // 0.6 a member that joins before then can wedge the group, every member
    // assigned nothing (docs/scaling.md); a deployment's restart is slower.
    std::thread::sleep(Duration::from_secs(11));
    let _svc = Service(spawn(&dir, "serve2.log"));
    wait_for(
        "ready after the restart",
        Duration::from_secs(120),
        &dir.join("serve2.log"),
        || http_get(api, "/readyz").is_some(),
    );
    let log = log_text(&dir.join("serve2.log"));
    let name = |p: &Path| p.file_name().expect("name").to_string_lossy().to_string();
    let skipped = log
        .lines()
        .find(|l| l.contains("checkpoint does not restore"))
        .unwrap_or_else(|| panic!("no fallback logged: {log}"));
    assert!(
        skipped.contains("ERROR")
            && skipped.contains(&name(&newest))
            && skipped.contains("damaged"),
        "{skipped}"
    );
    let seq: u64 = name(&before)
        .trim_start_matches("checkpoint-")
        .trim_end_matches(".cbor")
        .parse()
        .expect("seq");
    let restored = log
        .lines()
        .find(|l| l.contains("restored from checkpoint"))
        .unwrap_or_else(|| panic!("nothing restored: {log}"));
    assert!(
        restored.contains(&format!("seq={seq}")),
        "not {seq}: {restored}"
    );
    // Kafka went back to that checkpoint's offsets: what the damaged one
    // had covered is read again (the source checkpoints only when its
    // offsets moved, so there is some).
    let m = http_get(api, "/metrics").expect("metrics");
    let replayed = metric(&m, "forewarn_samples_ingested_total");
    assert!(replayed > 0.0, "nothing replayed after the fallback");
    eprintln!("{skipped}\n{restored}\nreplayed {replayed} samples");
    drop(_svc);
    drop(broker);
    std::fs::remove_dir_all(&dir).ok();
}
