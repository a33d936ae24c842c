//! Prometheus remote-write end to end: a simulated fleet served as a
//! dcgm-exporter `/metrics` (`forewarn simulate --serve-metrics`, no
//! timestamps) → a real Prometheus (Debian's package:
//! `scripts/prometheus.sh install`) scraping it every second and
//! remote-writing → `forewarn serve` with `[source] type = "remote_write"`
//! → PagerDuty and Slack receivers on 127.0.0.1. The failing GPUs must be
//! found as from Kafka (`kafka.rs`): pages only for GPUs with a labelled
//! failure, each incident paged once, the same GPUs as a backtest of the
//! same fleet's file pages.
//!
//! Prometheus stamps samples with its own clock and its remote-write sends
//! nothing older than its own start, so event time runs at wall speed: the
//! fleet runs 30× real time (one 30 s tick per 1 s scrape) and is short and
//! failure-dense (400 GPUs, 48 minutes, 4 labelled failures), which pages
//! through hard failures and lost GPUs rather than hours-long trends. The
//! scrape timing makes the telemetry the file's give or take a tick, so
//! pages are compared as sets of GPUs.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use forewarn_tests::prometheus::{
    Fleet, Pace, exporter, prometheus, prometheus_bin, serve_with_token, simulate_files,
};
use forewarn_tests::receiver::Receiver;
use forewarn_tests::service::{
    alert_policy, expected_pages, incidents, reference_events, wait_for, wait_settled,
};
use forewarn_tests::{free_port, http_get, metric, scratch};
use serde_json::Value;

/// The GPU of a `forewarn/gpu/<uuid>/<kind>` dedup key.
fn gpu_of(key: &str) -> Option<String> {
    key.strip_prefix("forewarn/gpu/")?
        .split('/')
        .next()
        .map(str::to_string)
}

#[test]
fn prometheus_remote_write_finds_the_failing_gpus() {
    prometheus_bin();
    let dir = scratch("remote-write");
    let fleet = Fleet {
        gpus: 400,
        hours: 0.8,
        seed: 5,
        failure_rate: 1.0,
    };
    // Two seconds per tick against one-second scrapes: every tick is
    // scraped at least once. (At 30×, a tick per scrape interval, a late
    // scrape could skip the one tick that carries the fleet's only page,
    // an XID 79 the tick before its GPU falls silent: seen once in six
    // CI runs, 0 pages.)
    let speed = 15.0;
    // The same fleet as a file: its labels, and what a backtest pages.
    simulate_files(&dir, &fleet);
    let pd = Receiver::start();
    let api = free_port();
    let config = format!(
        "[source]\ntype = \"remote_write\"\n\n[features]\nsilence = \"45s\"\n\n[api]\nlisten = \"127.0.0.1:{api}\"\n{}",
        alert_policy(pd.port, "outbox")
    );
    std::fs::write(dir.join("forewarn.toml"), &config).expect("config");
    let reference_gpus: BTreeSet<String> =
        expected_pages(&reference_events(&dir, "sim/telemetry.jsonl"))
            .keys()
            .filter_map(|k| gpu_of(k))
            .collect();

    let token = "e2e-remote-write-token";
    let _svc = serve_with_token(&dir, pd.port, token);
    wait_for("the API", Duration::from_secs(60), || {
        http_get(api, "/healthz").is_some()
    });
    let (exp_port, prom_port) = (free_port(), free_port());
    let started = Instant::now();
    let _exporter = exporter(&dir, exp_port, &fleet, Pace::Speed(speed));
    wait_for("the exporter", Duration::from_secs(30), || {
        http_get(exp_port, "/metrics").is_some_and(|m| m.contains("DCGM_FI_DEV_GPU_TEMP{"))
    });
    let _prom = prometheus(&dir, prom_port, &[exp_port], "1s", api, token);
    wait_for("remote-written samples", Duration::from_secs(60), || {
        http_get(api, "/metrics")
            .is_some_and(|m| metric(&m, "forewarn_samples_ingested_total") > 0.0)
    });
    // The whole simulated run, then the silence that makes the last lost
    // GPUs lost (the exporter keeps serving the last tick), the assembly
    // wait, and a quiet spell.
    let run = Duration::from_secs_f64(fleet.hours * 3600.0 / speed);
    std::thread::sleep(run.saturating_sub(started.elapsed()) + Duration::from_secs(75));
    wait_settled(&pd.log, Duration::from_secs(60));

    let m = http_get(api, "/metrics").expect("metrics");
    let events = pd.bodies("/v2/enqueue");
    let got = incidents(&events);
    let paged: BTreeSet<String> = got.keys().filter_map(|k| gpu_of(k)).collect();
    let labels = std::fs::read_to_string(dir.join("sim/labels.csv")).expect("labels");
    let failed: BTreeSet<String> = labels
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').next())
        .map(str::to_string)
        .collect();
    let ranked: Value =
        serde_json::from_str(&http_get(api, "/v1/gpus?sort=risk&limit=20").expect("gpus"))
            .expect("json");
    eprintln!(
        "after {:.0} s: {} samples ingested from {} requests; {} PagerDuty events; paged {paged:?}; labelled failures {failed:?}; the file's backtest pages {reference_gpus:?}",
        started.elapsed().as_secs_f64(),
        metric(&m, "forewarn_samples_ingested_total"),
        metric(&m, "forewarn_remote_write_requests_total"),
        events.len(),
    );
    assert_eq!(
        metric(&m, "forewarn_gpus"),
        f64::from(fleet.gpus),
        "every GPU arrived"
    );
    assert!(
        !m.contains("forewarn_remote_write_requests_total{code=\"400\"}"),
        "Prometheus's requests all decode: {m}"
    );
    assert!(!paged.is_empty(), "the failing GPUs page");
    for g in &paged {
        assert!(
            failed.contains(g),
            "{g} was paged without a labelled failure"
        );
    }
    for (key, n) in &got {
        assert_eq!(*n, 1, "{key} paged once");
    }
    assert_eq!(
        paged, reference_gpus,
        "the GPUs a backtest of the same fleet's file pages"
    );
    // The paged GPUs lead the risk ranking.
    let items = ranked["items"].as_array().expect("items");
    let top = items
        .iter()
        .take(paged.len().min(3))
        .map(|i| i["gpu"].as_str().expect("gpu").to_string());
    for g in top {
        assert!(
            failed.contains(&g),
            "{g} ranks high without a labelled failure"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
