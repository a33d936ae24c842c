//! The service side of the Kafka end-to-end tests (`tests/e2e/kafka*.rs`):
//! an alert policy routing to the test receivers, the Kafka config around
//! it, `forewarn serve` as a child killed on drop, the uninterrupted
//! reference (`forewarn backtest` on the same telemetry and policy), and
//! incidents counted PagerDuty's way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{forewarn, forewarn_bin};

/// The built-in policy's lifecycle and correlation (everything before its
/// `[route]`), as tables under `[alerts]`.
pub fn builtin_policy_head() -> String {
    let default = include_str!("../../detector/src/config/default_alerts.toml");
    let head = default.split("\n[route]").next().expect("policy head");
    let mut s = String::new();
    for line in head.lines() {
        match line.strip_prefix('[') {
            Some(rest) if !rest.starts_with('[') => s.push_str(&format!("[alerts.{rest}\n")),
            _ => {
                s.push_str(line);
                s.push('\n');
            }
        }
    }
    s
}

/// The built-in policy's lifecycle and correlation, with routes to PagerDuty
/// (critical, one group per alert) and Slack (everything).
pub fn alert_policy(pd: u16, outbox: &str) -> String {
    let mut s = builtin_policy_head();
    s.push_str(&format!(
        r#"
[alerts.route]
receiver = "slack"
group_by = ["kind", "rack"]
group_wait = "0s"
group_interval = "1m"
repeat_interval = "24h"

[[alerts.route.routes]]
matchers = ['severity="critical"']
receiver = "pagerduty"
group_by = ["..."]
group_wait = "0s"
continue = true

[[alerts.receivers]]
type = "pagerduty"
name = "pagerduty"
url = "http://127.0.0.1:{pd}/v2/enqueue"
routing_key = {{ env = "FW_E2E_PD_KEY" }}

[[alerts.receivers]]
type = "slack"
name = "slack"
webhook_url = {{ env = "FW_E2E_SLACK_URL" }}
min_interval = "0s"

[alerts.outbox]
dir = "{outbox}"
initial_backoff = "100ms"
"#
    ));
    s
}

/// Kills the service when the test ends, passed or panicked.
pub struct Service(pub Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn serve(dir: &Path, pd: u16) -> Service {
    Service(
        Command::new(forewarn_bin())
            .args(["serve", "--config", "forewarn.toml"])
            .current_dir(dir)
            .env("FW_E2E_PD_KEY", "e2e-routing-key")
            .env("FW_E2E_SLACK_URL", format!("http://127.0.0.1:{pd}/slack"))
            .env("FOREWARN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("serve.log"))
                    .expect("serve log"),
            )
            .spawn()
            .expect("spawn forewarn serve"),
    )
}

pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Incidents opened per dedup key, PagerDuty's way: a trigger opens one
/// unless that key is already open; a resolve closes it.
pub fn incidents(pd_events: &[Value]) -> BTreeMap<String, u32> {
    let mut open = BTreeSet::new();
    let mut opened: BTreeMap<String, u32> = BTreeMap::new();
    for e in pd_events {
        let key = e["dedup_key"].as_str().expect("dedup_key").to_string();
        match e["event_action"].as_str() {
            Some("trigger") => {
                if open.insert(key.clone()) {
                    *opened.entry(key).or_default() += 1;
                }
            }
            Some("resolve") => {
                open.remove(&key);
            }
            other => panic!("unexpected event_action {other:?}"),
        }
    }
    opened
}

/// `forewarn.toml` for `serve` on Kafka: group `group` on topic
/// `telemetry`, ready within `ready_lag` messages, checkpoints every 0.5 s
/// in `ckpt/`, REST on `api`, the [`alert_policy`] to the receiver on `pd`
/// with its outbox in `outbox/`.
pub fn kafka_config(brokers: &str, group: &str, ready_lag: u64, api: u16, pd: u16) -> String {
    format!(
        r#"
[source]
type = "kafka"
brokers = "{brokers}"
topics = ["telemetry"]
group_id = "{group}"
ready_lag = {ready_lag}

[checkpoint]
dir = "ckpt"
interval_s = 0.5

[api]
listen = "127.0.0.1:{api}"
{}"#,
        alert_policy(pd, "outbox")
    )
}

/// The uninterrupted reference: `forewarn backtest` with `forewarn.toml`
/// in `dir` on `input`; its alert events (contract JSON lines).
pub fn reference_events(dir: &Path, input: &str) -> Vec<Value> {
    forewarn(
        &[
            "backtest",
            "--config",
            "forewarn.toml",
            "--input",
            input,
            "--alerts-out",
            "reference.jsonl",
        ],
        dir,
    );
    std::fs::read_to_string(dir.join("reference.jsonl"))
        .expect("reference")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

/// Critical firings per dedup key: what PagerDuty must open.
pub fn expected_pages(reference: &[Value]) -> BTreeMap<String, u32> {
    let mut expected: BTreeMap<String, u32> = BTreeMap::new();
    for e in reference {
        if e["status"] == "firing" && e["severity"] == "critical" {
            *expected
                .entry(e["dedup_key"].as_str().expect("key").to_string())
                .or_default() += 1;
        }
    }
    expected
}

/// Waits until the receiver's request count has not changed for 3 s.
pub fn wait_settled(log: &crate::receiver::Log, timeout: Duration) {
    let mut last = (0, Instant::now());
    wait_for("deliveries to settle", timeout, || {
        let n = log.lock().expect("log").len();
        if n != last.0 {
            last = (n, Instant::now());
        }
        last.1.elapsed() > Duration::from_secs(3)
    });
}

/// The HTTP status of `GET http://127.0.0.1:<port><path>`, or `None` when
/// nothing answers.
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}
