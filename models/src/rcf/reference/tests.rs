//! Property tests of every fast scoring path against the reference scorer
//! (`reference/mod.rs`), on random streams of random dimensions.
//!
//! The forest learns a stream; before every row, the reference copies the
//! forest's trees and scores the row's point, and every fast path must give
//! the same bits: `Forest::score` and `Forest::attribution` in each
//! instruction-set variant (`isa.rs`; at 8 dimensions the x86-64-v3 variant
//! scores with `avx8.rs`'s climb), `score_and_update` and
//! `attribute_and_update` (the learning climb and the kernel's chunked
//! scan), and both batch calls on one and two threads. Every few rows, each
//! tree is also checked alone, through the general climb (with and without
//! insertion planning) and, at the packed dimensions, the kernel's score and
//! attribution with both scans, on probes that include learned points and
//! points one `f32` step away from them.
//!
//! Tolerance: none. The reference sums in the fast paths' order (its module
//! comment says which), and min/max are exact, so any difference, however
//! small, is a bug; a perturbation of 1e-9 in one fast path fails these
//! tests.
//!
//! Deterministic: a fixed proptest seed, and the stream drawn from a seeded
//! generator.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use super::{RefForest, RefTree};
use crate::rcf::Forest;
use crate::rcf::geo::Packed;
use crate::rcf::isa::FORCE_BASELINE;
use crate::rcf::kernel::Scan;
use crate::rcf::point_store::PointStore;
use crate::rcf::traversal::{Climb, Path, PathBuf};
use crate::rcf::tree::Tree;
use crate::rng::Xoshiro256PlusPlus;

/// A score and its attribution terms (high then low), as bits.
type Bits = (u64, Vec<u64>);

fn bits(score: f64, attr: &[f64]) -> Bits {
    (score.to_bits(), attr.iter().map(|x| x.to_bits()).collect())
}

fn flat(a: &crate::rcf::DiVector) -> Vec<f64> {
    a.high.iter().chain(&a.low).copied().collect()
}

/// Asserts that a fast path's result has the reference's bits.
#[track_caller]
fn same(path: &str, got: (f64, &[f64]), want: &(f64, Vec<f64>)) {
    assert_eq!(
        bits(got.0, got.1),
        bits(want.0, &want.1),
        "{path}: got score {} attribution {:?}, the reference {} {:?}",
        got.0,
        got.1,
        want.0,
        want.1,
    );
}

/// What a stream looks like.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Noisy sines.
    Smooth,
    /// Small integers: many duplicate points.
    Integers,
    /// Noisy sines, a third of the rows repeating an earlier row exactly.
    Repeats,
    /// Each row far beyond the last: trees grow into spines deeper than
    /// the lockstep descent's and the kernel's fixed-size paths.
    Geometric,
}

#[derive(Debug, Clone)]
struct Setup {
    metrics: usize,
    shingle: usize,
    trees: usize,
    sample: usize,
    box_min_mass: usize,
    threads: usize,
    kind: Kind,
    seed: u64,
}

fn setup() -> impl Strategy<Value = Setup> {
    let shape = prop_oneof![
        Just((1, 1)),
        Just((1, 3)),
        Just((3, 1)),
        Just((8, 1)),
        Just((2, 4)),
        Just((4, 2)),
        Just((16, 1)),
        Just((5, 1)),
        Just((7, 1)),
        Just((2, 3)),
        Just((3, 3)),
        Just((4, 3)),
        Just((2, 1)),
        Just((1, 4)),
        Just((11, 1)),
        Just((8, 4)),
    ];
    let kind = prop_oneof![
        Just(Kind::Smooth),
        Just(Kind::Integers),
        Just(Kind::Repeats),
        Just(Kind::Geometric),
    ];
    (
        shape,
        1usize..12,
        prop_oneof![Just(8usize), Just(16), Just(32), Just(100)],
        1usize..20,
        1usize..3,
        kind,
        any::<u64>(),
    )
        .prop_map(
            |((metrics, shingle), trees, sample, box_min_mass, threads, kind, seed)| Setup {
                metrics,
                shingle,
                trees,
                sample,
                box_min_mass,
                threads,
                kind,
                seed,
            },
        )
}

fn stream(s: &Setup, n: usize) -> Vec<Vec<f64>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(s.seed);
    let mut rows: Vec<Vec<f64>> = Vec::with_capacity(n);
    for t in 0..n {
        let smooth = |rng: &mut Xoshiro256PlusPlus| -> Vec<f64> {
            (0..s.metrics)
                .map(|j| 3.0 * (t as f64 / (5.0 + j as f64)).sin() + rng.next_gaussian())
                .collect()
        };
        let row = match s.kind {
            Kind::Smooth => smooth(&mut rng),
            Kind::Integers => (0..s.metrics)
                .map(|_| (rng.next_f64() * 3.0).floor())
                .collect(),
            Kind::Repeats if t > 0 && rng.next_f64() < 0.33 => {
                rows[(rng.next_f64() * t as f64) as usize].clone()
            }
            Kind::Repeats => smooth(&mut rng),
            Kind::Geometric => (0..s.metrics)
                .map(|j| 1e-30 * 2.5f64.powi(t as i32) * (j + 1) as f64)
                .collect(),
        };
        rows.push(row);
    }
    rows
}

/// Every forest-level path's score and attribution of `row` against the
/// reference's, which it returns (`None` when the forest would not score).
fn check_forest(f: &Forest, row: &[f64]) -> Option<(f64, Vec<f64>)> {
    let mut point = Vec::new();
    let cand = f.shingle_for_tests().candidate(row, &mut point);
    if !(cand.complete && f.is_ready()) {
        assert_eq!(f.score(row).ok(), Some(0.0));
        return None;
    }
    let want = RefForest::from_forest(f).score(&point);
    for baseline in [false, true] {
        FORCE_BASELINE.set(baseline);
        let score = f.score(row).expect("dims");
        let attr = flat(&f.attribution(row).expect("dims"));
        FORCE_BASELINE.set(false);
        let variant = if baseline { "baseline" } else { "best" };
        same(
            &format!("Forest::score ({variant})"),
            (score, &[]),
            &(want.0, vec![]),
        );
        same(
            &format!("Forest::attribution ({variant})"),
            (want.0, &attr),
            &want,
        );
    }
    let mut g = f.clone();
    let score = g.score_and_update(row).expect("dims");
    same("score_and_update", (score, &[]), &(want.0, vec![]));
    let mut g = f.clone();
    let attr = flat(&g.attribute_and_update(row).expect("dims"));
    same("attribute_and_update", (want.0, &attr), &want);
    Some(want)
}

/// One tree's fast climbs of `p` against the reference tree's.
fn check_tree(tree: &Tree, store: &PointStore, p: &[f32], rng: &mut Xoshiro256PlusPlus) {
    let (score, terms) = RefTree::from_tree(tree, store).score(p);
    // The climbs add their terms to the caller's buffer, zeros here, which
    // turns a term of -0 into +0.
    let want = (score, terms.iter().map(|t| 0.0 + t).collect());
    let mut buf = PathBuf::default();
    let path = if tree.leaf_count() > 0 {
        tree.descend(p, &mut buf);
        Some(buf.as_path())
    } else {
        None
    };
    let mut climb = Climb {
        bmin: vec![0.0; p.len()],
        bmax: vec![0.0; p.len()],
        attr: Vec::new(),
    };
    let mut attr = vec![0.0; 2 * p.len()];
    let (score, _) = tree.climb(store, p, path, &mut climb, Some(&mut attr[..]), None);
    same("Tree::climb", (score, &attr), &want);
    let (score, _) = tree.climb(store, p, path, &mut climb, None, None);
    same("Tree::climb (score only)", (score, &[]), &(want.0, vec![]));
    // The learning climb draws cuts as it goes; its score is unchanged.
    let mut attr = vec![0.0; 2 * p.len()];
    let (score, _) = tree.climb(store, p, path, &mut climb, Some(&mut attr[..]), Some(rng));
    same("Tree::climb (planning)", (score, &attr), &want);
    let Some(path) = path else {
        return;
    };
    macro_rules! packed {
        ($l:literal, $n:literal) => {
            check_packed::<$l, $n>(tree, store, p, path, &want)
        };
    }
    crate::rcf::isa::packed_dims!(p.len(), packed, ())
}

/// The general climb on packed registers and the kernel's score and
/// attribution with both scans.
fn check_packed<const L: usize, const N: usize>(
    tree: &Tree,
    store: &PointStore,
    p: &[f32],
    path: Path<'_>,
    want: &(f64, Vec<f64>),
) {
    let mut terms = Vec::new();
    let mut attr = vec![0.0; 2 * N];
    let mut g = Packed::<L, N>::new(p);
    let score = tree.score_in(&mut g, store, Some(path), &mut terms, Some(&mut attr[..]));
    same("Tree::score_in (packed)", (score, &attr), want);
    for scan in [Scan::Loop, Scan::Chunked] {
        let score = tree.score_packed(&mut Packed::<L, N>::new(p), store, path, scan);
        same(
            &format!("kernel score ({scan:?})"),
            (score, &[]),
            &(want.0, vec![]),
        );
        let mut attr = vec![0.0; 2 * N];
        let mut g = Packed::<L, N>::new(p);
        let score = tree.attribute_packed(&mut g, store, path, &mut attr, scan);
        same(
            &format!("kernel attribution ({scan:?})"),
            (score, &attr),
            want,
        );
    }
}

/// Probes for the per-tree checks: the point about to be learnt, one far
/// away, a learned point, and that point one `f32` step off in one
/// coordinate.
fn probes(f: &Forest, point: &[f32], rng: &mut Xoshiro256PlusPlus) -> Vec<Vec<f32>> {
    let mut out = vec![
        point.to_vec(),
        point.iter().map(|x| 40.0 * x + 7.0).collect(),
    ];
    let groups = f.groups_for_tests();
    let (store, trees) = groups[0];
    let tree = &trees[(rng.next_f64() * trees.len() as f64) as usize];
    if tree.leaf_count() > 0 {
        let pos = (rng.next_f64() * tree.leaf_count() as f64) as u16;
        let learned = tree.leaf_point(store, pos).to_vec();
        let mut near = learned.clone();
        let d = (rng.next_f64() * near.len() as f64) as usize;
        near[d] = f32::from_bits(near[d].to_bits() + 1);
        out.extend([learned, near]);
    }
    out
}

/// Runs the stream through the forest, `chunk` rows at a time: each chunk
/// is first scored by both batch calls on copies of the forest, then row by
/// row, every path checked against the reference before the row is learnt.
fn run(s: &Setup, rows: usize, chunk: usize) {
    let mut f = Forest::builder()
        .trees(s.trees)
        .sample_size(s.sample)
        .input_dimensions(s.metrics)
        .shingle_size(s.shingle)
        .box_cache_min_mass(s.box_min_mass)
        .threads(s.threads)
        .output_after(4)
        .seed(s.seed)
        .build()
        .expect("valid config");
    let data = stream(s, rows);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(s.seed ^ 1);
    let mut point = Vec::new();
    for (c, rows) in data.chunks(chunk).enumerate() {
        let batch = f.clone().process_batch(rows).expect("dims");
        let batch_attr = f.clone().attribute_and_update_batch(rows).expect("dims");
        for (i, row) in rows.iter().enumerate() {
            let want = check_forest(&f, row);
            if let Some(want) = &want {
                same("process_batch", (batch[i], &[]), &(want.0, vec![]));
                let attr = flat(&batch_attr[i].0);
                same("attribute_and_update_batch", (want.0, &attr), want);
            }
            if (c * chunk + i).is_multiple_of(5) {
                f.shingle_for_tests().candidate(row, &mut point);
                for p in probes(&f, &point, &mut rng) {
                    for (store, trees) in f.groups_for_tests() {
                        for tree in trees {
                            check_tree(tree, store, &p, &mut rng);
                        }
                    }
                }
            }
            f.update(row).expect("dims");
        }
    }
}

fn config(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x005E_ED0F_2016),
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config(40))]

    #[test]
    fn every_fast_path_matches_the_reference(s in setup()) {
        let rows = if matches!(s.kind, Kind::Geometric) { 110 } else { 160 };
        run(&s, rows, 16);
    }
}

/// The stream shapes the acceptance parameters use, with trees of the
/// default sample size (the lockstep descent's fixed-size node table) and
/// deeper box caches, on a longer stream.
#[test]
fn the_default_sample_size_matches_the_reference() {
    for (metrics, shingle, seed) in [(2, 4, 1), (8, 1, 2), (3, 1, 3)] {
        let s = Setup {
            metrics,
            shingle,
            trees: 9,
            sample: 256,
            box_min_mass: 16,
            threads: 1,
            kind: Kind::Repeats,
            seed,
        };
        run(&s, 700, 100);
    }
}
