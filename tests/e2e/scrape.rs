//! Scrape mode end to end: `forewarn serve` with `[source] type =
//! "scrape"` scraping two simulated dcgm-exporter endpoints (`forewarn
//! simulate --serve-metrics`), one of them from a `file_sd` file. One
//! endpoint is killed mid-run: its target goes down in `/metrics`, and its
//! GPUs go silent exactly as those of a host that stops reporting do
//! (state `silent`, "its whole host is quiet": watched, not paged — a host
//! outage or maintenance, not GPU failures) while the other's keep
//! reporting. Nothing is paged at all (the fleets have no failures).

use std::collections::BTreeMap;
use std::time::Duration;

use forewarn_tests::prometheus::{Fleet, Pace, exporter};
use forewarn_tests::receiver::Receiver;
use forewarn_tests::service::{alert_policy, serve, wait_for};
use forewarn_tests::{free_port, http_get, metric, scratch};
use serde_json::Value;

fn up(m: &str, target: &str) -> Option<f64> {
    let prefix = format!("forewarn_scrape_target_up{{target=\"{target}\"}} ");
    m.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// GPU → state from `/v1/gpus`.
fn states(api: u16) -> BTreeMap<String, String> {
    let body = http_get(api, "/v1/gpus?limit=1000").unwrap_or_default();
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| {
                    Some((
                        i["gpu"].as_str()?.to_string(),
                        i["state"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn scrape_mode_follows_targets_and_a_dead_one_goes_silent() {
    let dir = scratch("scrape");
    let (a, b) = (free_port(), free_port());
    // Two "hosts": different seeds, so different GPUs.
    let fleet = |seed| Fleet {
        gpus: 16,
        hours: 24.0,
        seed,
        failure_rate: 0.0,
    };
    let mut exp_a = exporter(&dir, a, &fleet(11), Pace::Speed(30.0));
    let _exp_b = exporter(&dir, b, &fleet(12), Pace::Speed(30.0));
    let (ta, tb) = (format!("127.0.0.1:{a}"), format!("127.0.0.1:{b}"));
    std::fs::write(
        dir.join("targets.json"),
        format!(r#"[{{"targets": ["{tb}"], "labels": {{"cluster": "sd"}}}}]"#),
    )
    .expect("file_sd");
    let pd = Receiver::start();
    let api = free_port();
    let config = format!(
        "[source]\ntype = \"scrape\"\ntargets = [\"{ta}\"]\nfile_sd = \"targets.json\"\ninterval = \"1s\"\ntimeout = \"500ms\"\n\n[features]\nsilence = \"20s\"\n\n[api]\nlisten = \"127.0.0.1:{api}\"\n{}",
        alert_policy(pd.port, "outbox")
    );
    std::fs::write(dir.join("forewarn.toml"), &config).expect("config");
    let _svc = serve(&dir, pd.port);
    wait_for(
        "both targets up, every GPU known",
        Duration::from_secs(60),
        || {
            http_get(api, "/metrics").is_some_and(|m| {
                up(&m, &ta) == Some(1.0)
                    && up(&m, &tb) == Some(1.0)
                    && metric(&m, "forewarn_gpus") == 32.0
            })
        },
    );
    let before = states(api);
    let gpus_a: Vec<String> = http_get(a, "/metrics")
        .expect("exporter a")
        .lines()
        .filter(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{"))
        .filter_map(|l| {
            l.split("UUID=\"")
                .nth(1)?
                .split('"')
                .next()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(gpus_a.len(), 16);

    exp_a.kill();
    wait_for("target a down", Duration::from_secs(20), || {
        http_get(api, "/metrics")
            .is_some_and(|m| up(&m, &ta) == Some(0.0) && up(&m, &tb) == Some(1.0))
    });
    wait_for("a's GPUs silent", Duration::from_secs(120), || {
        let s = states(api);
        gpus_a
            .iter()
            .all(|g| s.get(g).is_some_and(|st| st == "silent"))
    });
    // Settle, then: b's GPUs still report, a's each warned about once.
    std::thread::sleep(Duration::from_secs(10));
    let after = states(api);
    let m = http_get(api, "/metrics").expect("metrics");
    let detail = http_get(api, &format!("/v1/gpus/{}", gpus_a[0])).unwrap_or_default();
    eprintln!(
        "before the kill {} GPUs; after: {} silent; target a failures {}",
        before.len(),
        after.values().filter(|s| *s == "silent").count(),
        metric(
            &m,
            &format!("forewarn_scrape_failures_total{{target=\"{ta}\"}}")
        ),
    );
    let silent: Vec<&String> = after
        .iter()
        .filter(|(_, s)| *s == "silent")
        .map(|(g, _)| g)
        .collect();
    assert_eq!(silent.len(), 16, "only a's GPUs are silent: {after:?}");
    for g in &gpus_a {
        assert_eq!(after.get(g).map(String::as_str), Some("silent"), "{g}");
    }
    assert!(
        detail.contains("whole host is quiet"),
        "a dead target reads as a quiet host: {detail}"
    );
    assert!(
        m.contains("forewarn_scrape_duration_seconds{target="),
        "{m}"
    );
    assert!(m.contains("forewarn_scrape_samples{target="), "{m}");
    let pages = pd.bodies("/v2/enqueue");
    let mut keys = BTreeMap::<String, u32>::new();
    for p in pages.iter().filter(|p| p["event_action"] == "trigger") {
        *keys
            .entry(p["dedup_key"].as_str().unwrap_or("").to_string())
            .or_default() += 1;
    }
    assert!(keys.is_empty(), "a quiet host pages nobody: {keys:?}");
    assert!(pd.bodies("/slack").is_empty(), "nor notifies Slack");
    std::fs::remove_dir_all(&dir).ok();
}
