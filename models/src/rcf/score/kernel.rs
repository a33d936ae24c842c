//! The climb for SIMD-packed points without insertion planning
//! (`Tree::score_packed`, `Tree::attribute_packed`): the hot loop of
//! `Forest::score`, of the trees of an update that do not take the point,
//! and of `forewarn score`'s attribution, at the common dimensions.
//!
//! Part of the tree walks in `rcf/`. It computes exactly what the general
//! climb (`climb.rs`) computes when there is no insertion to plan, in the
//! same order and so with the same bits, but skips the work only planning
//! or a `Vec` of terms needs (the leaf level's gap sum for a score alone,
//! the per-level options), keeps the point, the running box and the
//! attribution terms in registers and fixed arrays, scans each uncached
//! level's sibling run in one loop chosen without a branch, and reads each
//! cached box with one bounds check.

use wide::f32x4;

use crate::rcf::climb::{
    TABLED_DEPTHS, attribute_terms, leaf_terms, score_seen, score_unseen_tabled,
};
use crate::rcf::geo::{Packed, gap_span_packed, load};
use crate::rcf::point_store::PointStore;
use crate::rcf::traversal::{Path, Step, sibling_run};
use crate::rcf::tree::Tree;

/// Grows the box (`$l`, `$h`) by the point `$handle`. A macro, not a
/// function: as a function LLVM allocated registers a little worse here.
macro_rules! grow {
    ($L:ident, $N:ident, $l:ident, $h:ident, $store:ident, $handle:expr) => {{
        let q = load::<$L, $N>($store.get_n::<$N>($handle));
        for i in 0..$L {
            $l[i] = $l[i].fast_min(q[i]);
            $h[i] = $h[i].fast_max(q[i]);
        }
    }};
}

impl Tree {
    /// The normalised score of `g`'s point, which descended along `path`.
    #[inline(always)]
    pub(in crate::rcf) fn score_packed<const L: usize, const N: usize>(
        &self,
        g: &mut Packed<L, N>,
        store: &PointStore,
        path: Path<'_>,
        scan: Scan,
    ) -> f64 {
        self.climb_packed::<L, N, false>(g, store, path, &mut [], scan)
    }

    /// `score_packed` that also adds the score's attribution terms, already
    /// normalised, to `attr` (`N` high terms, then `N` low ones).
    #[inline(always)]
    pub(in crate::rcf) fn attribute_packed<const L: usize, const N: usize>(
        &self,
        g: &mut Packed<L, N>,
        store: &PointStore,
        path: Path<'_>,
        attr: &mut [f64],
        scan: Scan,
    ) -> f64 {
        self.climb_packed::<L, N, true>(g, store, path, attr, scan)
    }

    /// The climb of `score_packed` (`ATTR` false: `attr` is not touched) and
    /// `attribute_packed`, with the arithmetic of `climb.rs`. The point and
    /// the running box stay in registers for the whole climb.
    #[inline(always)]
    fn climb_packed<const L: usize, const N: usize, const ATTR: bool>(
        &self,
        g: &mut Packed<L, N>,
        store: &PointStore,
        path: Path<'_>,
        attr: &mut [f64],
        scan: Scan,
    ) -> f64 {
        let steps = path.steps;
        let depth = steps.len();
        // The general climb, for what this one does not handle.
        macro_rules! general {
            () => {
                self.score_general(g, store, path.steps, path.leaf, ATTR.then_some(attr))
            };
        }
        if depth >= TABLED_DEPTHS {
            // Only degenerate data builds trees this deep.
            return general!();
        }
        let norm = self.norm();
        let leaf = usize::from(path.leaf);
        let p = g.p;
        let q = load::<L, N>(store.get_n::<N>(self.leaves[leaf]));
        if q == p {
            let mass = self.masses.mass(leaf);
            let damp = 1.0 - f64::from(mass) / (2.0 * self.total_mass() as f64);
            let score = damp * score_seen(depth, mass) * norm;
            if ATTR {
                let share = score / (2 * N) as f64;
                attr[..2 * N].iter_mut().for_each(|x| *x += share);
            }
            return score;
        }
        let (mut lo, mut hi) = (q, q);
        let mut score = score_unseen_tabled(depth);
        let mut terms = Terms::<N>::default();
        if ATTR {
            terms.leaf(lanes::<L, N>(&p), lanes::<L, N>(&q), score);
        }
        // The uncached bottom of the path: each level adds its sibling's run
        // of leaves to the box.
        let mut uncached = UncachedLevels::new(path, self.box_min_mass);
        // Leaving this block means `p` is inside a box: no higher level
        // adds to the score.
        'climb: {
            for (level, a, b) in uncached.by_ref() {
                self.add_run_packed::<L, N>(store, a, b, &mut lo, &mut hi, scan);
                let (gap, span) = gap_span_packed(&p, &lo, &hi);
                if gap <= 0.0 {
                    break 'climb;
                }
                let prob = f64::from(gap) / f64::from(gap + span);
                if ATTR {
                    let (l, h) = (lanes::<L, N>(&lo), lanes::<L, N>(&hi));
                    terms.level(lanes::<L, N>(&p), l, h, level, prob, gap + span);
                }
                score = level_score(score, level, prob);
            }
            let mut level = uncached.level;
            let Some(rows) = self.box_rows::<N>() else {
                // Unreachable: `boxes` holds whole boxes of `2 * N` values.
                return general!();
            };
            while level > 0 {
                level -= 1;
                let Some((b_lo, b_hi)) = self.row_box(rows, steps[level].node()) else {
                    // Unreachable for a consistent tree (checked on restore).
                    return general!();
                };
                let (blo, bhi): ([f32x4; L], [f32x4; L]) = (load::<L, N>(b_lo), load::<L, N>(b_hi));
                let (gap, span) = gap_span_packed(&p, &blo, &bhi);
                if gap <= 0.0 {
                    break 'climb;
                }
                let prob = f64::from(gap) / f64::from(gap + span);
                if ATTR {
                    terms.level(lanes::<L, N>(&p), b_lo, b_hi, level, prob, gap + span);
                }
                score = level_score(score, level, prob);
            }
        }
        if ATTR {
            let (high, low) = attr[..2 * N].split_at_mut(N);
            for k in 0..N {
                high[k] += terms.high[k] * norm;
                low[k] += terms.low[k] * norm;
            }
        }
        score * norm
    }

    /// Grows the box (`lo`, `hi`) by the points of the leaves at positions
    /// `from..to` (`Tree::scan_run` with the box kept in registers), read as
    /// `scan` says: leaf by leaf, or four at a time with the last group
    /// padded with the run's last leaf (a min or max of a point already in
    /// the box changes nothing).
    #[inline(always)]
    pub(in crate::rcf) fn add_run_packed<const L: usize, const N: usize>(
        &self,
        store: &PointStore,
        from: u16,
        to: u16,
        lo: &mut [f32x4; L],
        hi: &mut [f32x4; L],
        scan: Scan,
    ) {
        let run = &self.leaves[usize::from(from)..usize::from(to)];
        let (mut l, mut h) = (*lo, *hi);
        match scan {
            Scan::Loop => {
                for &handle in run {
                    grow!(L, N, l, h, store, handle);
                }
            }
            Scan::Chunked if !run.is_empty() => {
                let last = run.len() - 1;
                let mut add = |handle: u32| grow!(L, N, l, h, store, handle);
                let mut i = 0;
                while i <= last {
                    add(run[i]);
                    add(run[(i + 1).min(last)]);
                    add(run[(i + 2).min(last)]);
                    add(run[(i + 3).min(last)]);
                    i += 4;
                }
            }
            Scan::Chunked => {}
        }
        (*lo, *hi) = (l, h);
    }

    /// The general climb, for paths the kernel does not take. Given the
    /// path's parts: a `Path` argument (24 bytes) is passed through memory,
    /// and the kernel stored it there on every climb.
    #[cold]
    fn score_general<const L: usize, const N: usize>(
        &self,
        g: &mut Packed<L, N>,
        store: &PointStore,
        steps: &[Step],
        leaf: u16,
        attr: Option<&mut [f64]>,
    ) -> f64 {
        let mut terms = Vec::new();
        let path = Path { steps, leaf };
        self.score_in(g, store, Some(path), &mut terms, attr)
    }
}

/// The uncached bottom of a score-only climb, bottom-up (see `climb.rs`):
/// for each level below the first node with at least `threshold` leaves,
/// the level and the run of leaves it adds to the box, its sibling's
/// (`sibling_run`). Afterwards `level` is where the cached part begins.
/// Shared by this kernel and `avx8.rs`, which differ only in how
/// they add a run and measure a box.
pub(in crate::rcf) struct UncachedLevels<'a> {
    steps: &'a [Step],
    pub(in crate::rcf) level: usize,
    from: u16,
    to: u16,
    threshold: u16,
}

impl<'a> UncachedLevels<'a> {
    #[inline(always)]
    pub(in crate::rcf) fn new(path: Path<'a>, threshold: u16) -> Self {
        Self {
            steps: path.steps,
            level: path.steps.len(),
            from: path.leaf,
            to: path.leaf + 1,
            threshold,
        }
    }
}

impl Iterator for UncachedLevels<'_> {
    type Item = (usize, u16, u16);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, u16, u16)> {
        if self.level == 0 {
            return None;
        }
        let s = self.steps[self.level - 1];
        if s.count() >= self.threshold {
            return None;
        }
        self.level -= 1;
        let (a, b) = sibling_run(s.start(), s.count(), self.from, self.to);
        (self.from, self.to) = (s.start(), s.start() + s.count());
        Some((self.level, a, b))
    }
}

/// The first `N` coordinates of packed registers.
#[inline(always)]
fn lanes<const L: usize, const N: usize>(x: &[f32x4; L]) -> &[f32] {
    &bytemuck::cast_slice(&x[..])[..N]
}

/// How a climb reads a sibling run of leaves into its box. Both give the
/// same box; they differ in speed only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::rcf) enum Scan {
    /// Leaf by leaf. Best for `Forest::score` on an unchanging forest: the
    /// same trees and similar points repeat the runs' lengths, so the
    /// branch predictor learns the loop's exits.
    Loop,
    /// Four leaves at a time (three in four sibling runs hold at most
    /// four), so the loop mostly runs once. More instructions, far fewer
    /// mispredicted loop exits: best while learning, where every update
    /// changes the trees.
    Chunked,
}

/// One tree's attribution terms before normalisation, as `climb.rs` keeps
/// them (high then low).
struct Terms<const N: usize> {
    high: [f64; N],
    low: [f64; N],
}

impl<const N: usize> Default for Terms<N> {
    fn default() -> Self {
        Self {
            high: [0.0; N],
            low: [0.0; N],
        }
    }
}

impl<const N: usize> Terms<N> {
    /// The leaf level: `p` is separated from the leaf's point `q`.
    #[inline(always)]
    fn leaf(&mut self, p: &[f32], q: &[f32], score: f64) {
        let (p, q) = (&p[..N], &q[..N]);
        // Summed in coordinate order, as `climb.rs` sums it.
        let gap_sum = p
            .iter()
            .zip(q)
            .fold(0.0f32, |s, (&x, &y)| s + (x - y).abs());
        leaf_terms(&mut self.high, &mut self.low, p, q, gap_sum, score);
    }

    /// An ancestor whose box (`lo`, `hi`) leaves `p` outside, with
    /// separation probability `prob` and `gap + span` = `total`
    /// (`Level::visit`).
    #[inline(always)]
    fn level(&mut self, p: &[f32], lo: &[f32], hi: &[f32], level: usize, prob: f64, total: f32) {
        let (keep, inv) = (1.0 - prob, score_unseen_tabled(level) / f64::from(total));
        let (high, low) = (&mut self.high, &mut self.low);
        attribute_terms(high, low, &p[..N], &lo[..N], &hi[..N], keep, inv);
    }
}

/// One level of the score recurrence (as `Level::visit` computes it).
#[inline(always)]
pub(in crate::rcf) fn level_score(below: f64, level: usize, prob: f64) -> f64 {
    prob * score_unseen_tabled(level) + (1.0 - prob) * below
}

#[cfg(test)]
mod tests {
    use super::Scan;
    use crate::rcf::Forest;
    use crate::rcf::geo::{Dyn, Geo, Packed};
    use crate::rcf::traversal::PathBuf;
    use crate::rng::Xoshiro256PlusPlus;

    fn forest(metrics: usize, shingle: usize) -> Forest {
        let mut f = Forest::builder()
            .trees(10)
            .sample_size(64)
            .input_dimensions(metrics)
            .shingle_size(shingle)
            .box_cache_min_mass(6)
            .seed(5)
            .build()
            .expect("valid config");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        for t in 0..3_000 {
            let row: Vec<f64> = (0..metrics)
                .map(|j| (t as f64 / (9.0 + j as f64)).sin() * 5.0 + rng.next_gaussian())
                .collect();
            f.update(&row).expect("dims match");
        }
        f
    }

    /// Per tree: the packed score and attribution against the slice-based
    /// general climb, for probes near and far from the data.
    fn compare<const L: usize, const N: usize>(f: &Forest, exact: bool) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let (store, trees) = f.groups_for_tests()[0];
        let mut path = PathBuf::default();
        let (mut terms, mut lo, mut hi) = (Vec::new(), vec![0.0; N], vec![0.0; N]);
        for probe in 0..300 {
            let spread = if probe % 10 == 0 { 40.0 } else { 6.0 };
            let p: Vec<f32> = (0..N)
                .map(|_| (spread * (rng.next_f64() - 0.5)) as f32)
                .collect();
            for (tree, scan) in trees
                .iter()
                .flat_map(|t| [(t, Scan::Loop), (t, Scan::Chunked)])
            {
                tree.descend(&p, &mut path);
                let path = path.as_path();
                let packed = tree.score_packed(&mut Packed::<L, N>::new(&p), store, path, scan);
                let mut g = Dyn {
                    p: &p,
                    lo: &mut lo,
                    hi: &mut hi,
                };
                let general = tree.score_in(&mut g, store, Some(path), &mut terms, None);
                let (mut a, mut b) = (vec![0.0; 2 * N], vec![0.0; 2 * N]);
                Packed::<L, N>::new(&p).score_tree(
                    tree,
                    store,
                    Some(path),
                    &mut terms,
                    Some(&mut a),
                    scan,
                );
                tree.score_in(&mut g, store, Some(path), &mut terms, Some(&mut b));
                if exact {
                    assert_eq!(
                        packed.to_bits(),
                        general.to_bits(),
                        "probe {probe} {scan:?}"
                    );
                    assert_eq!(a, b, "probe {probe} {scan:?}");
                } else {
                    assert!(
                        (packed - general).abs() <= 1e-5 * general.max(1.0),
                        "probe {probe} {scan:?}"
                    );
                    for (x, y) in a.iter().zip(&b) {
                        assert!(
                            (x - y).abs() <= 1e-5 * y.abs().max(1e-3),
                            "probe {probe} {scan:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn packed_kernel_equals_the_general_climb_bit_for_bit_at_eight_dims() {
        compare::<2, 8>(&forest(2, 4), true);
    }

    #[test]
    fn packed_kernel_matches_the_general_climb_at_padded_dims() {
        // Three lanes of four: the gap is summed in another order, so only
        // the last bits may differ.
        compare::<1, 3>(&forest(3, 1), false);
        compare::<2, 6>(&forest(2, 3), false);
    }
}
