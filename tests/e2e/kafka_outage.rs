//! The broker goes away mid-stream and comes back: a simulated fleet →
//! `forewarn replay` → tansu → `forewarn serve` → a PagerDuty-style
//! receiver on 127.0.0.1, with tansu killed (SIGKILL) for 30 s while the
//! stream runs and started again on the same port and storage. `/readyz`
//! must turn 503 within [`NOT_READY_WITHIN`] of the kill and 200 again once
//! the broker is back and the consumer has caught up; the service must
//! neither exit nor stall; the receiver must end with exactly the
//! incidents an uninterrupted run pages, each event sent once.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use forewarn_tests::broker::Broker;
use forewarn_tests::receiver::Receiver;
use forewarn_tests::service::{
    expected_pages, http_status, incidents, kafka_config, reference_events, serve, wait_for,
    wait_settled,
};
use forewarn_tests::{forewarn_bin, free_port, http_get, metric, scratch, simulate_fleet};

/// How long the broker stays away.
const OUTAGE: Duration = Duration::from_secs(30);
/// `/readyz` must say 503 this soon after the broker is killed.
const NOT_READY_WITHIN: Duration = Duration::from_secs(15);
/// And 200 this soon after it is back (rejoining the group, catching up
/// with what the replay buffered meanwhile).
const READY_AGAIN_WITHIN: Duration = Duration::from_secs(90);

/// Waits for `f` to hold (polling every 100 ms); how long it took.
fn time_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    wait_for(what, timeout, &mut f);
    start.elapsed()
}

fn broker_up(api: u16) -> Option<f64> {
    let m = http_get(api, "/metrics")?;
    m.contains("forewarn_kafka_broker_up")
        .then(|| metric(&m, "forewarn_kafka_broker_up"))
}

#[test]
fn a_broker_outage_turns_readiness_503_and_back_without_losing_or_repeating_a_page() {
    let test_start = Instant::now();
    let dir = scratch("kafka-outage");
    let Some(mut broker) = Broker::start(&dir.join("broker")) else {
        return;
    };
    broker.create_topic("telemetry", 2);
    simulate_fleet(&dir, 96, 12, 5, Some(0.4));
    let pd = Receiver::start();
    let api = free_port();
    // Ready within 5,000 messages: a live stream is never at lag 0 for long.
    let config = kafka_config(&broker.addr(), "forewarn-outage", 5_000, api, pd.port);
    std::fs::write(dir.join("forewarn.toml"), &config).expect("config");
    let reference = reference_events(&dir, "sim/telemetry.jsonl");
    let expected = expected_pages(&reference);
    assert!(!expected.is_empty(), "the fleet has failures that page");
    // What the receiver may get at most: each (dedup key, action) as often
    // as the uninterrupted run has it.
    let mut allowed: BTreeMap<(String, &str), u32> = BTreeMap::new();
    for e in &reference {
        if e["severity"] != "critical" {
            continue;
        }
        let action = if e["status"] == "firing" {
            "trigger"
        } else {
            "resolve"
        };
        let key = e["dedup_key"].as_str().expect("key").to_string();
        *allowed.entry((key, action)).or_default() += 1;
    }

    let mut svc = serve(&dir, pd.port);
    wait_for("the API", Duration::from_secs(60), || {
        http_get(api, "/healthz").is_some()
    });
    // 12 event-hours in 72 s; messages produced while the broker is away
    // wait in the producer (5 min timeout) and go once it is back.
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
            "600",
            "--option",
            "message.timeout.ms=300000",
        ])
        .current_dir(&dir)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn replay");
    // Mid-stream: about a third of the telemetry in, a page delivered.
    wait_for("ready mid-stream", Duration::from_secs(120), || {
        http_status(api, "/readyz") == Some(200)
            && http_get(api, "/metrics").is_some_and(|m| {
                metric(&m, "forewarn_checkpoints_total") >= 2.0
                    && metric(&m, "forewarn_samples_ingested_total") > 40_000.0
            })
            && !pd.bodies("/v2/enqueue").is_empty()
    });
    assert_eq!(broker_up(api), Some(1.0), "the broker gauge says up");
    let before = http_get(api, "/metrics").expect("metrics");
    let ingested_before = metric(&before, "forewarn_samples_ingested_total");
    let paged_before = pd.bodies("/v2/enqueue").len();

    broker.kill();
    let killed = Instant::now();
    let to_503 = time_until("/readyz 503", NOT_READY_WITHIN, || {
        http_status(api, "/readyz") == Some(503)
    });
    assert_eq!(broker_up(api), Some(0.0), "the broker gauge says down");
    // Through the outage: alive, answering, and not ready.
    while killed.elapsed() < OUTAGE {
        assert!(
            svc.0.try_wait().expect("try_wait").is_none(),
            "forewarn exited during the outage"
        );
        assert_eq!(http_status(api, "/healthz"), Some(200), "/healthz answers");
        assert_eq!(
            http_status(api, "/readyz"),
            Some(503),
            "not ready while the broker is gone"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    broker.restart();
    let to_200 = time_until("/readyz 200 again", READY_AGAIN_WITHIN, || {
        http_status(api, "/readyz") == Some(200)
    });
    assert_eq!(broker_up(api), Some(1.0), "the broker gauge says up again");

    assert!(replay.wait().expect("replay").success(), "replay failed");
    let total = std::fs::read_to_string(dir.join("sim/telemetry.jsonl"))
        .expect("telemetry")
        .lines()
        .count();
    // Not stalled: everything produced is read (lag zero everywhere) and
    // more than before the outage was ingested.
    wait_for("the service to catch up", Duration::from_secs(180), || {
        http_get(api, "/metrics").is_some_and(|m| {
            m.contains("forewarn_consumer_lag{")
                && metric(&m, "forewarn_consumer_lag") == 0.0
                && metric(&m, "forewarn_samples_ingested_total") >= total as f64
        })
    });
    wait_settled(&pd.log, Duration::from_secs(60));
    let after = http_get(api, "/metrics").expect("metrics");
    assert!(
        svc.0.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    drop(svc);

    let events = pd.bodies("/v2/enqueue");
    let got = incidents(&events);
    let mut sent: BTreeMap<(String, &str), u32> = BTreeMap::new();
    for e in &events {
        let key = e["dedup_key"].as_str().expect("dedup_key").to_string();
        let action = match e["event_action"].as_str() {
            Some("trigger") => "trigger",
            Some("resolve") => "resolve",
            other => panic!("unexpected event_action {other:?}"),
        };
        *sent.entry((key, action)).or_default() += 1;
    }
    let log = std::fs::read_to_string(dir.join("serve.log")).expect("serve log");
    for line in log.lines().filter(|l| l.contains("Kafka brokers")) {
        eprintln!("serve.log: {line}");
    }
    let lost_lines = log.matches("Kafka brokers unreachable").count();
    let back_lines = log.matches("Kafka brokers reachable again").count();
    eprintln!(
        "outage {OUTAGE:?}: /readyz 503 {to_503:.1?} after the kill, 200 {to_200:.1?} after the restart; \
         {total} samples ({ingested_before} ingested before the kill, {} at the end); \
         {} incidents expected, {} paged; {} PagerDuty events ({paged_before} before the kill); max sends per (key, action) {}; \
         log: {lost_lines} 'unreachable', {back_lines} 'reachable again'; test took {:.0?}",
        metric(&after, "forewarn_samples_ingested_total"),
        expected.len(),
        got.len(),
        events.len(),
        sent.values().max().copied().unwrap_or(0),
        test_start.elapsed(),
    );
    assert_eq!(
        got, expected,
        "every incident of the uninterrupted run, each opened once"
    );
    for (k, n) in &sent {
        let limit = allowed.get(k).copied().unwrap_or(0);
        assert!(
            *n <= limit,
            "{k:?} sent {n} times, the uninterrupted run has it {limit} times"
        );
    }
    assert_eq!(lost_lines, 1, "the outage is logged once");
    assert_eq!(back_lines, 1, "the return is logged once");
    drop(broker);
    std::fs::remove_dir_all(&dir).ok();
}
