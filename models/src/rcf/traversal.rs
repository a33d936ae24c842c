//! The root-to-leaf-and-back walk that scores a point in one tree and, in the
//! same pass, chooses where the point would be inserted. `LANES` trees are
//! descended in lockstep (`Lanes`), then climbed tree by tree.
//!
//! Score (Guha et al. 2016, as normalised by AWS's random-cut-forest library):
//! descend to the leaf the point falls into, then climb back. At the leaf the
//! score is `1 / (depth + 1)` for an unseen point, or the damped "seen" score
//! for a duplicate. At each ancestor of depth `k` with bounding box `B`, a random
//! cut of `B ∪ {p}` would have isolated `p` there with probability
//! `prob = (span(B ∪ p) - span(B)) / span(B ∪ p)`, so
//! `score = prob / (k + 1) + (1 - prob) * score`. Once `p` is inside `B`,
//! `prob` is 0 for every higher box and the climb stops. The tree's score is
//! multiplied by `log2(mass + 1)` so an ordinary point scores about 1.
//!
//! The same probabilities drive insertion: the new leaf hangs above the highest
//! node where an independent `Bernoulli(prob)` fires, which is distributed
//! exactly as the paper's top-down cut-by-cut insertion. Attribution splits the
//! `prob` term of every level over dimensions and directions in proportion to
//! how far `p` sticks out of `B` on each side, so it sums to the score.

use super::tree::{LEAF_BIT, NONE, Tree};
use crate::rng::Xoshiro256PlusPlus;

/// Trees descended per batch, one level each per round so that their node
/// loads are in flight together. This costs ~4 % more instructions than one
/// tight loop per tree and saves 14–17 % of the time (BENCHMARKS.md, forest
/// round 4; an earlier lockstep was judged on instruction counts alone).
pub(super) const LANES: usize = 8;

/// Paths of up to `LANES` trees descended in one batch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lanes {
    /// Lane `k`'s path is `paths[k * stride..k * stride + len[k]]`.
    paths: Vec<u16>,
    /// Longest possible path plus one (a tree's node count plus one).
    stride: usize,
    len: [usize; LANES],
    /// The leaf each lane reached (`NONE` for an empty or skipped tree).
    end: [u16; LANES],
}

impl Lanes {
    #[inline]
    pub(super) fn path(&self, k: usize) -> &[u16] {
        let s = k * self.stride;
        &self.paths[s..s + self.len[k]]
    }

    /// The leaf lane `k` reached, or `None` for an empty or skipped tree.
    #[inline]
    pub(super) fn leaf(&self, k: usize) -> Option<u16> {
        (self.end[k] != NONE).then_some(self.end[k] & !LEAF_BIT)
    }

    /// Descends `p` in every tree of `trees` (at most `LANES`) for which `want`
    /// holds, recording each path.
    pub(super) fn descend(&mut self, trees: &[Tree], p: &[f32], want: impl Fn(usize) -> bool) {
        debug_assert!(trees.len() <= LANES);
        let Some(first) = trees.first() else { return };
        let stride = first.nodes.len() + 1;
        if self.stride != stride || self.paths.len() < LANES * stride {
            self.stride = stride;
            self.paths.clear();
            self.paths.resize(LANES * stride, 0);
        }
        // Lanes without a tree, skipped or empty trees start on a leaf-like
        // reference (`NONE` has `LEAF_BIT` set) and never move.
        let mut cur = [NONE; LANES];
        let mut nodes: [&[super::tree::Node]; LANES] = [&[]; LANES];
        for (k, t) in trees.iter().enumerate() {
            nodes[k] = &t.nodes[..];
            if want(k) {
                cur[k] = t.root;
            }
        }
        let mut len = [0usize; LANES];
        let lanes = trees.len();
        // All lanes step one level per round, so the node loads of different
        // trees are in flight together (a descent is a chain of dependent
        // loads over a working set larger than L2).
        loop {
            let mut moved = false;
            for k in 0..LANES {
                let n = cur[k];
                if n & LEAF_BIT == 0 {
                    self.paths[k * stride + len[k]] = n;
                    len[k] += 1;
                    cur[k] = nodes[k][usize::from(n)].next(p);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        self.len = len;
        self.end[..lanes].copy_from_slice(&cur[..lanes]);
    }
}

/// Reusable buffers for walks, so scoring allocates nothing per tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    pub(super) lanes: Lanes,
    /// Path of a deletion's descent.
    pub(super) path: Vec<u16>,
    pub(super) climb: Climb,
    pub(super) q: Vec<f32>,
    /// One tree's attribution terms as reported by `Group::process`.
    pub(super) terms: Vec<f64>,
}

/// Buffers of one climb.
#[derive(Debug, Clone, Default)]
pub(crate) struct Climb {
    pub(super) bmin: Vec<f32>,
    pub(super) bmax: Vec<f32>,
    /// One tree's attribution terms before normalisation.
    pub(super) attr: Vec<f64>,
}

impl Scratch {
    /// Sizes the buffers for points of `dims` coordinates.
    pub(crate) fn ensure(&mut self, dims: usize) {
        self.climb.bmin.resize(dims, 0.0);
        self.climb.bmax.resize(dims, 0.0);
    }

    pub(crate) fn new(dims: usize) -> Self {
        Self {
            lanes: Lanes::default(),
            path: Vec::with_capacity(64),
            climb: Climb {
                bmin: vec![0.0; dims],
                bmax: vec![0.0; dims],
                attr: Vec::with_capacity(2 * dims),
            },
            q: Vec::with_capacity(dims),
            terms: Vec::with_capacity(2 * dims),
        }
    }
}

/// Where and how a walked point would be inserted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Plan {
    /// The tree is empty.
    Empty,
    /// The point equals the point of `leaf`.
    Duplicate { leaf: u16 },
    /// New parent above `path[level]` (or above `leaf` when `level == path.len()`).
    Split {
        leaf: u16,
        level: usize,
        cut_dim: u16,
        cut_value: f32,
    },
}

/// Largest `f32` strictly below `x` (for finite `x`).
#[inline]
fn next_below(x: f32) -> f32 {
    if x == 0.0 {
        -f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(x.to_bits() - 1)
    } else {
        f32::from_bits(x.to_bits() + 1)
    }
}

/// Draws a cut uniformly from the region of `box ∪ p` outside `box`. With the
/// rule "go left iff `x[dim] <= cut`", the cut sends `p` and the box to
/// different sides; f32 rounding is clamped so that stays true.
pub(super) fn draw_cut(
    p: &[f32],
    bmin: &[f32],
    bmax: &[f32],
    gap_sum: f32,
    rng: &mut Xoshiro256PlusPlus,
) -> (u16, f32) {
    let mut r = (rng.next_f64() * f64::from(gap_sum)) as f32;
    let mut last = 0;
    for d in 0..p.len() {
        let hi = (p[d] - bmax[d]).max(0.0);
        let lo = (bmin[d] - p[d]).max(0.0);
        let gap = hi + lo;
        if gap <= 0.0 {
            continue;
        }
        last = d;
        if r < gap {
            return (d as u16, cut_in_gap(p[d], bmin[d], bmax[d], r));
        }
        r -= gap;
    }
    // Rounding left `r` at the end of the range: use the last dimension with room.
    let d = last;
    let r = (p[d] - bmax[d]).max(0.0) + (bmin[d] - p[d]).max(0.0);
    (d as u16, cut_in_gap(p[d], bmin[d], bmax[d], r * 0.5))
}

#[inline]
fn cut_in_gap(p: f32, lo: f32, hi: f32, offset: f32) -> f32 {
    if p > hi {
        // Box left, point right: need hi <= cut < p.
        (hi + offset).max(hi).min(next_below(p))
    } else {
        // Point left, box right: need p <= cut < lo.
        (p + offset).max(p).min(next_below(lo))
    }
}
