//! The detection-quality gate: `forewarn evaluate --scenario all --reduced`
//! runs the reduced scenario suite through the backtest pipeline with the
//! default config and scores it against every issue-9 target
//! (docs/detection-quality.md). The build fails when any target is missed,
//! and this test checks the JSON summary CI reads keeps its shape.

use forewarn_tests::{forewarn, forewarn_bin, scratch};
use serde_json::Value;

/// A held-out suite seed (seeds 1 and 2 were looked at while tuning).
const SEED: &str = "11";

#[test]
fn reduced_scenario_suite_meets_every_target() {
    meets_every_target(&[]);
}

/// The same suite on telemetry with no job label (optional in the input
/// contract; a dcgm-exporter without a scheduler mapping has none): GPUs
/// then have no job peers, and phases come from load alone. Without a job
/// label a driver reload once paged a rack (an idle phase's first offset
/// carried by a SKU slope learnt only under load).
#[test]
fn reduced_scenario_suite_without_job_labels_meets_every_target() {
    meets_every_target(&["--no-job-labels"]);
}

/// The same suite with job labels that name no workload (`job-…`, as
/// Slurm job ids and many pod names): phases come from load alone while
/// the job peers remain. With such labels checkpoint dips once flapped
/// every training GPU's phase and doubled the false warnings.
#[test]
fn reduced_scenario_suite_with_opaque_job_names_meets_every_target() {
    meets_every_target(&["--opaque-job-names"]);
}

/// The same suite sampled every 10 s instead of 30 s (a site's own
/// exporter cadence): counter rates taken over one 10 s interval once read
/// a single error as 360/h, and this suite paged a benign event.
#[test]
fn reduced_scenario_suite_at_a_ten_second_cadence_meets_every_target() {
    meets_every_target(&["--interval", "10"]);
}

fn meets_every_target(extra: &[&str]) {
    let (summary, ok) = run_suite(extra);
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

/// Runs the reduced suite with `extra` flags; returns `summary.json` and
/// whether the command succeeded.
fn run_suite(extra: &[&str]) -> (Value, bool) {
    let dir = scratch(&format!("scenarios-all{}", extra.concat()));
    let base = [
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
        .args(base.iter().chain(extra))
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

/// The randomised-precursor family (issue #29) at full size beside the
/// hindsight CUSUM reference (`evaluation::reference`, thresholds set with
/// hindsight just above every healthy GPU): forewarn, whose thresholds come
/// from its budgets, must reach 90 % of the reference's median lead and
/// warn ≥ 1 h ahead on 90 % of the precursor failures the reference warns
/// ≥ 1 h ahead, within the page and warning budgets, paging nothing
/// benign and flagging every straggler within 15 min. Seed 2 is a tuning
/// seed (seeds from 100 are held back for judging): this guards against
/// regressions, it does not measure generalisation.
#[test]
fn randomised_precursors_keep_up_with_the_hindsight_reference() {
    use evaluation::reference::{self, Settings, table};
    const SEED: u64 = 2;
    let dir = scratch("scenarios-random-precursors");
    forewarn(
        &[
            "evaluate",
            "--scenario",
            "random_precursors",
            "--report-only",
            "--seed",
            &SEED.to_string(),
            "--out",
            "eval",
        ],
        &dir,
    );
    let ours = table::read_outcomes(&dir.join("eval/outcomes-random_precursors.json"))
        .expect("forewarn's outcomes");
    let sc = datasets::scenarios::scenario("random_precursors", SEED, false).expect("scenario");
    let r = reference::run(&sc.config, &Settings::default()).expect("reference");
    let theirs: Vec<table::View> = r.score.failures.iter().map(table::View::from).collect();
    let v = table::Versus::new(&theirs, &ours);
    assert!(v.visible >= 20, "the reference sees most precursors: {v:?}");
    assert!(
        v.lead_ratio().is_some_and(|x| x >= 0.9),
        "median lead: {v:?}"
    );
    assert!(v.share_1h().is_some_and(|x| x >= 0.9), "≥ 1 h ahead: {v:?}");

    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("eval/summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    let row = &summary["scenarios"][0];
    assert_eq!(row["name"], "random_precursors");
    let rate = |k: &str| row[k].as_f64().unwrap_or(f64::INFINITY);
    assert!(rate("false_pages_per_1k_gpu_days") <= 1.0, "{row}");
    assert!(rate("false_warnings_per_1k_gpu_days") <= 10.0, "{row}");
    assert!(
        row["benign_pages"]
            .as_object()
            .is_some_and(|m| m.is_empty()),
        "pages put down to benign events: {row}"
    );
    let stragglers = summary["straggler_detect_min"]
        .as_array()
        .expect("straggler_detect_min");
    assert!(!stragglers.is_empty());
    for m in stragglers {
        assert!(m.as_f64().is_some_and(|m| m <= 15.0), "straggler: {m}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
