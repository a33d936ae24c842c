//! The service end to end on a real broker: a simulated fleet →
//! `forewarn replay` → tansu → `forewarn serve` → PagerDuty and Slack
//! receivers on 127.0.0.1. The service is killed with SIGKILL mid-stream and
//! restarted from its checkpoint; the receivers must end with exactly the
//! incidents an uninterrupted run (`forewarn backtest` on the same
//! telemetry and policy) pages, none paged twice.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use forewarn_tests::broker::Broker;
use forewarn_tests::receiver::Receiver;
use forewarn_tests::service::{
    expected_pages, incidents, kafka_config, reference_events, serve, wait_for, wait_settled,
};
use forewarn_tests::{forewarn_bin, free_port, http_get, metric, scratch, simulate_fleet};
use serde_json::Value;

#[test]
fn kafka_to_receivers_survives_kill_9_without_double_pages() {
    let dir = scratch("kafka");
    let Some(broker) = Broker::start(&dir.join("broker")) else {
        return;
    };
    broker.create_topic("telemetry", 2);
    simulate_fleet(&dir, 96, 12, 5, Some(0.4));
    let pd = Receiver::start();
    let api = free_port();
    let config = kafka_config(&broker.addr(), "forewarn-e2e", 0, api, pd.port);
    std::fs::write(dir.join("forewarn.toml"), &config).expect("config");
    // The uninterrupted reference: the same pipeline and policy on the file.
    let reference = reference_events(&dir, "sim/telemetry.jsonl");
    let expected = expected_pages(&reference);
    assert!(!expected.is_empty(), "the fleet has failures that page");

    // Live: replay paced at 1 event-hour per second while the service runs.
    let mut svc = serve(&dir, pd.port);
    wait_for("the API", Duration::from_secs(60), || {
        http_get(api, "/healthz").is_some()
    });
    let mut replay = Command::new(forewarn_bin())
        .args([
            "replay",
            "--input",
            "sim/telemetry.jsonl",
            "--brokers",
            &broker.addr(),
            "--topic",
            "telemetry",
            "--speed",
            "3600",
        ])
        .current_dir(&dir)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn replay");
    // Kill -9 mid-stream, after a checkpoint and some alerts.
    // (Ingest runs ahead of delivery, more so on a loaded machine: wait for
    // a page to have reached PagerDuty too, not only for the sample count.)
    wait_for("a checkpoint mid-stream", Duration::from_secs(120), || {
        http_get(api, "/metrics").is_some_and(|m| {
            metric(&m, "forewarn_checkpoints_total") >= 2.0
                && metric(&m, "forewarn_samples_ingested_total") > 40_000.0
        }) && !pd.bodies("/v2/enqueue").is_empty()
    });
    svc.0.kill().expect("kill -9");
    svc.0.wait().expect("reap");
    let before_restart = pd.bodies("/v2/enqueue").len();
    // Restart once the broker has expired the killed member (session
    // timeout 10 s): tansu 0.6 was seen leaving a member that joined beside
    // the dead one with an empty assignment that no later rebalance fixed.
    std::thread::sleep(Duration::from_secs(11));
    let svc = serve(&dir, pd.port);
    assert!(replay.wait().expect("replay").success(), "replay failed");
    let total = std::fs::read_to_string(dir.join("sim/telemetry.jsonl"))
        .expect("telemetry")
        .lines()
        .count();
    // Caught up: lag zero everywhere, then a quiet spell at the receivers.
    wait_for("the service to catch up", Duration::from_secs(180), || {
        http_get(api, "/readyz").is_some()
            && http_get(api, "/metrics").is_some_and(|m| {
                m.contains("forewarn_consumer_lag{") && metric(&m, "forewarn_consumer_lag") == 0.0
            })
    });
    wait_settled(&pd.log, Duration::from_secs(60));

    let events = pd.bodies("/v2/enqueue");
    let got = incidents(&events);
    let ranked: Value =
        serde_json::from_str(&http_get(api, "/v1/gpus?sort=risk&limit=20").expect("gpus"))
            .expect("json");
    drop(svc);
    eprintln!(
        "{total} samples; {} PagerDuty events ({before_restart} before the kill); incidents {got:?}; expected {expected:?}",
        events.len()
    );
    assert!(before_restart > 0, "something was paged before the kill");
    assert!(
        !pd.bodies("/slack").is_empty(),
        "Slack got the warnings and pages"
    );
    for e in &events {
        assert_eq!(e["routing_key"], "e2e-routing-key");
    }
    assert_eq!(
        got, expected,
        "every incident of the uninterrupted run, each paged once"
    );
    // The paged GPUs lead the risk ranking.
    let paged_gpus: BTreeSet<String> = got
        .keys()
        .filter_map(|k| k.strip_prefix("forewarn/gpu/"))
        .filter_map(|k| k.split('/').next())
        .map(str::to_string)
        .collect();
    let items = ranked["items"].as_array().expect("items");
    let top: Vec<&str> = items
        .iter()
        .take(paged_gpus.len().min(3))
        .map(|i| i["gpu"].as_str().expect("gpu"))
        .collect();
    for g in &top {
        assert!(
            paged_gpus.contains(*g),
            "{g} ranks high but was never paged: {items:?}"
        );
    }
    // Benign events page nobody: every paged GPU has a labelled failure.
    let labels = std::fs::read_to_string(dir.join("sim/labels.csv")).expect("labels");
    for g in &paged_gpus {
        assert!(
            labels.contains(g.as_str()),
            "{g} was paged without a labelled failure"
        );
    }
    drop(broker);
    std::fs::remove_dir_all(&dir).ok();
}
