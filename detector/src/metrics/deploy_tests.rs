//! What `deploy/` ships against what `/metrics` exports: every metric the
//! alerting rules and the Grafana dashboard name must be one forewarn
//! writes (a renamed metric would silently blank a panel or never fire a
//! rule), and the dashboard must have the shape Grafana loads. PromQL
//! syntax and the rules' behaviour are checked by promtool
//! (`scripts/deploy-check.sh`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::*;

fn repo_file(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every family a fully populated page has (histograms with their
/// `_bucket`, `_sum` and `_count` series).
fn exported() -> BTreeSet<String> {
    let m = Metrics::default();
    m.set_lag("telemetry/0".into(), 3);
    m.set_kafka_broker_up(true);
    m.batch_taken(1_796_000_000_000, Some(1_795_999_000_000));
    m.decode_error("json");
    m.rejected("implausible_time");
    m.paused("pipeline_full");
    m.checkpoint_written(10, 0.1);
    m.coverage.observe(
        &[features::Sample::new("GPU-a", 0).with(features::Field::GpuTemp, 50.0)],
        Some(0),
    );
    let dir = std::env::temp_dir().join(format!("forewarn-deploy-{}", std::process::id()));
    let outbox = alerts::Outbox::open(&dir, &[("file".into(), false)]).expect("outbox");
    let receivers = vec!["file".to_string()];
    let page = m.render(
        ModelInfo {
            version: "builtin",
            reloads: 0,
            refused: 0,
        },
        Some(SinkInfo {
            outbox: &outbox,
            receivers: &receivers,
        }),
        &[("source".into(), 1)],
        &FleetInfo::default(),
    );
    drop(outbox);
    let _ = std::fs::remove_dir_all(&dir);
    let mut names = BTreeSet::new();
    for line in page.lines() {
        let mut w = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (w.next(), w.next(), w.next(), w.next())
        {
            names.insert(name.to_string());
            if kind == "histogram" {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    names
}

/// The metric names a file mentions: words starting `forewarn_` or
/// `process_`.
fn mentioned(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
        .filter(|w| w.starts_with("forewarn_") || w.starts_with("process_"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_metric_the_rules_and_the_dashboard_name_is_exported() {
    let have = exported();
    for name in [
        operator::BUILD_INFO,
        operator::GPUS_IN_STATE,
        operator::ALERTS_ACTIVE,
        operator::LAST_INGEST,
        operator::EVENT_TIME,
        operator::SINK_OLDEST,
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
    ] {
        assert!(have.contains(name), "{name} missing from /metrics");
    }
    for file in [
        "deploy/prometheus/forewarn-rules.yml",
        "deploy/prometheus/forewarn-rules.test.yml",
        "deploy/grafana/forewarn.json",
    ] {
        let names = mentioned(&repo_file(file));
        assert!(!names.is_empty(), "{file} names no metric");
        let unknown: Vec<_> = names.difference(&have).collect();
        assert!(
            unknown.is_empty(),
            "{file} names metrics forewarn does not export: {unknown:?}"
        );
    }
}

#[test]
fn the_dashboard_has_the_shape_grafana_loads() {
    let d: serde_json::Value = serde_json::from_str(&repo_file("deploy/grafana/forewarn.json"))
        .expect("dashboard is JSON");
    for key in ["uid", "title"] {
        assert!(d[key].as_str().is_some_and(|s| !s.is_empty()), "{key}");
    }
    assert!(d["schemaVersion"].as_u64().is_some_and(|v| v >= 36));
    let vars: Vec<&str> = d["templating"]["list"]
        .as_array()
        .expect("templating.list")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(vars, ["datasource", "instance"]);
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10);
    let mut ids = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().expect("panel title");
        assert!(
            ids.insert(p["id"].as_u64().expect("panel id")),
            "duplicate id at {title}"
        );
        assert!(
            ["timeseries", "stat", "gauge", "table"].contains(&p["type"].as_str().unwrap_or("")),
            "{title}: type"
        );
        let g = &p["gridPos"];
        let (x, w, h) = (g["x"].as_u64(), g["w"].as_u64(), g["h"].as_u64());
        assert!(
            matches!((x, w, h), (Some(x), Some(w), Some(h)) if x + w <= 24 && w > 0 && h > 0)
                && g["y"].as_u64().is_some(),
            "{title}: gridPos {g}"
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            let expr = t["expr"].as_str().expect("expr");
            assert!(
                expr.contains("$instance") || expr.starts_with("time()"),
                "{title}: {expr} ignores the instance picker"
            );
            assert!(t["refId"].as_str().is_some(), "{title}: refId");
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
        }
    }
}
