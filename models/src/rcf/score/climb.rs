//! The leaf-to-root half of a tree walk (`Tree::climb`): scores a point in
//! one tree and, given a generator, plans where it would be inserted. The
//! descent that produces the path lives in `traversal.rs`, which also
//! documents the score formula.
//!
//! This is the hot loop of the forest, so the point and the running bounding
//! box come wrapped in a `Geo` (`geo.rs`: SIMD registers for the common
//! dimensions, one monomorphised climb each; slices otherwise), and a score
//! without attribution or planning takes the leaner `kernel.rs`. Below the
//! box cache threshold every node is uncached (leaf counts shrink
//! downwards), so the boxes of the bottom levels grow by scanning each
//! sibling's run of leaves, which the tree keeps contiguous.

use crate::rcf::boxes::pos;
use crate::rcf::geo::{Dyn, Geo, Packed};
use crate::rcf::kernel::Scan;
use crate::rcf::point_store::PointStore;
use crate::rcf::traversal::{Climb, Path, Plan, draw_cut, sibling_run};
use crate::rcf::tree::Tree;
use crate::rng::Xoshiro256PlusPlus;

/// `1 / (k + 1)` for the depths of ordinary trees (saves a division per
/// level; computed exactly as at run time).
const INV: [f64; 64] = {
    let mut t = [0.0; 64];
    let mut k = 0;
    while k < 64 {
        t[k] = 1.0 / (k as f64 + 1.0);
        k += 1;
    }
    t
};

/// AWS's "seen" score for a point already stored with multiplicity `mass`.
#[inline]
pub(in crate::rcf) fn score_seen(depth: usize, mass: u16) -> f64 {
    1.0 / (depth as f64 + (f64::from(mass) + 1.0).log2())
}

/// Depths below this take `score_unseen` from a table.
pub(in crate::rcf) const TABLED_DEPTHS: usize = INV.len();

/// `score_unseen` for a depth below `TABLED_DEPTHS`, without a bounds
/// check (the mask is a no-op there).
#[inline(always)]
pub(in crate::rcf) fn score_unseen_tabled(depth: usize) -> f64 {
    const _: () = assert!(TABLED_DEPTHS.is_power_of_two());
    INV[depth % TABLED_DEPTHS]
}

#[inline(always)]
pub(in crate::rcf) fn score_unseen(depth: usize) -> f64 {
    match INV.get(depth) {
        Some(&x) => x,
        None => 1.0 / (depth as f64 + 1.0),
    }
}

/// What a climb accumulates level by level.
struct Level<'a, 'r> {
    /// Unnormalised score so far.
    score: f64,
    /// Unnormalised attribution so far (high then low), if wanted.
    attr: Option<&'a mut [f64]>,
    rng: Option<&'r mut Xoshiro256PlusPlus>,
    plan: Plan,
}

impl Level<'_, '_> {
    /// Accounts for the ancestor at depth `level` whose box (`lo`, `hi`)
    /// leaves `p` outside by `gap` and has side lengths summing to `span`.
    #[inline(always)]
    fn visit<G: Geo>(&mut self, g: &G, level: usize, gap: f32, span: f32, lo: &[f32], hi: &[f32]) {
        let p = g.p();
        let prob = f64::from(gap) / f64::from(gap + span);
        let unseen = score_unseen(level);
        self.score = prob * unseen + (1.0 - prob) * self.score;
        if let Some(a) = self.attr.as_deref_mut() {
            g.attribute_level(a, lo, hi, 1.0 - prob, unseen / f64::from(gap + span));
        }
        if let Some(r) = self.rng.as_deref_mut()
            && r.next_f64() < prob
        {
            let (cut_dim, cut_value) = draw_cut(p, lo, hi, gap, r);
            self.plan = Plan::Split {
                level,
                cut_dim,
                cut_value,
            };
        }
    }
}

/// One level of the attribution recurrence: every term decays by `keep` and
/// gains how far `p` sticks out of the box (`lo`, `hi`) on its side, times
/// `inv`. Callers that know the dimension pass slices cut to it, so the
/// loop is unrolled.
#[inline(always)]
pub(in crate::rcf) fn attribute_terms(
    high: &mut [f64],
    low: &mut [f64],
    p: &[f32],
    lo: &[f32],
    hi: &[f32],
    keep: f64,
    inv: f64,
) {
    for ((((h, l), &x), &b), &t) in high.iter_mut().zip(low).zip(p).zip(lo).zip(hi) {
        *h = f64::from(pos(x - t)) * inv + keep * *h;
        *l = f64::from(pos(b - x)) * inv + keep * *l;
    }
}

/// The leaf level's attribution terms: `p` is separated from the leaf's
/// point `q` (at distance `gap_sum`, summed over coordinates), each
/// coordinate's share of `score` on the side `p` lies.
#[inline(always)]
pub(in crate::rcf) fn leaf_terms(
    high: &mut [f64],
    low: &mut [f64],
    p: &[f32],
    q: &[f32],
    gap_sum: f32,
    score: f64,
) {
    let inv = score / f64::from(gap_sum);
    for (((h, l), &x), &y) in high.iter_mut().zip(low).zip(p).zip(q) {
        let diff = f64::from(x - y);
        if diff > 0.0 {
            *h = diff * inv;
        } else {
            *l = -diff * inv;
        }
    }
}

impl Tree {
    /// Scores `p` against this tree (normalised) and, given `rng`, plans its
    /// insertion, climbing back along `path` (`None` for an empty tree).
    /// `attr`, if given, receives `2 * dims` attribution terms (high then
    /// low) that are *added* to, already normalised. Inlined into the
    /// learning loop's instruction-set variants (`isa.rs`).
    #[inline(always)]
    pub(in crate::rcf) fn climb(
        &self,
        store: &PointStore,
        p: &[f32],
        path: Option<Path<'_>>,
        c: &mut Climb,
        attr: Option<&mut [f64]>,
        rng: Option<&mut Xoshiro256PlusPlus>,
    ) -> (f64, Plan) {
        let Some(path) = path else {
            return (0.0, Plan::Empty);
        };
        match self.dims {
            2 => self.climb_in(&mut Packed::<1, 2>::new(p), store, path, c, attr, rng),
            3 => self.climb_in(&mut Packed::<1, 3>::new(p), store, path, c, attr, rng),
            4 => self.climb_in(&mut Packed::<1, 4>::new(p), store, path, c, attr, rng),
            6 => self.climb_in(&mut Packed::<2, 6>::new(p), store, path, c, attr, rng),
            8 => self.climb_in(&mut Packed::<2, 8>::new(p), store, path, c, attr, rng),
            12 => self.climb_in(&mut Packed::<3, 12>::new(p), store, path, c, attr, rng),
            16 => self.climb_in(&mut Packed::<4, 16>::new(p), store, path, c, attr, rng),
            32 => self.climb_in(&mut Packed::<8, 32>::new(p), store, path, c, attr, rng),
            _ => {
                let mut g = Dyn {
                    p,
                    lo: &mut c.bmin[..],
                    hi: &mut c.bmax[..],
                };
                self.climb_with(&mut g, store, path, &mut c.attr, attr, rng)
            }
        }
    }

    /// `climb` without learning, for a point already wrapped in a `Geo` (so
    /// that a forest wraps it once per point rather than once per tree).
    #[inline(always)]
    pub(in crate::rcf) fn score_in<G: Geo>(
        &self,
        g: &mut G,
        store: &PointStore,
        path: Option<Path<'_>>,
        tree_attr: &mut Vec<f64>,
        attr: Option<&mut [f64]>,
    ) -> f64 {
        match path {
            Some(path) => self.climb_with(g, store, path, tree_attr, attr, None).0,
            None => 0.0,
        }
    }

    #[inline(always)]
    fn climb_in<G: Geo>(
        &self,
        g: &mut G,
        store: &PointStore,
        path: Path<'_>,
        c: &mut Climb,
        attr: Option<&mut [f64]>,
        rng: Option<&mut Xoshiro256PlusPlus>,
    ) -> (f64, Plan) {
        if rng.is_none() {
            // No insertion to plan: the geometry's own (possibly faster) climb.
            let score = g.score_tree(self, store, Some(path), &mut c.attr, attr, Scan::Chunked);
            return (score, Plan::Empty);
        }
        self.climb_with(g, store, path, &mut c.attr, attr, rng)
    }

    #[inline(always)]
    fn climb_with<G: Geo>(
        &self,
        g: &mut G,
        store: &PointStore,
        path: Path<'_>,
        tree_attr: &mut Vec<f64>,
        attr: Option<&mut [f64]>,
        rng: Option<&mut Xoshiro256PlusPlus>,
    ) -> (f64, Plan) {
        let dims = self.dims;
        let depth = path.depth();
        let norm = self.norm();
        let leaf = path.leaf;
        let q = self.leaf_point(store, leaf);
        if q == g.p() {
            let mass = self.masses.mass(usize::from(leaf));
            let damp = 1.0 - f64::from(mass) / (2.0 * self.total_mass() as f64);
            let score = damp * score_seen(depth, mass) * norm;
            if let Some(a) = attr {
                let share = score / (2 * dims) as f64;
                a.iter_mut().for_each(|x| *x += share);
            }
            return (score, Plan::Duplicate);
        }
        g.reset(q);
        let p = g.p();
        // Leaf level: a single point is always separated from a different one.
        let mut gap_sum = 0.0f32;
        for (&x, &y) in p.iter().zip(q) {
            gap_sum += (x - y).abs();
        }
        let score = score_unseen(depth);
        let with_attr = attr.is_some();
        if with_attr {
            tree_attr.clear();
            tree_attr.resize(2 * dims, 0.0);
            let (high, low) = tree_attr.split_at_mut(dims);
            leaf_terms(high, low, p, q, gap_sum, score);
        }
        let mut rng = rng;
        let mut plan = Plan::Empty;
        if let Some(r) = rng.as_deref_mut() {
            let (cut_dim, cut_value) = draw_cut(p, q, q, gap_sum, r);
            plan = Plan::Split {
                level: depth,
                cut_dim,
                cut_value,
            };
        }
        let mut acc = Level {
            score,
            attr: with_attr.then_some(&mut tree_attr[..]),
            rng,
            plan,
        };
        // Leaf counts grow upwards and a node caches its box iff its count
        // reaches `box_min_mass`, so the path splits into an uncached bottom
        // part, whose box grows by each sibling's run of leaves (the run of
        // the node less the run of the child already in the box), and a
        // cached top part read in place.
        let (mut from, mut to) = (leaf, leaf + 1);
        let mut level = depth;
        let mut inside = false;
        while level > 0 {
            let count = path.count(level - 1);
            if count >= self.box_min_mass {
                break;
            }
            level -= 1;
            let start = path.start(level);
            let (a, b) = sibling_run(start, count, from, to);
            g.add_run(self, store, a, b);
            (from, to) = (start, start + count);
            let (gap, span) = g.gap_span();
            if gap <= 0.0 {
                inside = true;
                break;
            }
            acc.visit(g, level, gap, span, g.lo(), g.hi());
        }
        if !inside {
            while level > 0 {
                level -= 1;
                let n = path.node(level);
                match self.cached_box(n) {
                    Some((lo, hi)) => {
                        let (gap, span) = g.gap_span_of(lo, hi);
                        if gap <= 0.0 {
                            break;
                        }
                        acc.visit(g, level, gap, span, lo, hi);
                    }
                    None => {
                        // Unreachable for a consistent tree (checked on restore).
                        let (mut lo, mut hi) = (g.lo().to_vec(), g.hi().to_vec());
                        let (start, count) = (path.start(level), path.count(level));
                        self.union_node(store, n, start, count, &mut lo, &mut hi);
                        let (gap, span) = g.gap_span_of(&lo, &hi);
                        if gap <= 0.0 {
                            break;
                        }
                        acc.visit(g, level, gap, span, &lo, &hi);
                    }
                }
            }
        }
        let (score, plan) = (acc.score, acc.plan);
        if let Some(a) = attr {
            for (a, t) in a.iter_mut().zip(tree_attr.iter()) {
                *a += t * norm;
            }
        }
        (score * norm, plan)
    }
}
