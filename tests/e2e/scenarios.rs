//! The detection-quality gate: `forewarn evaluate --scenario all --reduced`
//! runs the reduced scenario suite through the backtest pipeline with the
//! default config and scores it against every issue-9 target
//! (docs/detection-quality.md), and this test checks the JSON summary CI
//! reads keeps its shape. The build fails when a target in [`HELD`]
//! is missed: those hold today, so a change that breaks one is caught. The
//! targets not yet met are printed, not enforced; the ignored test demands
//! all of them.

use forewarn_tests::{forewarn_bin, scratch};
use serde_json::Value;

/// A held-out suite seed (seeds 1 and 2 were looked at while tuning).
const SEED: &str = "11";

/// Targets the default config meets today on the held-out seed.
const HELD: [&str; 8] = [
    "false_pages_per_1k_gpu_days",
    "early_warning_1h",
    "detected_by_failure_plus_5m",
    "hbm_median_lead_h",
    "straggler_within_15m",
    "straggler_precision",
    "benign_pages",
    "newcomer_delay_vs_incumbent_min",
];

#[test]
fn reduced_scenario_suite_holds_the_met_targets() {
    let (summary, _) = run_suite(&["--report-only"]);
    let mut missed_held = Vec::new();
    for t in summary["targets"].as_array().expect("targets") {
        let name = t["name"].as_str().unwrap_or("");
        let pass = t["pass"].as_bool() == Some(true);
        if HELD.contains(&name) {
            if !pass {
                missed_held.push(t.to_string());
            }
        } else if !pass {
            eprintln!("not yet met (not enforced): {t}");
        }
    }
    assert!(
        missed_held.is_empty(),
        "detection-quality regressions: {missed_held:?}"
    );
}

/// Runs the reduced suite; returns `summary.json` and whether the command
/// succeeded.
fn run_suite(extra: &[&str]) -> (Value, bool) {
    let dir = scratch(if extra.is_empty() {
        "scenarios-all"
    } else {
        "scenarios-held"
    });
    let mut args = vec![
        "evaluate",
        "--scenario",
        "all",
        "--reduced",
        "--seed",
        SEED,
        "--out",
        "eval",
    ];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(forewarn_bin())
        .args(&args)
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

#[test]
#[ignore = "one target is still missed (rack_incident_one_page): docs/detection-quality.md; \
            run with --ignored"]
fn reduced_scenario_suite_meets_every_target() {
    let (summary, ok) = run_suite(&[]);
    assert!(
        ok && summary["pass"] == Value::Bool(true),
        "a detection-quality target was missed: {}",
        summary["targets"]
    );
}
