//! The detection-quality gate: `forewarn evaluate --scenario all --reduced`
//! runs the reduced scenario suite through the backtest pipeline with the
//! default config and scores it against every issue-9 target
//! (docs/detection-quality.md). The build fails when any target is missed,
//! and this test checks the JSON summary CI reads keeps its shape.

use forewarn_tests::{forewarn_bin, scratch};
use serde_json::Value;

/// A held-out suite seed (seeds 1 and 2 were looked at while tuning).
const SEED: &str = "11";

#[test]
fn reduced_scenario_suite_meets_every_target() {
    let (summary, ok) = run_suite();
    let missed: Vec<String> = summary["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .filter(|t| t["pass"].as_bool() != Some(true))
        .map(|t| t.to_string())
        .collect();
    assert!(
        ok && summary["pass"] == Value::Bool(true) && missed.is_empty(),
        "detection-quality targets missed: {missed:?}"
    );
}

/// Runs the reduced suite; returns `summary.json` and whether the command
/// succeeded.
fn run_suite() -> (Value, bool) {
    let dir = scratch("scenarios-all");
    let args = [
        "evaluate",
        "--scenario",
        "all",
        "--reduced",
        "--seed",
        SEED,
        "--out",
        "eval",
    ];
    let out = std::process::Command::new(forewarn_bin())
        .args(args)
        .current_dir(&dir)
        .output()
        .expect("spawn forewarn");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("eval/summary.json")).unwrap_or_else(|e| {
            panic!("no summary.json ({e}); stdout:\n{stdout}\nstderr:\n{stderr}")
        }),
    )
    .expect("summary.json is JSON");
    for key in [
        "pass",
        "targets",
        "scenarios",
        "kinds",
        "suite_seed",
        "reduced",
    ] {
        assert!(summary.get(key).is_some(), "summary.json lacks `{key}`");
    }
    let targets = summary["targets"].as_array().expect("targets");
    assert!(targets.len() >= 9, "every acceptance target is reported");
    for t in targets {
        assert!(
            t["pass"].as_bool().is_some(),
            "target {} was not evaluated by the full reduced suite",
            t["name"]
        );
    }
    assert!(dir.join("eval/report.md").exists());
    assert!(dir.join("eval/lead_time.png").exists());
    let _ = std::fs::remove_dir_all(&dir);
    (summary, out.status.success())
}
