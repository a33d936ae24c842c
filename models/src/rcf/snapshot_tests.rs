//! Unit tests of snapshots and of the point store's compactions: snapshots
//! of another format version (fixtures written by earlier builds) are
//! refused with a clear error, malformed snapshots are refused, and handles
//! survive moves.

use super::tests::{forest, row};
use super::*;
use crate::rng::Xoshiro256PlusPlus;

/// The error every snapshot of format 1 gets.
const OLD: &str = "checkpoint written by an older forewarn (forest snapshot v1); this build reads v2: delete the checkpoint to start cold";

/// Snapshots of format 1 (no `version` field), in the layouts earlier
/// builds wrote (leaf slots; leaves in order with a handle table), are
/// refused with the version error, from JSON, from a thresholded forest's
/// JSON and from CBOR (the checkpoints' encoding).
#[test]
fn snapshots_of_format_1_are_refused_with_the_version_error() {
    for fixture in [
        include_str!("../../tests/fixtures/rcf_legacy_v1.json"),
        include_str!("../../tests/fixtures/rcf_ordered_v1.json"),
    ] {
        let fixture: serde_json::Value = serde_json::from_str(fixture).expect("fixture parses");
        let old = &fixture["forest"];
        assert!(old.get("version").is_none());
        let err = Forest::from_json(&old.to_string()).expect_err("format 1");
        assert!(
            matches!(err, RcfError::SnapshotVersion { found: 1, reads: 2 }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), OLD);
        let wrapped = serde_json::json!({ "forest": old, "normalizer": null, "grader": null });
        let err = ThresholdedForest::from_json(&wrapped.to_string()).expect_err("format 1");
        assert_eq!(err.to_string(), OLD);
    }
    // The current layout without its version (as the last build of format
    // 1 wrote it) is refused too, also through serde alone.
    let mut v = small_snapshot(2);
    v.as_object_mut().expect("object").remove("version");
    let err = Forest::from_json(&v.to_string()).expect_err("format 1");
    assert_eq!(err.to_string(), OLD);
    let mut cbor = Vec::new();
    ciborium::into_writer(&v, &mut cbor).expect("cbor");
    let err = ciborium::from_reader::<Forest, _>(&cbor[..]).expect_err("format 1");
    assert!(err.to_string().contains(OLD), "{err}");
}

/// A snapshot names its version, and one from a newer build is refused.
#[test]
fn snapshots_carry_their_version() {
    let mut v = small_snapshot(2);
    assert_eq!(v["version"], serde_json::json!(2));
    let mut cbor = Vec::new();
    ciborium::into_writer(&v, &mut cbor).expect("cbor");
    let f: Forest = ciborium::from_reader(&cbor[..]).expect("the current format from CBOR");
    f.check_consistency().expect("consistent");
    v["version"] = serde_json::json!(3);
    let err = Forest::from_json(&v.to_string()).expect_err("format 3");
    assert!(
        err.to_string()
            .starts_with("checkpoint written by a newer forewarn (forest snapshot v3)")
    );
}

/// The JSON snapshot of a small one-metric forest of `trees` trees after 100
/// rows with repeated values (so some leaves hold duplicates).
fn small_snapshot(trees: usize) -> serde_json::Value {
    let mut f = forest(trees, 16, 1, 1, 1);
    for t in 0..100 {
        f.update(&[(t % 37) as f64]).expect("dims");
    }
    serde_json::from_str(&f.to_json().expect("json")).expect("parse")
}

#[test]
fn a_snapshot_with_a_broken_leaf_order_is_rejected() {
    let mut v = small_snapshot(2);
    let leaves = v["groups"][0]["trees"][0]["leaves"]
        .as_array_mut()
        .expect("leaves");
    leaves.swap(0, 1);
    let err = Forest::from_json(&v.to_string()).expect_err("out of order");
    assert!(matches!(err, RcfError::CorruptSnapshot { .. }), "{err}");
}

#[test]
fn a_snapshot_whose_leaf_names_no_stored_point_is_rejected() {
    for bad in [u32::MAX - 3, 1 << 20] {
        let mut v = small_snapshot(2);
        v["groups"][0]["trees"][1]["leaves"][0] = serde_json::json!(bad);
        let err = Forest::from_json(&v.to_string()).expect_err("dangling handle");
        assert!(matches!(err, RcfError::CorruptSnapshot { .. }), "{err}");
    }
}

/// Handles are arena offsets, so every compaction of the point store
/// rewrites the trees' handles; a long stream compacts many times, and the
/// forest stays consistent, small, and equal to one restored in between.
#[test]
fn compactions_keep_every_handle_and_score() {
    let mut f = forest(4, 32, 2, 3, 8);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    let rows: Vec<Vec<f64>> = (0..12_000).map(|t| row(&mut rng, t, 2)).collect();
    let mut restored = None;
    for (t, r) in rows.iter().enumerate() {
        let s = f.score_and_update(r).expect("dims");
        if let Some(g) = restored.as_mut() {
            let s2 = Forest::score_and_update(g, r).expect("dims");
            assert_eq!(s.to_bits(), s2.to_bits(), "row {t}");
        }
        if t % 1000 == 999 {
            f.check_consistency().expect("consistent");
        }
        if t == 3_333 {
            restored = Some(Forest::from_json(&f.to_json().expect("json")).expect("restores"));
        }
    }
    // Without compaction the arena would hold all 12,000 rows (96 KB).
    assert!(f.heap_bytes() < 40_000, "{} bytes", f.heap_bytes());
    assert!(f.stored_points() <= 4 * 32);
}

/// The lockstep descent serves all trees of a group with one node bound, so
/// a snapshot whose trees' node arenas differ from the sample size it
/// declares is refused on restore, even when each tree is consistent alone.
#[test]
fn a_snapshot_whose_trees_disagree_with_its_sample_size_is_rejected() {
    let mut v = small_snapshot(3);
    v["config"]["sample_size"] = serde_json::json!(12);
    let err =
        Forest::from_json(&v.to_string()).expect_err("arenas of 16 under a sample size of 12");
    assert!(matches!(err, RcfError::CorruptSnapshot { .. }), "{err}");
}

/// A sampler's schedule must not lie behind the forest's clock, and its
/// capacity must be the sample size: either made the first update after
/// restore panic (an acceptance skipped, an empty heap read). Found by
/// fuzzing restore (`fuzz/corpus/restore_rcf/sampler-*.json`).
#[test]
fn a_snapshot_whose_sampler_disagrees_with_the_forest_is_rejected() {
    let stored = small_snapshot(2)["stored"].as_u64().expect("stored");
    let cases: [(&str, serde_json::Value); 4] = [
        // (the sampler's field, a value the forest contradicts)
        ("next_accept", serde_json::json!(stored - 1)),
        ("base_time", serde_json::json!(stored + 1)),
        ("capacity", serde_json::json!(0)),
        ("capacity", serde_json::json!(17)),
    ];
    for (field, value) in cases {
        let mut v = small_snapshot(2);
        v["groups"][0]["trees"][1]["sampler"][field] = value.clone();
        let err = Forest::from_json(&v.to_string()).expect_err(field);
        assert!(
            matches!(err, RcfError::CorruptSnapshot { .. }),
            "{field}={value}: {err}"
        );
    }
}

/// The checkpoints decode forests from CBOR, not through `from_json`: the
/// same consistency check applies there.
#[test]
fn a_corrupt_snapshot_is_rejected_from_cbor_too() {
    let mut v = small_snapshot(2);
    v["groups"][0]["trees"][0]["sampler"]["next_accept"] = serde_json::json!(0);
    let mut bytes = Vec::new();
    ciborium::into_writer(&v, &mut bytes).expect("cbor");
    let err = ciborium::from_reader::<Forest, _>(bytes.as_slice()).expect_err("corrupt");
    assert!(err.to_string().contains("snapshot"), "{err}");
    let mut good = Vec::new();
    ciborium::into_writer(&small_snapshot(2), &mut good).expect("cbor");
    ciborium::from_reader::<Forest, _>(good.as_slice()).expect("a sound snapshot restores");
}

/// A shingle buffer of another shape than the config's made the next row
/// index out of it. Found by fuzzing restore
/// (`fuzz/corpus/restore_rcf/shingle-shape.json`).
#[test]
fn a_snapshot_whose_shingle_disagrees_with_the_config_is_rejected() {
    for (field, value) in [
        ("buffer", serde_json::json!([])),
        ("last", serde_json::json!([0.0, 0.0])),
        ("size", serde_json::json!(2)),
        ("filled", serde_json::json!(5)),
    ] {
        let mut v = small_snapshot(2);
        v["shingle"][field] = value.clone();
        let err = Forest::from_json(&v.to_string()).expect_err(field);
        assert!(
            matches!(err, RcfError::CorruptSnapshot { .. }),
            "{field}={value}: {err}"
        );
    }
}

/// A point store of another width than the forest's broke the first insert
/// after restore. Found by fuzzing restore
/// (`fuzz/corpus/restore_rcf/store-shape.json`).
#[test]
fn a_snapshot_whose_point_store_disagrees_with_the_config_is_rejected() {
    let mut v = small_snapshot(2);
    let store = &mut v["groups"][0]["store"];
    store["dims"] = serde_json::json!(2);
    store["step"] = serde_json::json!(2);
    store["arena"] = serde_json::json!([]);
    store["refs"] = serde_json::json!([]);
    let err = Forest::from_json(&v.to_string()).expect_err("store of width 2");
    assert!(
        matches!(err, RcfError::CorruptSnapshot { reason } if reason.contains("point store shape")),
        "{err}"
    );
}

/// A tree whose box cache disagreed with itself (a node off the tree still
/// naming a cache slot) passed the check, and the first update after the
/// restore underflowed dropping that box. Found by fuzzing restore
/// (`fuzz/corpus/restore_rcf/box-cache-slot.json`): now refused, and
/// whatever is accepted updates without a panic.
#[test]
fn a_snapshot_whose_box_cache_disagrees_with_itself_is_rejected() {
    let text = include_str!("../../../fuzz/corpus/restore_rcf/box-cache-slot.json");
    if let Ok(mut f) = Forest::from_json(text) {
        for i in 0..64 {
            let _ = f.update(&[f64::from(i) * 0.1, 1.0 - f64::from(i) * 0.01]);
        }
        panic!("the inconsistent box cache was accepted (and survived updates)");
    }
    let mut v = small_snapshot(2);
    let restored = Forest::from_json(&v.to_string()).expect("a sound snapshot restores");
    drop(restored);
    // Two nodes naming one slot.
    let slots = &mut v["groups"][0]["trees"][0]["box_slot"];
    if let Some(arr) = slots.as_array_mut()
        && arr.len() >= 2
    {
        let named: Vec<usize> = (0..arr.len())
            .filter(|&i| arr[i] != serde_json::json!(u16::MAX))
            .collect();
        if named.len() >= 2 {
            arr[named[1]] = arr[named[0]].clone();
            assert!(
                Forest::from_json(&v.to_string()).is_err(),
                "a shared slot is refused"
            );
        }
    }
}

/// A snapshot of the quantile calibration (a current forest beside a
/// `thresholder`) is refused by name; the grader's own snapshot restores.
#[test]
fn snapshots_of_the_quantile_calibration_are_refused() {
    let legacy = serde_json::json!({ "forest": small_snapshot(2), "thresholder": {} });
    let err = ThresholdedForest::from_json(&legacy.to_string()).expect_err("legacy");
    assert!(err.to_string().contains("quantile calibration"), "{err}");
    let mut t = ThresholdedForest::new(forest(2, 16, 2, 1, 1), Default::default()).expect("valid");
    for i in 0..50 {
        t.process(&[f64::from(i % 7)]).expect("dims");
    }
    let back = ThresholdedForest::from_json(&t.to_json().expect("json")).expect("restores");
    assert_eq!(back.to_json().expect("json"), t.to_json().expect("json"));
}

/// With differences the forest takes each metric and its change: an odd
/// input width is refused by name, the last values travel in the snapshot
/// (a restored detector continues exactly), and a snapshot whose last
/// values do not fit its forest is refused.
#[test]
fn differences_take_two_inputs_per_metric_and_snapshot_the_last_values() {
    let e = ThresholdedForest::new(forest(2, 16, 3, 1, 1), Default::default()).expect_err("odd");
    assert!(e.to_string().contains("input_dimensions"), "{e}");
    let config = crate::grading::GraderConfig {
        warmup: 16,
        ..Default::default()
    };
    let mut t = ThresholdedForest::new(forest(3, 16, 4, 1, 1), config).expect("valid");
    assert_eq!(t.metrics(), 2);
    let row = |i: i32| {
        [
            f64::from(i % 5),
            if i % 9 == 0 { f64::NAN } else { f64::from(i) },
        ]
    };
    for i in 0..60 {
        t.process(&row(i)).expect("dims");
    }
    let mut back = ThresholdedForest::from_json(&t.to_json().expect("json")).expect("restores");
    for i in 60..120 {
        let (a, b) = (
            t.process(&row(i)).expect("dims"),
            back.process(&row(i)).expect("dims"),
        );
        assert_eq!(a, b, "row {i}");
        assert_eq!(a.attribution.high.len(), 2, "attribution per metric");
    }
    let mut v: serde_json::Value =
        serde_json::from_str(&t.to_json().expect("json")).expect("parse");
    v["last"] = serde_json::json!([1.0]);
    let e =
        ThresholdedForest::from_json(&v.to_string()).expect_err("one last value for two metrics");
    assert!(e.to_string().contains("last values"), "{e}");
}

/// The remembered events travel in the snapshot (a restored detector
/// continues exactly); a snapshot whose remembered shapes do not fit its
/// forest is refused; one from before recurrences restores with them off
/// and goes on.
#[test]
fn recurrences_snapshot_and_older_snapshots_restore_without_them() {
    let config = crate::grading::GraderConfig {
        warmup: 16,
        ..Default::default()
    };
    let mut t = ThresholdedForest::new(forest(9, 32, 2, 4, 3), config).expect("valid");
    // A ramp resetting every 40 rows, a missing value now and then.
    let value = |i: usize| {
        if i.is_multiple_of(53) {
            f64::NAN
        } else {
            (i % 40) as f64
        }
    };
    for i in 0..400 {
        t.process(&[value(i)]).expect("dims");
    }
    let json = t.to_json().expect("json");
    let mut back = ThresholdedForest::from_json(&json).expect("restores");
    for i in 400..800 {
        let (a, b) = (t.process(&[value(i)]), back.process(&[value(i)]));
        assert_eq!(a.expect("dims"), b.expect("dims"), "row {i}");
    }
    let v: serde_json::Value = serde_json::from_str(&json).expect("parse");
    let shapes = &v["recurrences"]["shapes"];
    assert_eq!(
        shapes[0]["input"].as_array().map(Vec::len),
        Some(4 * 2),
        "{shapes}"
    );
    let mut bad = v.clone();
    bad["recurrences"]["shapes"][0]["input"] = serde_json::json!([0.0]);
    let e = ThresholdedForest::from_json(&bad.to_string()).expect_err("a short shape");
    assert!(e.to_string().contains("remembered events"), "{e}");
    let mut old = v.clone();
    old.as_object_mut().expect("object").remove("recurrences");
    let config = old["grader"]["config"].as_object_mut().expect("config");
    config.remove("recurrence");
    config.remove("recurrence_horizon");
    let mut o = ThresholdedForest::from_json(&old.to_string()).expect("an older snapshot");
    assert_eq!(o.grader().config().recurrence, 0.0);
    for i in 400..500 {
        o.process(&[value(i)]).expect("goes on");
    }
}

/// `regrade` swaps the grader's thresholds and keeps every learnt part:
/// a regraded detector and a restored one, both given the new thresholds,
/// grade the next rows alike; it refuses a change of the forest's inputs.
#[test]
fn regrade_takes_new_thresholds_and_refuses_new_inputs() {
    let config = crate::grading::GraderConfig {
        warmup: 16,
        ..Default::default()
    };
    let mut t = ThresholdedForest::new(forest(3, 16, 4, 1, 1), config.clone()).expect("valid");
    for i in 0..80 {
        t.process(&[f64::from(i % 5), f64::from(i)]).expect("dims");
    }
    let stricter = crate::grading::GraderConfig {
        lower: 4.0,
        upper: 12.0,
        release: 3.0,
        ..config.clone()
    };
    let mut back = ThresholdedForest::from_json(&t.to_json().expect("json")).expect("restores");
    t.regrade(stricter.clone()).expect("thresholds only");
    back.regrade(stricter.clone()).expect("thresholds only");
    assert_eq!(*t.grader().config(), stricter);
    for i in 80..140 {
        let row = [
            f64::from(i % 5),
            if i == 120 { 500.0 } else { f64::from(i) },
        ];
        assert_eq!(
            t.process(&row).expect("dims"),
            back.process(&row).expect("dims")
        );
    }
    for other in [
        crate::grading::GraderConfig {
            differences: false,
            ..stricter.clone()
        },
        crate::grading::GraderConfig {
            normalize_inputs: false,
            ..stricter.clone()
        },
    ] {
        let e = t
            .regrade(other)
            .expect_err("the forest's inputs would change");
        assert!(e.to_string().contains("learnt its inputs"), "{e}");
    }
    let e = t
        .regrade(crate::grading::GraderConfig {
            lower: f64::NAN,
            ..stricter.clone()
        })
        .expect_err("invalid");
    assert!(e.to_string().contains("lower"), "{e}");
    assert_eq!(
        *t.grader().config(),
        stricter,
        "a refused config changes nothing"
    );
}
