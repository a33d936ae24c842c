//! Tests of the known states (`grading::known`) as the thresholded forest
//! applies them: a flat stream's return to its value ends the event its
//! first other value opened, an event on a stuck value stays one event, and
//! the memory travels in snapshots and batches.

use super::tests::{assert_batches_and_snapshots_agree, forest};
use super::*;
use crate::grading::GraderConfig;

fn detector(known_horizon: u64) -> ThresholdedForest {
    let config = GraderConfig {
        warmup: 64,
        known_horizon,
        ..Default::default()
    };
    ThresholdedForest::new(forest(30, 64, 2, 4, 11), config).expect("valid")
}

/// A health check at 1 with one 0 at row 1,000 and flapping (0 and 1 by
/// turns, two rows each) from row 1,600 for 60 rows.
fn health(t: usize) -> f64 {
    if t == 1_000 || ((1_600..1_660).contains(&t) && (t / 2).is_multiple_of(2)) {
        0.0
    } else {
        1.0
    }
}

fn run(d: &mut ThresholdedForest, rows: std::ops::Range<usize>) -> Vec<Verdict> {
    rows.map(|t| d.process(&[health(t)]).expect("dims"))
        .collect()
}

#[test]
fn a_flat_stream_back_at_its_value_ends_the_event_and_the_flapping_is_flagged() {
    let mut d = detector(3_000);
    let v = run(&mut d, 0..2_000);
    let held = (1_010..1_600).filter(|&t| v[t].in_event).count();
    assert_eq!(held, 0, "rows back at 1 held the single 0's event open");
    assert!(
        (1_600..1_660).any(|t| v[t].is_anomaly),
        "the flapping was not flagged"
    );
    // Without the memory the normaliser's move holds the event open: the
    // test above is about the known states, not the stream.
    let mut off = detector(0);
    let w = run(&mut off, 0..2_000);
    let held = (1_010..1_600).filter(|&t| w[t].in_event).count();
    assert!(held > 50, "only {held} rows held open without the memory");
}

#[test]
fn a_stuck_value_stays_one_open_event() {
    let mut d = detector(3_000);
    let mut rng = crate::rng::Xoshiro256PlusPlus::seed_from_u64(5);
    let mut opened = 0;
    let mut open_rows = 0;
    for t in 0..1_500 {
        let x = if t < 1_200 {
            10.0 + rng.next_gaussian()
        } else {
            40.0
        };
        let v = d.process(&[x]).expect("dims");
        if t >= 1_200 {
            opened += usize::from(v.is_anomaly);
            open_rows += usize::from(v.in_event);
        }
    }
    assert!(opened >= 1, "the stuck value was never flagged");
    assert!(opened <= 2, "the stuck value flagged {opened} times");
    assert!(open_rows > 4, "the event closed after {open_rows} rows");
}

#[test]
fn the_memory_travels_in_snapshots_and_batches_match_rows() {
    let mut one = detector(3_000);
    let mut batched = detector(3_000);
    let rows: Vec<Vec<f64>> = (0..1_200).map(|t| vec![health(t)]).collect();
    let v = assert_batches_and_snapshots_agree(&mut one, &mut batched, &rows, 1_100);
    let mut bad = v.clone();
    bad["known"]["rows"] = serde_json::json!([1, 2, 3, 4, 5]);
    let e = ThresholdedForest::from_json(&bad.to_string()).expect_err("five rows, shingle 4");
    assert!(e.to_string().contains("known states"), "{e}");
    let mut old = v;
    old.as_object_mut().expect("object").remove("known");
    let config = old["grader"]["config"].as_object_mut().expect("config");
    config.remove("known_horizon");
    let o = ThresholdedForest::from_json(&old.to_string()).expect("an older snapshot");
    assert_eq!(o.grader().config().known_horizon, 0);
}
