//! One random cut tree: compact storage plus structural insert and delete.
//!
//! Part of the forest in `rcf/`. A tree holds the points its sampler kept and
//! is updated as in Guha et al. (ICML 2016): insertion places a new leaf where
//! a random cut of the grown bounding box first separates the point, deletion
//! splices the leaf's parent out. The walk that scores a point and chooses the
//! insertion place lives in `traversal.rs` (descent) and `climb.rs`.
//!
//! Layout: internal nodes are a `Vec` of 12-byte records indexed by `u16` (no
//! per-node allocation, no parent pointers). Leaves are kept **in order**: the
//! tree's leaves, read left to right, are `leaves` (point handles into the
//! forest's shared `PointStore`) and `masses` (multiplicities), so every
//! subtree's leaves are one contiguous run. A node records how many leaves
//! its left subtree has (`left_leaves`), which lets a descent know the run
//! `[start, start + count)` of every node it passes without extra loads, and
//! lets a climb grow a bounding box by scanning a run of handles instead of
//! walking a subtree. A child reference is a node index or `LEAF`; which
//! leaf is implied by the run. Bounding boxes are cached only for nodes with
//! at least `box_min_mass` leaves (`box_cache.rs`); smaller ones are scanned.

pub(in crate::rcf) mod box_cache;
pub(in crate::rcf) mod invariants;
pub(in crate::rcf) mod lines;
pub(in crate::rcf) mod masses;

use serde::{Deserialize, Serialize};

use super::boxes::extend;
use super::lines::Lines;
use super::masses::Masses;
use super::point_store::PointStore;
use super::sampler::Sampler;
use super::traversal::{Path, PathBuf, Step};
use crate::rng::Xoshiro256PlusPlus;

/// Bit set in a child reference that names a leaf (the leaf is implied by
/// the child's run of leaves).
pub(crate) const LEAF_BIT: u16 = 0x8000;
/// A child reference to a leaf.
pub(crate) const LEAF: u16 = LEAF_BIT;
/// End of the free-node list.
pub(crate) const NONE: u16 = u16::MAX;
pub(super) const NO_BOX: u16 = u16::MAX;
/// Largest sample size the `u16` node references can address (leaves need
/// `sample_size + 1` slots because a point is inserted before the evicted one
/// is deleted).
pub const MAX_SAMPLE_SIZE: usize = 0x7FF0;

#[inline]
pub(crate) fn is_leaf(r: u16) -> bool {
    r & LEAF_BIT != 0
}

/// An internal node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Node {
    /// Points with `x[cut_dim] <= cut_value` go left.
    pub(super) cut_value: f32,
    pub(super) left: u16,
    pub(super) right: u16,
    pub(super) cut_dim: u16,
    /// Leaves (distinct points) of the left subtree: the left child's run is
    /// `[start, start + left_leaves)` of this node's run `[start, start + count)`.
    pub(super) left_leaves: u16,
}

impl Node {
    pub(super) const FREE: Node = Node {
        cut_value: 0.0,
        left: NONE,
        right: NONE,
        cut_dim: 0,
        left_leaves: 0,
    };
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Tree {
    pub(super) dims: usize,
    /// Nodes with at least this many leaves cache their bounding box.
    pub(super) box_min_mass: u16,
    /// The root node, or `LEAF` when the tree has at most one leaf.
    pub(super) root: u16,
    /// Internal nodes, one 12-byte record each so a descent step touches one
    /// cache line (the walk is memory-latency bound).
    pub(super) nodes: Vec<Node>,
    /// Per node: slot in `boxes`, or `NO_BOX` (kept apart from `nodes`
    /// because only the climb and updates read it).
    pub(super) box_slot: Vec<u16>,
    /// Head of the free-node list, threaded through `left`.
    pub(super) free_node: u16,
    /// Point handle of each leaf, in the tree's left-to-right order.
    pub(super) leaves: Vec<u32>,
    /// Multiplicity of each leaf (identical points share a leaf because no
    /// cut can separate them), parallel to `leaves` (stored sparsely).
    pub(super) masses: Masses,
    /// Cached boxes: slot `s` holds `dims` minima then `dims` maxima.
    pub(super) boxes: Lines,
    /// The node owning each slot (rebuilt from `box_slot` after a restore).
    #[serde(skip)]
    pub(super) box_owner: Vec<u16>,
    pub(super) sampler: Sampler,
    pub(super) rng: Xoshiro256PlusPlus,
    /// `log2(sample_size + 1)`, the score normaliser of a full tree (saves a
    /// `log2` per tree per score).
    pub(super) full_norm: f64,
}

impl Tree {
    pub(crate) fn new(
        dims: usize,
        sample_size: usize,
        time_decay: f64,
        box_min_mass: u16,
        seed: u64,
    ) -> Self {
        let nodes = sample_size;
        let node_arena = (0..nodes)
            .map(|i| Node {
                left: if i + 1 < nodes { (i + 1) as u16 } else { NONE },
                ..Node::FREE
            })
            .collect();
        Self {
            dims,
            box_min_mass,
            root: LEAF,
            nodes: node_arena,
            box_slot: vec![NO_BOX; nodes],
            free_node: if nodes > 0 { 0 } else { NONE },
            leaves: Vec::with_capacity(sample_size + 1),
            masses: Masses::default(),
            boxes: Lines::default(),
            box_owner: Vec::new(),
            sampler: Sampler::new(sample_size, time_decay),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            full_norm: (sample_size as f64 + 1.0).log2(),
        }
    }

    /// Number of points in the tree, counting duplicates.
    #[inline]
    pub(crate) fn total_mass(&self) -> usize {
        self.sampler.len()
    }

    /// Number of leaves (distinct points).
    #[inline]
    pub(crate) fn leaf_count(&self) -> usize {
        self.leaves.len()
    }

    /// Score normaliser `log2(mass + 1)` (AWS's, so ordinary points score ~1).
    #[inline]
    pub(super) fn norm(&self) -> f64 {
        if self.sampler.is_full() {
            self.full_norm
        } else {
            (self.total_mass() as f64 + 1.0).log2()
        }
    }

    /// The coordinates of the leaf at position `pos` of the leaf order.
    #[inline]
    pub(super) fn leaf_point<'s>(&self, store: &'s PointStore, pos: u16) -> &'s [f32] {
        store.get(self.leaves[usize::from(pos)])
    }

    /// Follows the cuts from the root to the leaf `p` falls into, recording
    /// the internal nodes passed and their runs. The tree must not be empty.
    pub(super) fn descend(&self, p: &[f32], path: &mut PathBuf) {
        path.clear();
        let mut s = Step::new(self.root, 0, self.leaves.len() as u16);
        while !is_leaf(s.node()) {
            path.push(s);
            let node = &self.nodes[usize::from(s.node())];
            s = s.child(node, p[usize::from(node.cut_dim)] > node.cut_value);
        }
        path.leaf = s.start();
    }

    fn alloc_node(&mut self) -> u16 {
        let n = self.free_node;
        debug_assert!(n != NONE, "node arena exhausted");
        self.free_node = self.nodes[usize::from(n)].left;
        n
    }

    fn free_node(&mut self, n: u16) {
        self.drop_box(n);
        self.nodes[usize::from(n)] = Node {
            left: self.free_node,
            ..Node::FREE
        };
        self.free_node = n;
    }

    /// Makes `new` the child of `path`'s node at `level` on the side the
    /// path took (or the root when `level` is `None`).
    fn set_child(&mut self, path: Path<'_>, level: Option<usize>, new: u16) {
        match level {
            None => self.root = new,
            Some(j) => {
                let node = &mut self.nodes[usize::from(path.node(j))];
                if path.went_left(j) {
                    node.left = new;
                } else {
                    node.right = new;
                }
            }
        }
    }

    /// Inserts a point that equals the leaf `path` reached. Boxes and runs
    /// are unchanged: the point is already there.
    pub(super) fn insert_duplicate(&mut self, path: Path<'_>) -> u32 {
        self.masses.add_one(usize::from(path.leaf));
        self.leaves[usize::from(path.leaf)]
    }

    /// Inserts point `handle` (coordinates `p`) as a new leaf whose new parent
    /// sits at `level` of `path` (or replaces the leaf position when `level ==
    /// path.depth()`), with the given separating cut.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert_split(
        &mut self,
        store: &mut PointStore,
        path: Path<'_>,
        level: usize,
        cut_dim: u16,
        cut_value: f32,
        handle: u32,
        p: &[f32],
    ) {
        let (target, ts, tc) = if level == path.depth() {
            (LEAF, path.leaf, 1)
        } else {
            (path.node(level), path.start(level), path.count(level))
        };
        let left = p[usize::from(cut_dim)] <= cut_value;
        let pos = if left { ts } else { ts + tc };
        self.leaves.insert(usize::from(pos), handle);
        self.masses.insert(usize::from(pos));
        store.retain(handle);
        let u = self.alloc_node();
        self.nodes[usize::from(u)] = if left {
            Node {
                cut_value,
                cut_dim,
                left: LEAF,
                right: target,
                left_leaves: 1,
            }
        } else {
            Node {
                cut_value,
                cut_dim,
                left: target,
                right: LEAF,
                left_leaves: tc,
            }
        };
        self.set_child(path, level.checked_sub(1), u);
        if tc + 1 >= self.box_min_mass {
            self.build_box(store, u, ts, tc + 1);
        }
        // Ancestors gain one leaf, on the side the path took; bottom-up so a
        // box built from its children sees them current.
        for j in (0..level).rev() {
            let n = path.node(j);
            if path.went_left(j) {
                self.nodes[usize::from(n)].left_leaves += 1;
            }
            let count = path.count(j) + 1;
            if let Some((lo, hi)) = self.cached_box_mut(n) {
                extend(lo, hi, p);
            } else if count >= self.box_min_mass {
                self.build_box(store, n, path.start(j), count);
            }
        }
    }

    /// Inserts the first point of an empty tree.
    pub(super) fn insert_root(&mut self, store: &mut PointStore, handle: u32) {
        debug_assert!(self.leaves.is_empty());
        self.leaves.push(handle);
        self.masses.push();
        store.retain(handle);
        self.root = LEAF;
    }

    /// Removes one copy of the point `handle`, a leaf's point, releasing its
    /// store slot when the leaf disappears. `path` and `q` are scratch.
    pub(super) fn delete(
        &mut self,
        store: &mut PointStore,
        handle: u32,
        path: &mut PathBuf,
        q: &mut Vec<f32>,
    ) {
        q.clear();
        q.extend_from_slice(store.get(handle));
        self.descend(q, path);
        let path = path.as_path();
        let pos = usize::from(path.leaf);
        debug_assert_eq!(self.leaves[pos], handle, "a point descends to its own leaf");
        if self.masses.remove_one(pos) > 0 {
            return;
        }
        self.leaves.remove(pos);
        self.masses.remove(pos);
        store.release(handle);
        let depth = path.depth();
        if depth == 0 {
            self.root = LEAF;
            return;
        }
        let parent = path.node(depth - 1);
        let node = self.nodes[usize::from(parent)];
        let sibling = if path.went_left(depth - 1) {
            node.right
        } else {
            node.left
        };
        self.set_child(path, (depth - 1).checked_sub(1), sibling);
        self.free_node(parent);
        // Ancestors lose one leaf. Their boxes can only shrink, and only
        // where `q` was on their boundary; a box `q` does not touch proves no
        // higher box touches it either.
        let mut refresh = true;
        for j in (0..depth - 1).rev() {
            let n = path.node(j);
            if path.went_left(j) {
                self.nodes[usize::from(n)].left_leaves -= 1;
            }
            let count = path.count(j) - 1;
            if count < self.box_min_mass {
                self.drop_box(n);
                continue;
            }
            if !refresh {
                continue;
            }
            let Some((lo, hi)) = self.cached_box(n) else {
                continue;
            };
            let touches = q
                .iter()
                .zip(lo.iter().zip(hi))
                .any(|(x, (l, h))| x == l || x == h);
            if touches {
                self.refresh_box(store, n, path.start(j), count);
            } else {
                refresh = false;
            }
        }
    }

    /// Replaces every point handle the tree holds (its leaves and sample
    /// entries) by `f(handle)`, after the store moved its points.
    pub(super) fn map_handles(&mut self, mut f: impl FnMut(u32) -> u32) {
        for h in &mut self.leaves {
            *h = f(*h);
        }
        for h in self.sampler.points_mut() {
            *h = f(*h);
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.box_slot.capacity() * 2
            + self.leaves.capacity() * 4
            + self.masses.heap_bytes()
            + self.boxes.capacity() * 4
            + self.box_owner.capacity() * 2
            + self.sampler.heap_bytes()
    }

    /// Adds this tree's leaf references to `refs` (indexed by
    /// `PointStore::ref_index`); false if a handle names no point.
    pub(crate) fn count_refs(&self, store: &PointStore, refs: &mut [u32]) -> bool {
        self.leaves.iter().all(
            |&h| match store.ref_index(h).and_then(|i| refs.get_mut(i)) {
                Some(r) => {
                    *r += 1;
                    true
                }
                None => false,
            },
        )
    }
}
