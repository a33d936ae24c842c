//! Every sink against a real HTTP receiver on 127.0.0.1 (see
//! `common/mod.rs`): payloads checked against `shared/reference/`, answers
//! 202 / 200, 400, 429 with Retry-After, 500 and a hang past the timeout.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use alerts::{AlertEvent, AlertSystem, RawConfig, Reason, Scope, Severity, Status};
use common::{Answer, Receiver, temp_dir, wait_until};
use tokio_util::sync::CancellationToken;

const T0: i64 = 1_800_000_000_000;

fn system(toml_text: &str, dir: &std::path::Path) -> AlertSystem {
    let cfg = RawConfig::from_toml(toml_text).unwrap().validate().unwrap();
    AlertSystem::open_in(&cfg, dir).unwrap()
}

fn retry() -> &'static str {
    "[outbox]\ninitial_backoff = \"50ms\"\nmax_backoff = \"200ms\"\nseed = 1\n"
}

fn ev(gpu: &str, status: Status, ts: i64) -> AlertEvent {
    let labels = [
        ("gpu", gpu),
        ("host", "node-0042"),
        ("rack", "r07"),
        ("cluster", "east-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    AlertEvent {
        ts,
        status,
        severity: Severity::Critical,
        kind: "hbm_ecc_trend".into(),
        scope: Scope::Gpu,
        labels,
        dedup_key: alerts::dedup_key(Scope::Gpu, gpu, "hbm_ecc_trend"),
        summary: format!(
            "{gpu} on node-0042: correctable ECC rate 40/h {}",
            "x".repeat(2000)
        ),
        risk: 0.93,
        eta_hours: Some(9.0),
        reasons: vec![Reason {
            signal: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL".into(),
            detail: "rate 40/h vs peer median 3.1/h".into(),
        }],
    }
}

fn route(receiver: &str) -> String {
    format!(
        "[route]\nreceiver = \"{receiver}\"\ngroup_by = [\"...\"]\ngroup_wait = \"0s\"\ngroup_interval = \"1s\"\nrepeat_interval = \"4h\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagerduty_triggers_and_resolves_through_500_and_429() {
    let rx = Receiver::start(
        common::pagerduty,
        202,
        r#"{"status":"success"}"#,
        vec![Answer::Status(500), Answer::RetryAfter(1)],
    )
    .await;
    let dir = temp_dir("pd");
    std::fs::write(dir.join("pd.key"), "R0UT1NGKEY000000000000000000000\n").unwrap();
    let toml_text = format!(
        "{}{}[[receivers]]\ntype = \"pagerduty\"\nname = \"pd\"\nurl = \"{}/v2/enqueue\"\nrouting_key = {{ file = \"{}\" }}\nlink_template = \"https://forewarn.example/v1/gpus/{{gpu}}\"\nseverity_map = {{ critical = \"error\" }}\n",
        route("pd"),
        retry(),
        rx.url,
        dir.join("pd.key").display()
    );
    let mut sys = system(&toml_text, &dir.join("outbox"));
    let shutdown = CancellationToken::new();
    let workers = sys.spawn_delivery(&shutdown);
    let start = Instant::now();
    sys.router.push(&[ev("GPU-1", Status::Firing, T0)]);
    sys.router.flush(T0).unwrap();
    sys.router
        .push(&[ev("GPU-1", Status::Resolved, T0 + 2_000)]);
    sys.router.flush(T0 + 2_000).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || rx.accepted().len() == 2).await,
        "{:?}",
        rx.invalid()
    );
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    let got = rx.accepted();
    assert_eq!(got[0]["event_action"], "trigger");
    assert_eq!(got[0]["dedup_key"], "forewarn/gpu/GPU-1/hbm_ecc_trend");
    assert_eq!(got[0]["routing_key"], "R0UT1NGKEY000000000000000000000");
    assert_eq!(got[0]["payload"]["severity"], "error", "severity mapping");
    assert_eq!(
        got[0]["payload"]["summary"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        1024
    );
    assert_eq!(got[0]["payload"]["source"], "node-0042");
    assert_eq!(
        got[0]["payload"]["custom_details"]["reasons"][0]["signal"],
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
    );
    assert_eq!(
        got[0]["links"][0]["href"],
        "https://forewarn.example/v1/gpus/GPU-1"
    );
    assert_eq!(
        (
            got[1]["event_action"].as_str(),
            got[1]["dedup_key"].as_str()
        ),
        (Some("resolve"), got[0]["dedup_key"].as_str())
    );
    let stats = sys.outbox.stats("pd").unwrap();
    assert_eq!(stats.retries.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_eq!(sys.outbox.pending("pd"), 0);
    shutdown.cancel();
    for w in workers {
        w.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagerduty_400_is_dead_lettered_with_the_answer_and_no_secret() {
    let rx = Receiver::start(common::pagerduty, 202, "{}", vec![Answer::Echo400]).await;
    let dir = temp_dir("pd400");
    std::fs::write(dir.join("pd.key"), "SECRETKEY0000000000000000000000").unwrap();
    let toml_text = format!(
        "{}{}[[receivers]]\ntype = \"pagerduty\"\nname = \"pd\"\nurl = \"{}\"\nrouting_key = {{ file = \"{}\" }}\n",
        route("pd"),
        retry(),
        rx.url,
        dir.join("pd.key").display()
    );
    let mut sys = system(&toml_text, &dir.join("outbox"));
    let shutdown = CancellationToken::new();
    let _workers = sys.spawn_delivery(&shutdown);
    sys.router.push(&[
        ev("GPU-1", Status::Firing, T0),
        ev("GPU-2", Status::Firing, T0),
    ]);
    sys.router.flush(T0).unwrap();
    assert!(wait_until(Duration::from_secs(5), || rx.accepted().len() == 1).await);
    let dead = sys.outbox.dead_letters("pd").unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["status"], 400);
    let answer = dead[0]["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("rejected:") && answer.contains("<redacted>"),
        "{answer}"
    );
    assert!(
        !dead.iter().any(|d| d.to_string().contains("SECRETKEY")),
        "no routing key in dead letters"
    );
    assert_eq!(
        rx.accepted()[0]["dedup_key"],
        "forewarn/gpu/GPU-2/hbm_ecc_trend",
        "queue moves on"
    );
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_is_rate_limited_groups_storms_and_honours_429() {
    let rx = Receiver::start(common::slack, 200, "ok", vec![Answer::RetryAfter(1)]).await;
    let dir = temp_dir("slack");
    std::fs::write(dir.join("hook"), format!("{}/services/T0/B0/XXXX", rx.url)).unwrap();
    let toml_text = format!(
        "{}{}[[receivers]]\ntype = \"slack\"\nname = \"slack\"\nwebhook_url = {{ file = \"{}\" }}\nmin_interval = \"1s\"\nmax_batch = 10\n",
        route("slack"),
        retry(),
        dir.join("hook").display()
    );
    let mut sys = system(&toml_text, &dir.join("outbox"));
    let shutdown = CancellationToken::new();
    let _workers = sys.spawn_delivery(&shutdown);
    let storm: Vec<AlertEvent> = (0..25)
        .map(|i| ev(&format!("GPU-{i}"), Status::Firing, T0))
        .collect();
    sys.router.push(&storm);
    assert_eq!(sys.router.flush(T0).unwrap(), 25);
    let events = |rx: &Receiver| {
        rx.accepted()
            .iter()
            .map(|m| m["blocks"].as_array().unwrap().len() - 1)
            .sum::<usize>()
    };
    assert!(
        wait_until(Duration::from_secs(15), || events(&rx) == 25).await,
        "{:?}",
        rx.invalid()
    );
    let at = rx.accepted_at();
    assert!(
        at.len() <= 3,
        "25 notifications grouped into {} messages",
        at.len()
    );
    for w in at.windows(2) {
        assert!(w[1] - w[0] >= Duration::from_millis(990), "<= 1 message/s");
    }
    let first = &rx.accepted()[0];
    assert!(
        first["text"].as_str().unwrap().contains("10 firing"),
        "{first}"
    );
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_receives_firing_resends_and_resolve() {
    let rx = Receiver::start(common::alertmanager, 200, "", vec![]).await;
    let dir = temp_dir("am");
    let toml_text = format!(
        "{}{}[[receivers]]\ntype = \"alertmanager\"\nname = \"am\"\nurl = {{ value = \"{}\" }}\nresend_interval = \"1m\"\nlink_template = \"https://forewarn.example/v1/gpus/{{gpu}}\"\n",
        route("am"),
        retry(),
        rx.url
    );
    let mut sys = system(&toml_text, &dir.join("outbox"));
    let shutdown = CancellationToken::new();
    let _workers = sys.spawn_delivery(&shutdown);
    sys.router.push(&[ev("GPU-7", Status::Firing, T0)]);
    sys.router.flush(T0).unwrap();
    sys.router.flush(T0 + 60_000).unwrap();
    sys.router.flush(T0 + 120_000).unwrap();
    sys.router
        .push(&[ev("GPU-7", Status::Resolved, T0 + 150_000)]);
    sys.router.flush(T0 + 150_000).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || rx.accepted().len() == 4).await,
        "{:?}",
        rx.invalid()
    );
    let got = rx.accepted();
    for a in &got[..3] {
        assert_eq!(a[0]["labels"]["alertname"], "hbm_ecc_trend");
        assert_eq!(
            a[0]["labels"]["dedup_key"],
            "forewarn/gpu/GPU-7/hbm_ecc_trend"
        );
        assert_eq!(a[0]["startsAt"], "2027-01-15T08:00:00Z");
        assert_eq!(
            a[0]["generatorURL"],
            "https://forewarn.example/v1/gpus/GPU-7"
        );
    }
    assert_eq!(
        got[2][0]["endsAt"], "2027-01-15T08:06:00Z",
        "endsAt = last send + 4 resends"
    );
    assert_eq!(
        got[3][0]["endsAt"], "2027-01-15T08:02:30Z",
        "resolve ends at its event time"
    );
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_retries_a_timeout_and_posts_the_contract() {
    let rx = Receiver::start(
        common::contract,
        200,
        "",
        vec![Answer::Hang(Duration::from_millis(800))],
    )
    .await;
    let dir = temp_dir("hook");
    let toml_text = format!(
        "{}{}[[receivers]]\ntype = \"webhook\"\nname = \"hook\"\nurl = {{ value = \"{}/alerts\" }}\ntimeout = \"200ms\"\n",
        route("hook"),
        retry(),
        rx.url
    );
    let mut sys = system(&toml_text, &dir.join("outbox"));
    let shutdown = CancellationToken::new();
    let _workers = sys.spawn_delivery(&shutdown);
    let fired = ev("GPU-9", Status::Firing, T0);
    sys.router.push(std::slice::from_ref(&fired));
    sys.router.flush(T0).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || sys.outbox.pending("hook") == 0
            && !rx.accepted().is_empty())
        .await
    );
    let got: Vec<AlertEvent> = rx
        .accepted()
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect();
    assert_eq!(got.last(), Some(&fired), "the contract, unchanged");
    assert!(
        sys.outbox
            .stats("hook")
            .unwrap()
            .retries
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_sink_writes_contract_lines() {
    let dir = temp_dir("file");
    let path = dir.join("alerts.jsonl");
    let toml_text = format!(
        "{}{}[[receivers]]\ntype = \"file\"\nname = \"file\"\npath = \"{}\"\n",
        route("file"),
        retry(),
        path.display()
    );
    let mut sys = system(&toml_text, &dir.join("outbox"));
    let shutdown = CancellationToken::new();
    let _workers = sys.spawn_delivery(&shutdown);
    let events = [
        ev("GPU-1", Status::Firing, T0),
        ev("GPU-1", Status::Resolved, T0 + 5_000),
    ];
    sys.router.push(&events[..1]);
    sys.router.flush(T0).unwrap();
    sys.router.push(&events[1..]);
    sys.router.flush(T0 + 5_000).unwrap();
    assert!(wait_until(Duration::from_secs(5), || sys.outbox.pending("file") == 0).await);
    assert!(
        wait_until(Duration::from_secs(5), || std::fs::read_to_string(&path)
            .is_ok_and(|t| t.lines().count() == 2))
        .await
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<AlertEvent> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, events);
    assert!(text.starts_with("{\"ts\":\"2027-01-15T08:00:00Z\",\"status\":\"firing\""));
    shutdown.cancel();
}
