//! A reference scorer: the forest's score and attribution computed the
//! plain way, as the oracle the fast paths are tested against.
//!
//! Part of the forest in `rcf/`, compiled for tests only. The fast code
//! (`score/`) descends eight trees in lockstep, caches boxes, scans leaf
//! runs and keeps points in SIMD registers; this module copies a forest's
//! trees into boxed nodes and scores them by recursion, recomputing every
//! bounding box from the leaves under the node. Nothing here is shared with
//! the fast paths except the trees it is given, so a bug in one of them shows
//! as a difference.
//!
//! The score is Guha et al. (ICML 2016)'s expected depth at which a random
//! cut isolates the point, with AWS random-cut-forest's weighting and
//! normalisation (the ones the fast code implements):
//! - a point `p` unseen by the tree falls into a leaf at depth `d`; isolating
//!   it there scores `1 / (d + 1)`;
//! - climbing back, at an ancestor at depth `k` whose bounding box is `B`, a
//!   random cut of `B ∪ {p}` isolates `p` with probability
//!   `prob = gap / (gap + span)` (`gap`: how far `p` lies outside `B`, summed
//!   over coordinates; `span`: the sum of `B`'s sides), so the score becomes
//!   `prob · 1/(k + 1) + (1 − prob) · below`; once `p` is inside `B`,
//!   `prob` is 0 and nothing above changes the score;
//! - a point equal to a leaf's point of multiplicity `m` scores
//!   `(1 − m / 2M) / (d + log2(m + 1))` (`M`: the tree's points);
//! - the tree's score is multiplied by `log2(M + 1)`, so an ordinary point
//!   scores about 1; the forest's is the mean over its trees.
//!
//! Attribution splits the same recurrence over coordinates and directions:
//! at the leaf, `1 / (d + 1)` in proportion to `|p − q|`; at each level, the
//! `prob` term in proportion to how far `p` sticks out of `B` on each side,
//! the terms below decaying by `1 − prob`; a duplicate spreads its score
//! evenly. The terms sum to the score.
//!
//! Floating point: the fast paths sum a box's `gap` and `span` in `f32`, in
//! four partial sums (coordinates `i mod 4`, paired as `(s0 + s2) + (s1 +
//! s3)`) at the dimensions they keep in SIMD registers and one after another
//! at the others (`Sums`); everything else is `f64` in the order written
//! above. This module does the same, so its results equal the fast paths'
//! bit for bit and a test may compare them exactly.

use super::forest::Forest;
use super::point_store::PointStore;
use super::tree::{Tree, is_leaf};

#[cfg(test)]
mod tests;

/// A tree node, boxed, as the paper draws it.
#[derive(Debug, Clone)]
pub(super) enum Node {
    Leaf {
        point: Vec<f32>,
        /// Copies of the point the tree holds.
        mass: u16,
    },
    Cut {
        /// `x[dim] <= value` goes left.
        dim: usize,
        value: f32,
        left: Box<Node>,
        right: Box<Node>,
    },
}

/// One tree: its root (none when empty) and its number of points.
#[derive(Debug, Clone)]
pub(super) struct RefTree {
    root: Option<Node>,
    mass: usize,
}

/// How the fast paths sum a box's per-coordinate gaps and sides (see the
/// module comment).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sums {
    FourLanes,
    InOrder,
}

impl Sums {
    fn for_dims(dims: usize) -> Self {
        match dims {
            2 | 3 | 4 | 6 | 8 | 12 | 16 | 32 => Sums::FourLanes,
            _ => Sums::InOrder,
        }
    }

    fn sum(self, xs: impl Iterator<Item = f32>) -> f32 {
        match self {
            Sums::InOrder => xs.fold(0.0, |s, x| s + x),
            Sums::FourLanes => {
                let mut s = [0.0f32; 4];
                for (i, x) in xs.enumerate() {
                    s[i % 4] += x;
                }
                (s[0] + s[2]) + (s[1] + s[3])
            }
        }
    }
}

impl RefTree {
    /// Copies `tree` (whose points live in `store`) into boxed nodes. A
    /// compact tree's node names its children; which leaf a leaf child is
    /// follows from the run of leaves each node covers.
    pub(super) fn from_tree(tree: &Tree, store: &PointStore) -> Self {
        let root = (tree.leaf_count() > 0)
            .then(|| Self::copy(tree, store, tree.root, 0, tree.leaf_count() as u16));
        Self {
            root,
            mass: tree.total_mass(),
        }
    }

    fn copy(tree: &Tree, store: &PointStore, r: u16, start: u16, count: u16) -> Node {
        if is_leaf(r) {
            assert_eq!(count, 1, "a leaf covers one position of the leaf order");
            return Node::Leaf {
                point: tree.leaf_point(store, start).to_vec(),
                mass: tree.masses.mass(usize::from(start)),
            };
        }
        let n = tree.nodes[usize::from(r)];
        let ll = n.left_leaves;
        Node::Cut {
            dim: usize::from(n.cut_dim),
            value: n.cut_value,
            left: Box::new(Self::copy(tree, store, n.left, start, ll)),
            right: Box::new(Self::copy(tree, store, n.right, start + ll, count - ll)),
        }
    }

    /// The tree's normalised score of `p` and its attribution (`2 · dims`
    /// terms: high, then low), both 0 for an empty tree.
    pub(super) fn score(&self, p: &[f32]) -> (f64, Vec<f64>) {
        let dims = p.len();
        let Some(root) = &self.root else {
            return (0.0, vec![0.0; 2 * dims]);
        };
        let norm = (self.mass as f64 + 1.0).log2();
        let (leaf, depth) = leaf_of(root, p, 0);
        if let Node::Leaf { point, mass } = leaf
            && point.as_slice() == p
        {
            let m = f64::from(*mass);
            let damp = 1.0 - m / (2.0 * self.mass as f64);
            let score = damp * (1.0 / (depth as f64 + (m + 1.0).log2())) * norm;
            return (score, vec![score / (2 * dims) as f64; 2 * dims]);
        }
        let (score, attr) = isolate(root, p, 0, Sums::for_dims(dims));
        (score * norm, attr.into_iter().map(|t| t * norm).collect())
    }
}

/// The leaf `p` falls into and its depth.
fn leaf_of<'a>(node: &'a Node, p: &[f32], depth: usize) -> (&'a Node, usize) {
    match node {
        Node::Leaf { .. } => (node, depth),
        Node::Cut {
            dim,
            value,
            left,
            right,
        } => {
            let child = if p[*dim] <= *value { left } else { right };
            leaf_of(child, p, depth + 1)
        }
    }
}

/// The bounding box of the points under `node`: minima, maxima.
fn bounds(node: &Node) -> (Vec<f32>, Vec<f32>) {
    match node {
        Node::Leaf { point, .. } => (point.clone(), point.clone()),
        Node::Cut { left, right, .. } => {
            let (mut lo, mut hi) = bounds(left);
            let (l2, h2) = bounds(right);
            for d in 0..lo.len() {
                lo[d] = lo[d].min(l2[d]);
                hi[d] = hi[d].max(h2[d]);
            }
            (lo, hi)
        }
    }
}

/// The unnormalised score and attribution of isolating `p` (not a point of
/// the tree) in the subtree `node` at `depth`.
fn isolate(node: &Node, p: &[f32], depth: usize, sums: Sums) -> (f64, Vec<f64>) {
    let dims = p.len();
    let unseen = 1.0 / (depth as f64 + 1.0);
    let near = match node {
        Node::Leaf { point, .. } => {
            // The leaf's point is separated from `p` for sure.
            let dist = p
                .iter()
                .zip(point)
                .fold(0.0f32, |s, (&x, &y)| s + (x - y).abs());
            let mut attr = vec![0.0; 2 * dims];
            for d in 0..dims {
                let diff = f64::from(p[d] - point[d]);
                let share = unseen / f64::from(dist);
                if diff > 0.0 {
                    attr[d] = diff * share;
                } else {
                    attr[dims + d] = -diff * share;
                }
            }
            return (unseen, attr);
        }
        Node::Cut {
            dim,
            value,
            left,
            right,
        } => {
            if p[*dim] <= *value {
                left
            } else {
                right
            }
        }
    };
    let (below, mut attr) = isolate(near, p, depth + 1, sums);
    let (lo, hi) = bounds(node);
    let above = |d: usize| (p[d] - hi[d]).max(0.0);
    let under = |d: usize| (lo[d] - p[d]).max(0.0);
    let gap = sums.sum((0..dims).map(|d| above(d) + under(d)));
    if gap <= 0.0 {
        return (below, attr);
    }
    let span = sums.sum((0..dims).map(|d| hi[d] - lo[d]));
    let prob = f64::from(gap) / f64::from(gap + span);
    let (keep, share) = (1.0 - prob, unseen / f64::from(gap + span));
    for d in 0..dims {
        attr[d] = f64::from(above(d)) * share + keep * attr[d];
        attr[dims + d] = f64::from(under(d)) * share + keep * attr[dims + d];
    }
    (prob * unseen + keep * below, attr)
}

/// Every tree of a forest, in the forest's order.
#[derive(Debug, Clone)]
pub(super) struct RefForest {
    trees: Vec<RefTree>,
}

impl RefForest {
    pub(super) fn from_forest(f: &Forest) -> Self {
        let trees = f
            .groups_for_tests()
            .into_iter()
            .flat_map(|(store, trees)| trees.iter().map(|t| RefTree::from_tree(t, store)))
            .collect();
        Self { trees }
    }

    /// The forest's score of the point `p` and its attribution: the means
    /// over the trees, summed in tree order.
    pub(super) fn score(&self, p: &[f32]) -> (f64, Vec<f64>) {
        let (mut total, mut attr) = (0.0, vec![0.0; 2 * p.len()]);
        for t in &self.trees {
            let (s, a) = t.score(p);
            total += s;
            attr.iter_mut().zip(&a).for_each(|(x, y)| *x += y);
        }
        let n = self.trees.len() as f64;
        attr.iter_mut().for_each(|x| *x /= n);
        (total / n, attr)
    }
}
