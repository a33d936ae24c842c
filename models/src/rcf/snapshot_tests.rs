//! Unit tests of snapshots across layouts and of the point store's
//! compactions: fixtures written by earlier builds restore and continue bit
//! for bit, malformed snapshots are refused, and handles survive moves.

use super::tests::{forest, row};
use super::*;
use crate::rng::Xoshiro256PlusPlus;

/// A snapshot written before trees kept their leaves in order (leaf slots,
/// node masses, sample entries naming slots, handles through a handle
/// table), with the scores the build that wrote it (411fac2) gave for the
/// 300 rows after it: restoring converts it, and the converted forest
/// continues bit for bit, from JSON and from CBOR.
#[test]
fn snapshots_of_the_leaf_slot_layout_restore_and_continue_identically() {
    let fixture = include_str!("../../tests/fixtures/rcf_legacy_v1.json");
    assert!(fixture.contains("\"leaf_point\"") && fixture.contains("\"free_leaf\""));
    restores_and_continues(fixture);
}

/// The same for a snapshot of leaves in order whose point handles still go
/// through a handle table (`loc`, with freed handles), as 0f433aa wrote it.
#[test]
fn snapshots_with_a_handle_table_restore_and_continue_identically() {
    let fixture = include_str!("../../tests/fixtures/rcf_ordered_v1.json");
    assert!(fixture.contains("\"loc\"") && !fixture.contains("\"leaf_point\""));
    assert!(
        fixture.contains("4294967295"),
        "the fixture has freed handles"
    );
    restores_and_continues(fixture);
}

/// Restores `fixture`'s forest from JSON and from CBOR, checks it, and
/// continues it over the fixture's rows, expecting the recorded score bits;
/// the continued forest then saves in the current layout.
fn restores_and_continues(fixture: &str) {
    let fixture: serde_json::Value = serde_json::from_str(fixture).expect("fixture parses");
    let json = fixture["forest"].to_string();
    let rows: Vec<[f64; 2]> = serde_json::from_value(fixture["rows"].clone()).expect("rows");
    let bits: Vec<u64> = serde_json::from_value(fixture["score_bits"].clone()).expect("bits");
    let from_json = Forest::from_json(&json).expect("the old layout restores");
    let mut cbor = Vec::new();
    ciborium::into_writer(&fixture["forest"], &mut cbor).expect("cbor");
    let from_cbor: Forest = ciborium::from_reader(&cbor[..]).expect("the old layout from CBOR");
    for mut f in [from_json, from_cbor] {
        f.check_consistency()
            .expect("converted trees are consistent");
        for (t, (r, b)) in rows.iter().zip(&bits).enumerate() {
            let s = f.score_and_update(r).expect("dims");
            assert_eq!(s.to_bits(), *b, "row {t}: {s}");
        }
        f.check_consistency().expect("consistent after continuing");
        // And the new layout round-trips.
        let again = Forest::from_json(&f.to_json().expect("json")).expect("restores");
        let json = again.to_json().expect("json");
        assert!(!json.contains("leaf_point") && !json.contains("\"loc\""));
    }
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
