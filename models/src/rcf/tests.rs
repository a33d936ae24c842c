//! Unit tests of the forest internals: structure after long update runs,
//! determinism, snapshot round trips and score sanity.

use super::*;
use crate::rng::Xoshiro256PlusPlus;

pub(super) fn forest(
    trees: usize,
    sample: usize,
    dims: usize,
    shingle: usize,
    seed: u64,
) -> Forest {
    Forest::builder()
        .trees(trees)
        .sample_size(sample)
        .input_dimensions(dims)
        .shingle_size(shingle)
        .seed(seed)
        .build()
        .expect("valid test config")
}

/// Runs `rows[..split]` through `one` row by row and through `batched`
/// (built alike) in batches of 256: the verdicts must be equal. Then
/// restores `one` from its snapshot and runs the rest through both: equal
/// again. Returns that snapshot (JSON) for the caller's own checks.
pub(super) fn assert_batches_and_snapshots_agree(
    one: &mut ThresholdedForest,
    batched: &mut ThresholdedForest,
    rows: &[Vec<f64>],
    split: usize,
) -> serde_json::Value {
    let expected: Vec<Verdict> = rows[..split]
        .iter()
        .map(|r| one.process(r).expect("dims"))
        .collect();
    let mut got = Vec::new();
    for chunk in rows[..split].chunks(256) {
        got.extend(batched.process_batch(chunk).expect("dims"));
    }
    assert_eq!(got, expected);
    let json = one.to_json().expect("json");
    let mut back = ThresholdedForest::from_json(&json).expect("restores");
    for r in &rows[split..] {
        assert_eq!(
            one.process(r).expect("dims"),
            back.process(r).expect("dims")
        );
    }
    serde_json::from_str(&json).expect("parse")
}

pub(super) fn row(rng: &mut Xoshiro256PlusPlus, t: usize, dims: usize) -> Vec<f64> {
    (0..dims)
        .map(|j| (t as f64 / (10.0 + j as f64)).sin() * 5.0 + rng.next_gaussian() * 0.5)
        .collect()
}

#[test]
fn structure_survives_many_updates() {
    for mass in [1, 3, 6, 40] {
        let mut f = Forest::builder()
            .trees(5)
            .sample_size(64)
            .input_dimensions(2)
            .shingle_size(2)
            .time_decay(0.01)
            .box_cache_min_mass(mass)
            .seed(3)
            .build()
            .expect("valid");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for t in 0..3000 {
            // Some duplicates and some rounding-hostile values.
            let r = if t % 7 == 0 {
                vec![1.0, 1.0]
            } else {
                row(&mut rng, t, 2)
            };
            f.score_and_update(&r).expect("dims match");
            if t % 500 == 0 {
                f.check_consistency().expect("consistent mid-run");
            }
        }
        f.check_consistency().expect("consistent at end");
    }
}

#[test]
fn ordinary_points_score_near_one_and_outliers_high() {
    let mut f = forest(50, 256, 2, 1, 17);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let mut sum = 0.0;
    let mut n = 0;
    for t in 0..3000 {
        let s = f
            .score_and_update(&[rng.next_gaussian(), rng.next_gaussian()])
            .expect("dims");
        if t > 1000 {
            sum += s;
            n += 1;
        }
        let _ = t;
    }
    let mean = sum / n as f64;
    assert!((0.6..1.4).contains(&mean), "mean ordinary score {mean}");
    let far = f.score(&[8.0, 0.0]).expect("dims");
    assert!(far > 2.0 * mean, "outlier score {far}");
    let attr = f.attribution(&[8.0, 0.0]).expect("dims");
    assert!((attr.total() - far).abs() < 1e-9 * far.max(1.0));
    assert_eq!(
        attr.top().map(|(d, dir, _)| (d, dir)),
        Some((0, Direction::High))
    );
}

#[test]
fn same_seed_same_scores_and_batch_matches() {
    let mut a = forest(10, 64, 3, 2, 9);
    let mut b = forest(10, 64, 3, 2, 9);
    let mut c = Forest::builder()
        .trees(10)
        .sample_size(64)
        .input_dimensions(3)
        .shingle_size(2)
        .seed(9)
        .threads(3)
        .build()
        .expect("valid");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let rows: Vec<Vec<f64>> = (0..2000).map(|t| row(&mut rng, t, 3)).collect();
    let batch = c.process_batch(&rows).expect("dims");
    for (r, cb) in rows.iter().zip(&batch) {
        let sa = a.score_and_update(r).expect("dims");
        let sb = b.score_and_update(r).expect("dims");
        assert_eq!(sa.to_bits(), sb.to_bits());
        assert_eq!(sa.to_bits(), cb.to_bits());
    }
}

#[test]
fn snapshot_restore_continues_identically() {
    let mut f = forest(8, 64, 2, 3, 11);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    for t in 0..700 {
        f.update(&row(&mut rng, t, 2)).expect("dims");
    }
    let json = f.to_json().expect("serialises");
    let mut g = Forest::from_json(&json).expect("restores");
    for t in 700..1500 {
        let r = row(&mut rng, t, 2);
        let a = f.score_and_update(&r).expect("dims");
        let b = g.score_and_update(&r).expect("dims");
        assert_eq!(a.to_bits(), b.to_bits(), "row {t}");
    }
}

#[test]
fn corrupt_snapshot_is_rejected() {
    let mut f = forest(2, 16, 1, 1, 1);
    for t in 0..100 {
        f.update(&[t as f64]).expect("dims");
    }
    let json = f
        .to_json()
        .expect("serialises")
        .replacen("\"masses\":[", "\"masses\":[7,", 1);
    assert!(Forest::from_json(&json).is_err());
}

#[test]
fn missing_values_are_scored_but_not_stored() {
    let mut f = forest(5, 32, 2, 2, 1);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    for t in 0..200 {
        f.update(&row(&mut rng, t, 2)).expect("dims");
    }
    let before = f.points_seen();
    let s = f.score_and_update(&[f64::NAN, 1.0]).expect("dims");
    assert!(s.is_finite() && s > 0.0);
    f.update(&[0.5, 0.5]).expect("dims");
    // The NaN row and the next row (whose shingle holds the imputed value)
    // are not stored.
    assert_eq!(f.points_seen(), before);
    f.update(&[0.5, 0.5]).expect("dims");
    assert_eq!(f.points_seen(), before + 1);
}

#[test]
fn wrong_row_length_is_an_error() {
    let mut f = forest(2, 16, 3, 1, 1);
    assert!(matches!(
        f.update(&[1.0]),
        Err(RcfError::DimensionMismatch {
            expected: 3,
            got: 1
        })
    ));
}

/// Descents and climbs stay short on a telemetry-like stream: a random
/// cut tree's leaves sit at about `2 ln(n)` depth, a climb stops at the
/// first box holding the point, and nearly every point lies inside the
/// root's box (what the box cache and the lockstep descent are sized for).
#[test]
fn descents_and_climbs_stay_short_on_an_ordinary_stream() {
    let mut f = forest(10, 256, 2, 4, 17);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let rows: Vec<Vec<f64>> = (0..6000)
        .map(|t| {
            (0..2)
                .map(|j| 10.0 * (t as f64 / (20.0 + 7.0 * j as f64)).sin() + rng.next_gaussian())
                .collect()
        })
        .collect();
    for r in &rows[..5000] {
        f.update(r).expect("dims");
    }
    let (mut depth, mut climb, mut n, mut outside) = (0usize, 0usize, 0usize, 0usize);
    let mut point = Vec::new();
    let mut s = super::traversal::Scratch::new(8);
    for r in &rows[5000..5500] {
        f.shingle_for_tests().candidate(r, &mut point);
        let (store, trees) = f.groups_for_tests()[0];
        for t in trees {
            t.descend(&point, &mut s.path);
            let path = s.path.as_path();
            depth += path.depth();
            let mut lvl = path.depth();
            let mut reached = false;
            while lvl > 0 {
                lvl -= 1;
                let mut lo = vec![f32::INFINITY; 8];
                let mut hi = vec![f32::NEG_INFINITY; 8];
                let (node, start, count) = (path.node(lvl), path.start(lvl), path.count(lvl));
                t.union_node(store, node, start, count, &mut lo, &mut hi);
                if (0..8).all(|d| point[d] >= lo[d] && point[d] <= hi[d]) {
                    reached = true;
                    break;
                }
                climb += 1;
            }
            outside += usize::from(!reached);
            n += 1;
        }
        f.update(r).expect("dims");
    }
    let (depth, climb) = (depth as f64 / n as f64, climb as f64 / n as f64);
    let expected = 2.0 * 256f64.ln();
    assert!(
        (0.5 * expected..2.0 * expected).contains(&depth),
        "average depth {depth:.1}, a random tree's about {expected:.1}"
    );
    assert!(
        climb < depth,
        "average climb {climb:.1} of {depth:.1} levels"
    );
    // A new point from the same distribution falls outside the box of 256
    // sampled points in a given dimension with probability 2 / 257 (it is
    // the smallest or the largest of 257); over 8 dimensions that is about
    // 6 %. Twice that means the trees' boxes do not cover the stream.
    let expected_outside = 8.0 * 2.0 / 257.0;
    assert!(
        (outside as f64) < 2.0 * expected_outside * n as f64,
        "{outside} of {n} points outside the root's box (about {:.0} expected)",
        expected_outside * n as f64
    );
}

/// Live cached boxes of every tree, and the slots their caches hold.
fn box_counts(f: &Forest) -> Vec<(usize, usize)> {
    f.groups_for_tests()
        .iter()
        .flat_map(|(_, trees)| trees.iter())
        .map(|t| {
            let live = t.box_slot.iter().filter(|&&s| s != tree::NO_BOX).count();
            (live, t.boxes.len() / (2 * t.dims))
        })
        .collect()
}

#[test]
fn box_slots_stay_dense_and_free_slots_of_old_snapshots_are_compacted() {
    let mut f = forest(10, 64, 2, 4, 5);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let rows: Vec<Vec<f64>> = (0..4000).map(|t| row(&mut rng, t, 2)).collect();
    for r in &rows[..2000] {
        f.update(r).expect("dims match");
    }
    assert!(
        box_counts(&f)
            .iter()
            .all(|&(live, slots)| live == slots && live > 0)
    );

    // An earlier version kept freed slots on a free list: rebuild tree 0 of
    // the snapshot with an unused slot 0 in front of its boxes.
    let mut v: serde_json::Value =
        serde_json::from_str(&f.to_json().expect("json")).expect("parse");
    let t0 = &mut v["groups"][0]["trees"][0];
    let boxes = t0["boxes"].as_array_mut().expect("boxes");
    let width = 2 * 8;
    for _ in 0..width {
        boxes.insert(0, serde_json::json!(-7.0));
    }
    for s in t0["box_slot"].as_array_mut().expect("slots") {
        if s.as_u64() != Some(u64::from(tree::NO_BOX)) {
            *s = serde_json::json!(s.as_u64().expect("slot") + 1);
        }
    }
    t0["free_boxes"] = serde_json::json!([0]);
    let mut old = Forest::from_json(&v.to_string()).expect("a snapshot with free slots restores");
    assert_eq!(box_counts(&old)[0].1, box_counts(&old)[0].0 + 1);
    for r in &rows[2000..] {
        assert_eq!(
            old.score_and_update(r).expect("dims"),
            f.score_and_update(r).expect("dims")
        );
    }
    old.check_consistency()
        .expect("consistent after compaction");
    assert!(box_counts(&old).iter().all(|&(live, slots)| live == slots));
}

#[test]
fn batches_on_two_threads_equal_row_by_row_on_one() {
    let calibration = crate::grading::GraderConfig {
        warmup: 32,
        ..Default::default()
    };
    let build = |threads| {
        Forest::builder()
            .trees(13)
            .sample_size(64)
            .input_dimensions(calibration.forest_dimensions(3))
            .shingle_size(2)
            .threads(threads)
            .seed(21)
            .build()
            .expect("valid")
    };
    let mut one = ThresholdedForest::new(build(1), calibration.clone()).expect("valid");
    let mut two = ThresholdedForest::new(build(2), calibration).expect("valid");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let rows: Vec<Vec<f64>> = (0..1500)
        .map(|t| {
            let mut r = row(&mut rng, t, 3);
            if t % 97 == 5 {
                r[1] = f64::NAN; // missing: carried forward, not learnt
            }
            if t % 211 == 7 {
                r[0] += 40.0;
            }
            r
        })
        .collect();
    let expected: Vec<Verdict> = rows.iter().map(|r| one.process(r).expect("dims")).collect();
    let mut got = Vec::new();
    for chunk in rows.chunks(300) {
        got.extend(two.process_batch(chunk).expect("dims"));
    }
    assert_eq!(got, expected);
    assert!(
        expected.iter().any(|v| v.is_anomaly),
        "the test should flag something"
    );
    assert_eq!(two.forest().points_seen(), one.forest().points_seen());
}

/// A lower `box_cache_min_mass` caches more boxes and costs more memory,
/// and `heap_bytes` counts every tree part (nodes, box slots, leaves,
/// masses, boxes, box owners, sampler) and the point store.
#[test]
fn box_cache_threshold_trades_memory_for_boxes() {
    let mut last: Option<(usize, usize)> = None;
    for mass in [20, 12, 6] {
        let mut f = Forest::builder()
            .trees(10)
            .input_dimensions(2)
            .shingle_size(4)
            .box_cache_min_mass(mass)
            .seed(17)
            .build()
            .expect("valid");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        for t in 0..3_000 {
            let r: Vec<f64> = (0..2)
                .map(|j| 10.0 * (t as f64 / (20.0 + 7.0 * j as f64)).sin() + rng.next_gaussian())
                .collect();
            f.update(&r).expect("dims");
        }
        let (store, trees) = f.groups_for_tests()[0];
        let sum = |g: &dyn Fn(&tree::Tree) -> usize| trees.iter().map(g).sum::<usize>();
        let parts = sum(&|t| t.nodes.capacity() * 12)
            + sum(&|t| t.box_slot.capacity() * 2)
            + sum(&|t| t.leaves.capacity() * 4)
            + sum(&|t| t.masses.heap_bytes())
            + sum(&|t| t.boxes.capacity() * 4)
            + sum(&|t| t.box_owner.capacity() * 2)
            + sum(&|t| t.sampler.heap_bytes())
            + store.heap_bytes();
        let heap = f.heap_bytes();
        // Besides: the trees' and groups' own structs, the shingle, scratch.
        let fixed = std::mem::size_of_val(trees) + 4096;
        assert!(
            parts <= heap && heap - parts < fixed,
            "mass {mass}: parts {parts} of {heap} bytes"
        );
        let boxes = sum(&|t| t.boxes.len() / 16);
        if let Some((heap_before, boxes_before)) = last {
            assert!(
                boxes > boxes_before && heap > heap_before,
                "mass {mass}: {boxes} boxes in {heap} bytes, before {boxes_before} in {heap_before}"
            );
        }
        last = Some((heap, boxes));
    }
}

/// A geometric stream puts every new point far beyond all earlier ones, so
/// most insertions make a new root and trees grow into spines deeper than
/// the lockstep's 64-step paths: such lanes are redone by the per-tree
/// descent and must score exactly as it does.
#[test]
fn trees_deeper_than_a_lane_path_score_as_the_per_tree_descent_does() {
    let mut f = forest(6, 128, 1, 1, 3);
    for t in 0..110 {
        f.update(&[1e-30 * 2.5f64.powi(t)]).expect("dims");
    }
    f.check_consistency().expect("consistent");
    let (store, trees) = f.groups_for_tests()[0];
    let mut path = traversal::PathBuf::default();
    let mut deepest = 0;
    let (mut terms, mut lo, mut hi) = (Vec::new(), vec![0.0f32], vec![0.0f32]);
    for probe in [-5.0f32, 1e-29, 3e-12, 0.7, 4e5, 2e13, 9e14] {
        let mut expected = 0.0;
        for t in trees {
            t.descend(&[probe], &mut path);
            deepest = deepest.max(path.as_path().depth());
            let mut g = geo::Dyn {
                p: &[probe],
                lo: &mut lo,
                hi: &mut hi,
            };
            expected += t.score_in(&mut g, store, Some(path.as_path()), &mut terms, None);
        }
        let got = f.score(&[f64::from(probe)]).expect("dims");
        assert_eq!(got.to_bits(), (expected / 6.0).to_bits(), "probe {probe}");
        assert!(got.is_finite() && got >= 0.0);
    }
    assert!(
        deepest > 64,
        "the stream should build deep trees: {deepest}"
    );
}

/// The lockstep descent reads trees of the default sample size through a
/// fixed-size node table and others through slices; a batch mixing sizes
/// (which a forest never holds) must still give every tree the path its
/// own descent gives, whichever size comes first.
#[test]
fn lockstep_descent_of_mixed_tree_sizes_equals_the_per_tree_descent() {
    let learn = |sample: usize, seed: u64| {
        let mut f = forest(4, sample, 2, 1, seed);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        for _ in 0..600 {
            f.update(&[rng.next_gaussian(), rng.next_gaussian()])
                .expect("dims");
        }
        f.groups_for_tests()[0].1.to_vec()
    };
    let (full, small) = (learn(256, 1), learn(64, 2));
    assert_eq!((full[0].nodes.len(), small[0].nodes.len()), (256, 64));
    let batches = [
        vec![&full[0], &small[0], &full[1], &small[1], &full[2]],
        vec![&small[2], &full[3], &small[3], &full[0]],
    ];
    let mut lanes = traversal::Lanes::default();
    let mut path = traversal::PathBuf::default();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    for batch in batches {
        let trees: Vec<tree::Tree> = batch.into_iter().cloned().collect();
        for _ in 0..50 {
            let p = [rng.next_gaussian() as f32, rng.next_gaussian() as f32];
            lanes.descend(&trees, &p, |_| true);
            for (k, t) in trees.iter().enumerate() {
                t.descend(&p, &mut path);
                let got = lanes.path(k).expect("non-empty tree");
                assert_eq!(got.steps, path.as_path().steps, "lane {k}");
                assert_eq!(got.leaf, path.as_path().leaf, "lane {k}");
            }
        }
    }
}
