//! The leaf-to-root half of a tree walk (`Tree::climb`): scores a point in
//! one tree and, given a generator, plans where it would be inserted. The
//! descent that produces the path lives in `traversal.rs`, which also
//! documents the score formula.
//!
//! This is the hot loop of the forest, so the point and the running bounding
//! box come wrapped in a `Geo` (`geo.rs`: SIMD registers for the common
//! dimensions, one monomorphised climb each; slices otherwise), and a score
//! without attribution or planning takes the leaner `kernel.rs`. Below the
//! box cache threshold every node is uncached (masses shrink downwards), so
//! the boxes of the bottom levels grow by a plain leaf walk of each sibling
//! subtree, which never looks for cached boxes.

use super::boxes::{extend, pos};
use super::geo::{Dyn, Geo, Packed};
use super::point_store::PointStore;
use super::traversal::{Climb, Plan, draw_cut};
use super::tree::{LEAF_BIT, Tree, is_leaf};
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
pub(super) fn score_seen(depth: usize, mass: u16) -> f64 {
    1.0 / (depth as f64 + (f64::from(mass) + 1.0).log2())
}

#[inline(always)]
pub(super) fn score_unseen(depth: usize) -> f64 {
    match INV.get(depth) {
        Some(&x) => x,
        None => 1.0 / (depth as f64 + 1.0),
    }
}

/// What a climb accumulates level by level.
struct Level<'a, 'r> {
    leaf: u16,
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
        if let Some(r) = self.rng.as_deref_mut() {
            if r.next_f64() < prob {
                let (cut_dim, cut_value) = draw_cut(p, lo, hi, gap, r);
                self.plan = Plan::Split {
                    leaf: self.leaf,
                    level,
                    cut_dim,
                    cut_value,
                };
            }
        }
    }
}

/// One level of the attribution recurrence: every term decays by `keep` and
/// gains how far `p` sticks out of the box (`lo`, `hi`) on its side, times
/// `inv`. Callers that know the dimension pass slices cut to it, so the
/// loop is unrolled.
#[inline(always)]
pub(super) fn attribute_terms(
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
pub(super) fn leaf_terms(
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
    /// insertion, climbing from `leaf` (`None` for an empty tree) reached
    /// through `path`. `attr`, if given, receives `2 * dims` attribution terms
    /// (high then low) that are *added* to, already normalised.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn climb(
        &self,
        store: &PointStore,
        p: &[f32],
        leaf: Option<u16>,
        path: &[u16],
        c: &mut Climb,
        attr: Option<&mut [f64]>,
        rng: Option<&mut Xoshiro256PlusPlus>,
    ) -> (f64, Plan) {
        let Some(leaf) = leaf else {
            return (0.0, Plan::Empty);
        };
        match self.dims {
            2 => self.climb_in(&mut Packed::<1, 2>::new(p), store, leaf, path, c, attr, rng),
            3 => self.climb_in(&mut Packed::<1, 3>::new(p), store, leaf, path, c, attr, rng),
            4 => self.climb_in(&mut Packed::<1, 4>::new(p), store, leaf, path, c, attr, rng),
            6 => self.climb_in(&mut Packed::<2, 6>::new(p), store, leaf, path, c, attr, rng),
            8 => self.climb_in(&mut Packed::<2, 8>::new(p), store, leaf, path, c, attr, rng),
            12 => self.climb_in(
                &mut Packed::<3, 12>::new(p),
                store,
                leaf,
                path,
                c,
                attr,
                rng,
            ),
            16 => self.climb_in(
                &mut Packed::<4, 16>::new(p),
                store,
                leaf,
                path,
                c,
                attr,
                rng,
            ),
            32 => self.climb_in(
                &mut Packed::<8, 32>::new(p),
                store,
                leaf,
                path,
                c,
                attr,
                rng,
            ),
            _ => {
                let mut g = Dyn {
                    p,
                    lo: &mut c.bmin[..],
                    hi: &mut c.bmax[..],
                };
                self.climb_with(&mut g, store, leaf, path, &mut c.attr, attr, rng)
            }
        }
    }

    /// `climb` without learning, for a point already wrapped in a `Geo` (so
    /// that a forest wraps it once per point rather than once per tree).
    #[inline(always)]
    pub(super) fn score_in<G: Geo>(
        &self,
        g: &mut G,
        store: &PointStore,
        leaf: Option<u16>,
        path: &[u16],
        tree_attr: &mut Vec<f64>,
        attr: Option<&mut [f64]>,
    ) -> f64 {
        match leaf {
            Some(leaf) => {
                self.climb_with(g, store, leaf, path, tree_attr, attr, None)
                    .0
            }
            None => 0.0,
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn climb_in<G: Geo>(
        &self,
        g: &mut G,
        store: &PointStore,
        leaf: u16,
        path: &[u16],
        c: &mut Climb,
        attr: Option<&mut [f64]>,
        rng: Option<&mut Xoshiro256PlusPlus>,
    ) -> (f64, Plan) {
        if rng.is_none() {
            // No insertion to plan: the geometry's own (possibly faster) climb.
            let score = g.score_tree(self, store, Some(leaf), path, &mut c.attr, attr);
            return (score, Plan::Empty);
        }
        self.climb_with(g, store, leaf, path, &mut c.attr, attr, rng)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn climb_with<G: Geo>(
        &self,
        g: &mut G,
        store: &PointStore,
        leaf: u16,
        path: &[u16],
        tree_attr: &mut Vec<f64>,
        attr: Option<&mut [f64]>,
        rng: Option<&mut Xoshiro256PlusPlus>,
    ) -> (f64, Plan) {
        let dims = self.dims;
        let depth = path.len();
        let norm = self.norm();
        let q = store.get(self.leaf_point[leaf as usize]);
        if q == g.p() {
            let mass = self.leaf_mass[leaf as usize];
            let damp = 1.0 - f64::from(mass) / (2.0 * self.total_mass() as f64);
            let score = damp * score_seen(depth, mass) * norm;
            if let Some(a) = attr {
                let share = score / (2 * dims) as f64;
                a.iter_mut().for_each(|x| *x += share);
            }
            return (score, Plan::Duplicate { leaf });
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
                leaf,
                level: depth,
                cut_dim,
                cut_value,
            };
        }
        let mut acc = Level {
            leaf,
            score,
            attr: with_attr.then_some(&mut tree_attr[..]),
            rng,
            plan,
        };
        // Masses grow upwards and a node caches its box iff its mass reaches
        // `box_min_mass`, so the path splits into an uncached bottom part,
        // whose box grows by each sibling subtree's leaves, and a cached top
        // part read in place.
        let mut child = leaf | LEAF_BIT;
        let mut level = depth;
        let mut inside = false;
        while level > 0 {
            let n = path[level - 1];
            let Some(sibling) = self.uncached_sibling(n, child) else {
                break;
            };
            level -= 1;
            child = n;
            g.add_subtree(self, store, sibling);
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
                let n = path[level];
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
                        let node = &self.nodes[n as usize];
                        let (mut lo, mut hi) = (g.lo().to_vec(), g.hi().to_vec());
                        self.union_box(store, node.left, &mut lo, &mut hi);
                        self.union_box(store, node.right, &mut lo, &mut hi);
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

    /// Grows the box (`lo`, `hi`) by the points of the subtree at `r`, which
    /// must hold no cached box (any subtree below the cache threshold). The
    /// slice version of `add_leaves_packed` (`kernel.rs`), which keeps its
    /// box in registers; sharing one walk through a closure cost the packed
    /// score 9 % more instructions (callgrind).
    #[inline(always)]
    pub(super) fn add_leaves(&self, store: &PointStore, r: u16, lo: &mut [f32], hi: &mut [f32]) {
        let mut stack = [0u16; 16];
        let mut sp = 0usize;
        let mut cur = r;
        loop {
            if is_leaf(cur) {
                extend(
                    lo,
                    hi,
                    store.get(self.leaf_point[usize::from(cur & !LEAF_BIT)]),
                );
                if sp == 0 {
                    break;
                }
                sp -= 1;
                cur = stack[sp];
            } else {
                let node = &self.nodes[usize::from(cur)];
                if sp < stack.len() {
                    stack[sp] = node.right;
                    sp += 1;
                } else {
                    self.add_leaves_deep(store, node.right, lo, hi);
                }
                cur = node.left;
            }
        }
    }

    /// `add_leaves` for the rare subtree deeper than its explicit stack.
    #[inline(never)]
    fn add_leaves_deep(&self, store: &PointStore, r: u16, lo: &mut [f32], hi: &mut [f32]) {
        self.add_leaves(store, r, lo, hi);
    }

    /// The sibling of `child` under node `n` if `n` is below the box cache
    /// threshold (`None`: `n` caches its box, the climb's top part starts).
    /// Masses grow upwards and a node caches its box iff its mass reaches
    /// `box_min_mass`: the same test as "has a cached box" for a consistent
    /// tree, without another load; the cached part copes with a missing box.
    #[inline(always)]
    pub(super) fn uncached_sibling(&self, n: u16, child: u16) -> Option<u16> {
        let node = &self.nodes[usize::from(n)];
        if node.mass >= self.box_min_mass {
            return None;
        }
        Some(if node.left == child {
            node.right
        } else {
            node.left
        })
    }
}
