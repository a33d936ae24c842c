//! Tests of the stuck values (`grading::stuck`) as the thresholded forest
//! applies them: a sensor that freezes at an ordinary value is flagged once
//! its run outlasts the stream's habit, the frozen metric explains it, and
//! the runs travel in snapshots and batches.

use super::tests::{assert_batches_and_snapshots_agree, forest};
use super::*;
use crate::grading::GraderConfig;
use crate::rng::Xoshiro256PlusPlus;

fn detector(metrics: usize, stuck_run: u32) -> ThresholdedForest {
    let config = GraderConfig {
        warmup: 64,
        stuck_run,
        ..Default::default()
    };
    let shingle = if metrics == 1 { 4 } else { 1 };
    let dims = config.forest_dimensions(metrics);
    ThresholdedForest::new(forest(30, 64, dims, shingle, 11), config).expect("valid")
}

/// Noisy rows of `metrics` values; metric `frozen` holds its row-1,200
/// value over rows 1,200..1,400.
fn rows(metrics: usize, frozen: usize) -> Vec<Vec<f64>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut out: Vec<Vec<f64>> = Vec::new();
    for t in 0..1_600 {
        let mut row: Vec<f64> = (0..metrics)
            .map(|m| 20.0 * m as f64 + rng.next_gaussian())
            .collect();
        if (1_201..1_400).contains(&t) {
            row[frozen] = out[1_200][frozen];
        }
        out.push(row);
    }
    out
}

#[test]
fn a_frozen_sensor_is_flagged_once_its_run_is_news_and_held_while_frozen() {
    let data = rows(1, 0);
    let mut on = detector(1, 8);
    let mut off = detector(1, 0);
    let v: Vec<Verdict> = data.iter().map(|r| on.process(r).expect("dims")).collect();
    let w: Vec<Verdict> = data.iter().map(|r| off.process(r).expect("dims")).collect();
    // The eighth equal row: flagged at grade 1, explained by the metric.
    assert!(
        v[1_207].is_anomaly && v[1_207].grade == 1.0,
        "{:?}",
        v[1_207]
    );
    assert_eq!(v[1_207].explanation().map(|e| e.metric), Some(0));
    assert!(
        !w[1_207].is_anomaly,
        "the forest alone flagged the frozen row"
    );
    // Held as one event while the value holds, closed soon after.
    let flags = (1_208..1_400).filter(|&t| v[t].is_anomaly).count();
    assert_eq!(flags, 0, "a frozen run flagged again");
    assert!((1_208..1_400).all(|t| v[t].in_event && v[t].event_grade == 1.0));
    assert!((1_450..1_600).any(|t| !v[t].in_event));
    // Nothing else in the stream changed.
    for t in (0..1_207).chain(1_400..1_600) {
        assert_eq!(v[t].is_anomaly, w[t].is_anomaly, "row {t}");
    }
}

#[test]
fn the_frozen_metric_of_several_explains_the_row() {
    let data = rows(3, 2);
    let mut d = detector(3, 8);
    let v: Vec<Verdict> = data.iter().map(|r| d.process(r).expect("dims")).collect();
    let first = (1_200..1_400).find(|&t| v[t].is_anomaly && v[t].grade == 1.0);
    assert_eq!(first, Some(1_207));
    assert_eq!(v[1_207].explanation().map(|e| e.metric), Some(2));
}

#[test]
fn runs_travel_in_snapshots_and_batches_match_rows() {
    let data = rows(2, 1);
    let mut one = detector(2, 8);
    let mut batched = detector(2, 8);
    // Restored mid-run, the run goes on from where it was.
    let v = assert_batches_and_snapshots_agree(&mut one, &mut batched, &data[..1_300], 1_204);
    let mut bad = v.clone();
    bad["stuck"]["runs"] = serde_json::json!([{"value": 1.0, "rows": 3, "longest": 1}]);
    let e = ThresholdedForest::from_json(&bad.to_string()).expect_err("one run, two metrics");
    assert!(e.to_string().contains("stuck"), "{e}");
    // A snapshot from before the stuck values restores with them off.
    let mut old = v;
    old.as_object_mut().expect("object").remove("stuck");
    let config = old["grader"]["config"].as_object_mut().expect("config");
    config.remove("stuck_run");
    config.remove("stuck_factor");
    let o = ThresholdedForest::from_json(&old.to_string()).expect("an older snapshot");
    assert_eq!(o.grader().config().stuck_run, 0);
}
