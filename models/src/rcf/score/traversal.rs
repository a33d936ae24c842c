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

use crate::rcf::lookup::{FULL, Probe, Table};
use crate::rcf::tree::{LEAF, Node, Tree, is_leaf};
use crate::rng::Xoshiro256PlusPlus;

/// Trees descended per batch, one level each per round so that their node
/// loads are in flight together: a descent waits on memory, not on
/// arithmetic, so the few extra instructions of the lockstep pay for
/// themselves.
pub(in crate::rcf) const LANES: usize = 8;
const _: () = assert!(LANES == 8, "Lanes::descend unrolls eight lanes");

/// One level of a descent: an internal node, its run of leaves
/// `[start, start + count)` and its depth, packed in one word so that a
/// descent step stores once (`node | start << 16 | count << 32 | depth << 48`;
/// the depth lets the lockstep descent do without a length counter per lane).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Step(u64);

impl Step {
    /// The state of a lane whose tree does not fit the batch's node table:
    /// on a leaf, so it does not step, at a depth past `FAST_DEPTH`, so that
    /// `Lanes::descend` redoes it with the per-tree descent.
    const REDO: Step = Step(LEAF as u64 | (u16::MAX as u64) << 48);

    #[inline(always)]
    pub(in crate::rcf) fn new(node: u16, start: u16, count: u16) -> Self {
        Step(u64::from(node) | u64::from(start) << 16 | u64::from(count) << 32)
    }
    #[inline(always)]
    pub(in crate::rcf) fn node(self) -> u16 {
        self.0 as u16
    }
    #[inline(always)]
    pub(in crate::rcf) fn start(self) -> u16 {
        (self.0 >> 16) as u16
    }
    #[inline(always)]
    pub(in crate::rcf) fn count(self) -> u16 {
        (self.0 >> 32) as u16
    }
    /// Internal nodes above this step's node.
    #[inline(always)]
    fn depth(self) -> u32 {
        (self.0 >> 48) as u32
    }

    /// The step into `node`'s right child (`right`) or left child, whose
    /// run is the right or left part of this step's run. Both steps are
    /// computed from the word in place and one is chosen by a mask, without
    /// a branch: the side is a coin flip for the branch predictor. Left keeps
    /// `start` and sets `count` to `ll` (the left leaves); right adds `ll` to
    /// `start` and takes it from `count` (no field over- or underflows: the
    /// right run is not empty); both replace the node and add 1 to the depth
    /// (at most the sample size, so it fits its 16 bits). Selecting between
    /// two finished words costs fewer instructions than selecting the
    /// constants of one masked add.
    #[inline(always)]
    pub(in crate::rcf) fn child(self, node: &Node, right: bool) -> Step {
        const COUNT: u64 = 0xFFFF << 32;
        let ll = u64::from(node.left_leaves);
        let base = (self.0 & !0xFFFF).wrapping_add(1 << 48);
        let to_left = ((base & !COUNT) | ll << 32) | u64::from(node.left);
        let to_right = base.wrapping_add(ll << 16).wrapping_sub(ll << 32) | u64::from(node.right);
        // By mask, not `if`: the side is a coin flip for the branch predictor.
        let mask = 0u64.wrapping_sub(u64::from(right));
        Step(to_left ^ ((to_left ^ to_right) & mask))
    }
}

/// A descent's result: the internal nodes passed, root first, each with its
/// run of leaves, and the position of the leaf reached. Borrowed from a
/// `PathBuf` or `Lanes`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path<'a> {
    pub(in crate::rcf) steps: &'a [Step],
    /// Position of the leaf in the tree's leaf order.
    pub(in crate::rcf) leaf: u16,
}

impl Path<'_> {
    #[inline(always)]
    pub(in crate::rcf) fn depth(&self) -> usize {
        self.steps.len()
    }
    #[inline(always)]
    pub(in crate::rcf) fn node(&self, level: usize) -> u16 {
        self.steps[level].node()
    }
    #[inline(always)]
    pub(in crate::rcf) fn start(&self, level: usize) -> u16 {
        self.steps[level].start()
    }
    #[inline(always)]
    pub(in crate::rcf) fn count(&self, level: usize) -> u16 {
        self.steps[level].count()
    }

    /// Whether the path went to the left child of its node at `level`: the
    /// left child's run starts where its parent's does, the right child's
    /// later (a left subtree has at least one leaf).
    #[inline(always)]
    pub(in crate::rcf) fn went_left(&self, level: usize) -> bool {
        let child_start = match self.steps.get(level + 1) {
            Some(s) => s.start(),
            None => self.leaf,
        };
        child_start == self.start(level)
    }
}

/// An owned path (one tree's descent).
#[derive(Debug, Clone, Default)]
pub(crate) struct PathBuf {
    steps: Vec<Step>,
    pub(in crate::rcf) leaf: u16,
}

impl PathBuf {
    pub(in crate::rcf) fn clear(&mut self) {
        self.steps.clear();
        self.leaf = 0;
    }

    #[inline(always)]
    pub(in crate::rcf) fn push(&mut self, step: Step) {
        self.steps.push(step);
    }

    pub(in crate::rcf) fn as_path(&self) -> Path<'_> {
        Path {
            steps: &self.steps,
            leaf: self.leaf,
        }
    }
}

/// Steps a lane records in place; a path of this many steps or more (only
/// degenerate data, such as a monotone drift, builds trees that deep) is
/// redone by the per-tree descent into a growable buffer. A power of two, so
/// that a recorded length masked by `FAST_DEPTH - 1` needs no bounds check.
const FAST_DEPTH: usize = 64;
const _: () = assert!(FAST_DEPTH.is_power_of_two());

/// Paths of up to `LANES` trees descended in one batch.
#[derive(Debug, Clone)]
pub(crate) struct Lanes {
    /// Lane `k`'s path is `fast[k][..end[k].depth()]`, or `deep[k]` when at
    /// least `FAST_DEPTH` long.
    fast: Box<[[Step; FAST_DEPTH]; LANES]>,
    deep: Vec<PathBuf>,
    /// The step each lane ended on: its leaf (the run's start is the leaf's
    /// position) at the path's depth. Kept whole and decoded by `path`,
    /// which costs less than splitting it for every lane of every batch.
    end: [Step; LANES],
    /// Lanes that descended (their tree is non-empty and was wanted).
    live: u32,
    /// Lanes whose path is in `deep`.
    deep_lanes: u32,
}

impl Default for Lanes {
    fn default() -> Self {
        Self {
            fast: Box::new([[Step::default(); FAST_DEPTH]; LANES]),
            deep: Vec::new(),
            end: [Step::default(); LANES],
            live: 0,
            deep_lanes: 0,
        }
    }
}

impl Lanes {
    /// Lane `k`'s path, or `None` for an empty or skipped tree.
    #[inline]
    pub(in crate::rcf) fn path(&self, k: usize) -> Option<Path<'_>> {
        // The common case first, with one test and no bounds checks: `k` is
        // below `LANES` and a fast path's length below `FAST_DEPTH`, so the
        // masks change nothing.
        let lane = k % LANES;
        if (self.live & !self.deep_lanes) & (1 << lane) != 0 {
            let end = self.end[lane];
            let len = end.depth() as usize & (FAST_DEPTH - 1);
            return Some(Path {
                steps: &self.fast[lane][..len],
                leaf: end.start(),
            });
        }
        if self.live & (1 << k) == 0 {
            return None;
        }
        Some(self.deep[k].as_path())
    }

    /// Descends `p` in every tree of `trees` (at most `LANES`) for which `want`
    /// holds, recording each path.
    pub(in crate::rcf) fn descend(
        &mut self,
        trees: &[Tree],
        p: &[f32],
        want: impl Fn(usize) -> bool,
    ) {
        self.descend_inline(trees, p, want);
    }

    /// `descend`, inlined, so that the x86-64-v3 scoring variant
    /// (`isa.rs`) can compile it with its own features.
    #[inline(always)]
    pub(in crate::rcf) fn descend_inline(
        &mut self,
        trees: &[Tree],
        p: &[f32],
        want: impl Fn(usize) -> bool,
    ) {
        // Trees of the default sample size get a node table whose index
        // needs no bounds check (a tree of another size, which a forest
        // never holds, would be descended alone below).
        let full = trees.first().is_some_and(|t| t.nodes.len() == FULL);
        if p.len() <= 32 {
            let mut padded = [0.0f32; 32];
            padded[..p.len()].copy_from_slice(p);
            if full {
                self.descend_with::<&[Node; FULL]>(trees, &padded, &want);
            } else {
                self.descend_with::<&[Node]>(trees, &padded, &want);
            }
        } else {
            self.descend_with::<&[Node]>(trees, &p, &want);
        }
        self.deep_lanes = 0;
        for (k, t) in trees.iter().enumerate() {
            if self.live & (1 << k) != 0 && self.end[k].depth() as usize >= FAST_DEPTH {
                if self.deep.len() < LANES {
                    self.deep.resize(LANES, PathBuf::default());
                }
                t.descend(p, &mut self.deep[k]);
                self.deep_lanes |= 1 << k;
            }
        }
    }

    #[inline(always)]
    fn descend_with<'t, T: Table<'t>>(
        &mut self,
        trees: &'t [Tree],
        p: &impl Probe,
        want: &impl Fn(usize) -> bool,
    ) {
        debug_assert!(trees.len() <= LANES);
        let Some(first) = trees.first() else {
            self.live = 0;
            return;
        };
        // Each lane's state is the step it stands on, packed as a `Step`:
        // node (or `LEAF` once it reached a leaf), run start and count, and
        // depth (the lane's path length once it reached its leaf).
        // Every tree of a forest has the same node arena size.
        let arena = first.nodes.len();
        let mut state = [Step::new(LEAF, 0, 0); LANES];
        let Some(table) = T::of(&first.nodes, arena) else {
            // `descend` chose the table by the first tree's size.
            self.live = 0;
            return;
        };
        let mut nodes = [table; LANES];
        let mut live = 0u32;
        // Lanes whose tree does not fit the table, for `descend` to redo.
        let mut misfit = 0u32;
        for (k, t) in trees.iter().enumerate() {
            let wanted = want(k) && t.leaf_count() > 0;
            let Some(table) = T::of(&t.nodes, arena) else {
                if wanted {
                    live |= 1 << k;
                    misfit |= 1 << k;
                }
                continue;
            };
            nodes[k] = table;
            if wanted {
                state[k] = Step::new(t.root, 0, t.leaf_count() as u16);
                live |= 1 << k;
            }
        }
        let fast = &mut *self.fast;
        // All lanes step one level per round, so the node loads of different
        // trees are in flight together. The lanes are unrolled (constant
        // indices keep their state out of address arithmetic); a lane on a
        // leaf costs one test per round. Every lane still descending in
        // round `r` stands at depth `r`, so the round (one register for all
        // lanes) indexes the steps' stores, not each lane's depth field
        // (fewer instructions per step). A path past `FAST_DEPTH` wraps
        // around here and is redone by `descend`.
        macro_rules! step {
            ($k:expr, $moved:ident, $round:ident) => {
                let s = state[$k];
                if !is_leaf(s.node()) {
                    fast[$k][$round] = s;
                    let node = nodes[$k].node(s.node());
                    let right = p.at(node.cut_dim) > node.cut_value;
                    state[$k] = s.child(node, right);
                    $moved = true;
                }
            };
        }
        let mut round = 0usize;
        loop {
            let mut moved = false;
            step!(0, moved, round);
            step!(1, moved, round);
            step!(2, moved, round);
            step!(3, moved, round);
            step!(4, moved, round);
            step!(5, moved, round);
            step!(6, moved, round);
            step!(7, moved, round);
            if !moved {
                break;
            }
            round = (round + 1) % FAST_DEPTH;
        }
        if misfit != 0 {
            for (k, s) in state.iter_mut().enumerate() {
                if misfit & (1 << k) != 0 {
                    *s = Step::REDO;
                }
            }
        }
        self.end = state;
        self.live = live;
    }
}

/// The leaves a climb adds to its box at a node whose run starts at `start`
/// and holds `count` leaves, when the box already covers the child's run
/// `[from, to)`: the part of the run left of the child's or right of it (the
/// other part is empty), chosen without a branch since the side is a coin
/// flip.
#[inline(always)]
pub(in crate::rcf) fn sibling_run(start: u16, count: u16, from: u16, to: u16) -> (u16, u16) {
    [(to, start + count), (start, from)][usize::from(from > start)]
}

/// Reusable buffers for walks, so scoring allocates nothing per tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    pub(in crate::rcf) lanes: Lanes,
    /// Path of a deletion's descent.
    pub(in crate::rcf) path: PathBuf,
    pub(in crate::rcf) climb: Climb,
    pub(in crate::rcf) q: Vec<f32>,
    /// One tree's attribution terms as reported by `Group::process`.
    pub(in crate::rcf) terms: Vec<f64>,
}

/// Buffers of one climb.
#[derive(Debug, Clone, Default)]
pub(crate) struct Climb {
    pub(in crate::rcf) bmin: Vec<f32>,
    pub(in crate::rcf) bmax: Vec<f32>,
    /// One tree's attribution terms before normalisation.
    pub(in crate::rcf) attr: Vec<f64>,
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
            path: PathBuf::default(),
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
pub(in crate::rcf) enum Plan {
    /// The tree is empty.
    Empty,
    /// The point equals the point of the leaf the path reached.
    Duplicate,
    /// New parent above the path's node at `level` (or above its leaf when
    /// `level == path.depth()`).
    Split {
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
pub(in crate::rcf) fn draw_cut(
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
