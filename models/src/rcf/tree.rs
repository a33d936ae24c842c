//! One random cut tree: compact storage plus structural insert and delete.
//!
//! Part of the forest in `rcf/`. A tree holds the points its sampler kept and
//! is updated as in Guha et al. (ICML 2016): insertion places a new leaf where
//! a random cut of the grown bounding box first separates the point, deletion
//! splices the leaf's parent out. The walk that scores a point and chooses the
//! insertion place lives in `traversal.rs`.
//!
//! Layout: internal nodes are parallel `Vec`s indexed by `u16` (no per-node
//! allocation); a child reference with `LEAF_BIT` set names a leaf, whose
//! coordinates live in the forest's shared `PointStore`. There are no parent
//! pointers: every operation descends from the root and keeps the path. Bounding
//! boxes are cached only for nodes of mass at least `box_min_mass` (`box_cache.rs`); smaller boxes
//! are recomputed from their (few) leaves on demand, which trades a little time
//! for most of the memory a full cache would need.

use serde::{Deserialize, Serialize};

use super::boxes::extend;
use super::point_store::PointStore;
use super::sampler::Sampler;
use crate::rng::Xoshiro256PlusPlus;

pub(crate) const LEAF_BIT: u16 = 0x8000;
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
    /// Points below, counting duplicates.
    pub(super) mass: u16,
}

impl Node {
    const FREE: Node = Node {
        cut_value: 0.0,
        left: NONE,
        right: NONE,
        cut_dim: 0,
        mass: 0,
    };

    /// The child on `p`'s side of the cut, without a branch (the comparison is
    /// a coin flip for the predictor).
    #[inline(always)]
    pub(super) fn next(&self, p: &[f32]) -> u16 {
        let right = p[self.cut_dim as usize] > self.cut_value;
        [self.left, self.right][usize::from(right)]
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Tree {
    pub(super) dims: usize,
    pub(super) box_min_mass: u16,
    pub(super) root: u16,
    /// Internal nodes, one 12-byte record each so a descent step touches one
    /// cache line (the walk is memory-latency bound).
    pub(super) nodes: Vec<Node>,
    /// Per node: slot in `boxes`, or `NO_BOX` (kept apart from `nodes`
    /// because only the climb and updates read it).
    pub(super) box_slot: Vec<u16>,
    /// Head of the free-node list, threaded through `left`.
    free_node: u16,
    // Leaves: a point handle and a multiplicity (identical points share a leaf
    // because no cut can separate them).
    pub(super) leaf_point: Vec<u32>,
    pub(super) leaf_mass: Vec<u16>,
    /// Head of the free-leaf list, threaded through `leaf_point`.
    free_leaf: u32,
    /// Cached boxes: slot `s` holds `dims` minima then `dims` maxima.
    pub(super) boxes: Vec<f32>,
    /// Always empty now (slots are dense); snapshots of earlier versions may
    /// list free slots here, which the first box change compacts.
    #[serde(default)]
    pub(super) free_boxes: Vec<u16>,
    /// The node owning each slot (rebuilt from `box_slot` after a restore).
    #[serde(skip)]
    pub(super) box_owner: Vec<u16>,
    pub(super) sampler: Sampler,
    pub(super) rng: Xoshiro256PlusPlus,
    /// `log2(sample_size + 1)`, the score normaliser of a full tree (saves a
    /// `log2` per tree per score).
    full_norm: f64,
    /// Scratch for recomputing a box (`dims` minima then maxima).
    #[serde(skip)]
    pub(super) tmp: Vec<f32>,
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
        let leaves = sample_size + 1;
        let node_arena = (0..nodes)
            .map(|i| Node {
                left: if i + 1 < nodes { (i + 1) as u16 } else { NONE },
                ..Node::FREE
            })
            .collect();
        let leaf_point = (0..leaves)
            .map(|i| {
                if i + 1 < leaves {
                    (i + 1) as u32
                } else {
                    u32::MAX
                }
            })
            .collect();
        Self {
            dims,
            box_min_mass,
            root: NONE,
            nodes: node_arena,
            box_slot: vec![NO_BOX; nodes],
            free_node: if nodes > 0 { 0 } else { NONE },
            leaf_point,
            leaf_mass: vec![0; leaves],
            free_leaf: 0,
            boxes: Vec::new(),
            free_boxes: Vec::new(),
            box_owner: Vec::new(),
            sampler: Sampler::new(sample_size, time_decay),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            full_norm: (sample_size as f64 + 1.0).log2(),
            tmp: Vec::new(),
        }
    }

    /// Number of points in the tree, counting duplicates.
    #[inline]
    pub(crate) fn total_mass(&self) -> usize {
        self.sampler.len()
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

    /// Follows the cuts from the root to the leaf `p` falls into, recording the
    /// internal nodes passed. The tree must not be empty.
    #[inline]
    pub(super) fn descend(&self, p: &[f32], path: &mut Vec<u16>) -> u16 {
        path.clear();
        let mut n = self.root;
        while !is_leaf(n) {
            path.push(n);
            n = self.nodes[n as usize].next(p);
        }
        n & !LEAF_BIT
    }

    #[inline]
    pub(super) fn node_mass(&self, r: u16) -> u16 {
        if is_leaf(r) {
            self.leaf_mass[(r & !LEAF_BIT) as usize]
        } else {
            self.nodes[r as usize].mass
        }
    }

    fn alloc_node(&mut self) -> u16 {
        let n = self.free_node;
        debug_assert!(n != NONE, "node arena exhausted");
        self.free_node = self.nodes[n as usize].left;
        n
    }

    fn free_node(&mut self, n: u16) {
        self.drop_box(n);
        self.nodes[n as usize] = Node {
            left: self.free_node,
            ..Node::FREE
        };
        self.free_node = n;
    }

    fn alloc_leaf(&mut self, handle: u32) -> u16 {
        let l = self.free_leaf;
        debug_assert!(l != u32::MAX, "leaf arena exhausted");
        self.free_leaf = self.leaf_point[l as usize];
        self.leaf_point[l as usize] = handle;
        self.leaf_mass[l as usize] = 1;
        l as u16
    }

    fn free_leaf(&mut self, l: u16) {
        self.leaf_point[l as usize] = self.free_leaf;
        self.leaf_mass[l as usize] = 0;
        self.free_leaf = u32::from(l);
    }

    fn replace_child(&mut self, parent: u16, old: u16, new: u16) {
        let i = parent as usize;
        if self.nodes[i].left == old {
            self.nodes[i].left = new;
        } else {
            debug_assert_eq!(self.nodes[i].right, old);
            self.nodes[i].right = new;
        }
    }

    /// Adds one to the mass of `path` nodes (bottom-up), growing their boxes by
    /// `p` and caching boxes for nodes that reach `box_min_mass`.
    fn grow_ancestors(&mut self, store: &PointStore, path: &[u16], p: &[f32]) {
        for &n in path.iter().rev() {
            let i = n as usize;
            self.nodes[i].mass += 1;
            let slot = self.box_slot[i];
            if slot != NO_BOX {
                let start = slot as usize * 2 * self.dims;
                let (lo, hi) = self.boxes[start..start + 2 * self.dims].split_at_mut(self.dims);
                extend(lo, hi, p);
            } else if self.nodes[i].mass >= self.box_min_mass {
                self.build_box(store, n);
            }
        }
    }

    /// Inserts a point that equals the leaf `leaf` reached through `path`.
    pub(super) fn insert_duplicate(
        &mut self,
        store: &PointStore,
        path: &[u16],
        leaf: u16,
        p: &[f32],
    ) {
        self.leaf_mass[leaf as usize] += 1;
        self.grow_ancestors(store, path, p);
    }

    /// Inserts point `handle` (coordinates `p`) as a new leaf whose new parent
    /// sits at `level` of `path` (or replaces the leaf position when `level ==
    /// path.len()`), with the given separating cut. Returns the new leaf.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn insert_split(
        &mut self,
        store: &mut PointStore,
        path: &[u16],
        leaf: u16,
        level: usize,
        cut_dim: u16,
        cut_value: f32,
        handle: u32,
        p: &[f32],
    ) -> u16 {
        let target = if level == path.len() {
            leaf | LEAF_BIT
        } else {
            path[level]
        };
        let new_leaf = self.alloc_leaf(handle);
        store.retain(handle);
        let u = self.alloc_node();
        let ui = u as usize;
        let leaf_ref = new_leaf | LEAF_BIT;
        debug_assert!(p[cut_dim as usize] <= cut_value || p[cut_dim as usize] > cut_value);
        if p[cut_dim as usize] <= cut_value {
            self.nodes[ui].left = leaf_ref;
            self.nodes[ui].right = target;
        } else {
            self.nodes[ui].left = target;
            self.nodes[ui].right = leaf_ref;
        }
        self.nodes[ui].cut_dim = cut_dim;
        self.nodes[ui].cut_value = cut_value;
        self.nodes[ui].mass = self.node_mass(target) + 1;
        if level == 0 {
            self.root = u;
        } else {
            self.replace_child(path[level - 1], target, u);
        }
        if self.nodes[ui].mass >= self.box_min_mass {
            self.build_box(store, u);
        }
        self.grow_ancestors(store, &path[..level], p);
        new_leaf
    }

    /// Inserts the first point of an empty tree.
    pub(super) fn insert_root(&mut self, store: &mut PointStore, handle: u32) -> u16 {
        debug_assert_eq!(self.root, NONE);
        let l = self.alloc_leaf(handle);
        store.retain(handle);
        self.root = l | LEAF_BIT;
        l
    }

    /// Removes one copy of the point held by `leaf`, releasing its store slot
    /// when the leaf disappears. `path` and `q` are scratch buffers.
    pub(super) fn delete(
        &mut self,
        store: &mut PointStore,
        leaf: u16,
        path: &mut Vec<u16>,
        q: &mut Vec<f32>,
    ) {
        let handle = self.leaf_point[leaf as usize];
        q.clear();
        q.extend_from_slice(store.get(handle));
        let found = self.descend(q, path);
        debug_assert_eq!(found, leaf, "descent by a leaf's own point must reach it");
        let li = leaf as usize;
        self.leaf_mass[li] -= 1;
        for &n in path.iter() {
            let i = n as usize;
            self.nodes[i].mass -= 1;
            if self.nodes[i].mass < self.box_min_mass {
                self.drop_box(n);
            }
        }
        if self.leaf_mass[li] > 0 {
            return;
        }
        self.free_leaf(leaf);
        store.release(handle);
        let Some(&parent) = path.last() else {
            self.root = NONE;
            return;
        };
        let pi = parent as usize;
        let sibling = if self.nodes[pi].left == (leaf | LEAF_BIT) {
            self.nodes[pi].right
        } else {
            self.nodes[pi].left
        };
        let depth = path.len();
        if depth == 1 {
            self.root = sibling;
        } else {
            self.replace_child(path[depth - 2], parent, sibling);
        }
        self.free_node(parent);
        // Boxes above can only shrink, and only where `q` was on their boundary;
        // a box `q` does not touch proves no higher box touches it either.
        for &n in path[..depth - 1].iter().rev() {
            let Some((lo, hi)) = self.cached_box(n) else {
                continue;
            };
            let touches = q
                .iter()
                .zip(lo.iter().zip(hi))
                .any(|(x, (l, h))| x == l || x == h);
            if !touches {
                break;
            }
            self.refresh_box(store, n);
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.box_slot.capacity() * 2
            + self.leaf_point.capacity() * 4
            + self.leaf_mass.capacity() * 2
            + self.boxes.capacity() * 4
            + self.free_boxes.capacity() * 2
            + self.box_owner.capacity() * 2
            + self.tmp.capacity() * 4
            + self.sampler.heap_bytes()
    }

    /// Adds this tree's leaf references to `refs` (indexed by store handle).
    pub(crate) fn count_refs(&self, refs: &mut [u32]) {
        self.visit_leaves(self.root, &mut |l| {
            refs[self.leaf_point[l as usize] as usize] += 1
        });
    }

    fn visit_leaves(&self, r: u16, f: &mut impl FnMut(u16)) {
        if r == NONE {
        } else if is_leaf(r) {
            f(r & !LEAF_BIT);
        } else {
            self.visit_leaves(self.nodes[r as usize].left, f);
            self.visit_leaves(self.nodes[r as usize].right, f);
        }
    }
}
