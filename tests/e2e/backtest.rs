//! `forewarn backtest` on simulated telemetry: alert events follow the
//! alert contract, nothing fires twice without a resolve, and the same input
//! gives the same alerts — also when it is the telemetry `evaluate` scored.

use std::collections::HashMap;

use forewarn_tests::{forewarn, scratch, simulate_fleet};
use serde_json::Value;

fn events(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("alerts file")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {e}: {l}")))
        .collect()
}

#[test]
fn backtest_alerts_follow_the_contract_and_are_deterministic() {
    let dir = scratch("backtest");
    simulate_fleet(&dir, 96, 8, 21, Some(0.3));
    for run in ["a.jsonl", "b.jsonl"] {
        forewarn(
            &[
                "backtest",
                "--input",
                "sim/telemetry.jsonl",
                "--alerts-out",
                run,
            ],
            &dir,
        );
    }
    let a = std::fs::read(dir.join("a.jsonl")).expect("a");
    assert_eq!(
        a,
        std::fs::read(dir.join("b.jsonl")).expect("b"),
        "same input, same alerts"
    );
    let evs = events(&dir.join("a.jsonl"));
    assert!(!evs.is_empty(), "a fleet with failures raises alerts");

    let mut firing: HashMap<String, bool> = HashMap::new();
    for e in &evs {
        for key in [
            "ts",
            "status",
            "severity",
            "kind",
            "scope",
            "labels",
            "dedup_key",
            "summary",
            "reasons",
        ] {
            assert!(e.get(key).is_some(), "missing {key}: {e}");
        }
        let scope = e["scope"].as_str().expect("scope");
        let labels = e["labels"].as_object().expect("labels");
        assert!(
            labels.contains_key(scope),
            "labels carry the scope's label: {e}"
        );
        let key = e["dedup_key"].as_str().expect("dedup_key");
        assert_eq!(
            key,
            format!(
                "forewarn/{scope}/{}/{}",
                labels[scope].as_str().expect("label"),
                e["kind"].as_str().expect("kind")
            )
        );
        assert!(
            ["critical", "warning", "info"].contains(&e["severity"].as_str().expect("severity"))
        );
        let was = firing
            .insert(key.to_string(), e["status"] == "firing")
            .unwrap_or(false);
        if e["status"] == "firing" {
            assert!(!was, "{key} fired twice without a resolve in between");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `evaluate --telemetry` writes what a scenario fed the pipeline; a
/// backtest of that file gives the scenario's alerts again, byte for byte,
/// so a user can look into an evaluation's result with the other commands:
/// Parquet for a clean run, JSON lines with the malformed messages for a
/// dirty one.
#[test]
fn evaluate_telemetry_backtests_to_the_scenarios_alerts() {
    let dir = scratch("evaluate-telemetry");
    for (scenario, format) in [("pcie", "parquet"), ("dirty_stream", "jsonl")] {
        let out = format!("eval-{scenario}");
        forewarn(
            &[
                "evaluate",
                "--scenario",
                scenario,
                "--reduced",
                "--seed",
                "5",
                "--telemetry",
                "--report-only",
                "--out",
                &out,
            ],
            &dir,
        );
        let input = format!("{out}/telemetry-{scenario}.{format}");
        let written = std::fs::read(dir.join(&input)).expect("telemetry written");
        if format == "jsonl" {
            assert!(
                written
                    .split(|b| *b == b'\n')
                    .any(|l| serde_json::from_slice::<Value>(l).is_err()),
                "the dirty scenario's malformed messages are in the file"
            );
        }
        let labels = std::fs::read_to_string(dir.join(format!("{out}/labels-{scenario}.csv")))
            .expect("labels");
        assert!(labels.lines().count() > 1, "labels written: {labels}");
        assert!(
            dir.join(format!("{out}/labels-{scenario}.parquet"))
                .is_file(),
            "labels for train written"
        );
        let backtested = format!("bt-{scenario}.jsonl");
        forewarn(
            &["backtest", "--input", &input, "--alerts-out", &backtested],
            &dir,
        );
        let scored =
            std::fs::read(dir.join(format!("{out}/alerts-{scenario}.jsonl"))).expect("alerts");
        assert!(!scored.is_empty(), "{scenario} raised alerts");
        assert!(
            scored == std::fs::read(dir.join(&backtested)).expect("backtest alerts"),
            "{scenario}: backtest of evaluate's telemetry gives evaluate's alerts"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
