//! The box cache of a tree: which internal nodes keep their bounding box,
//! where it lives, and the walk that recomputes a box from the leaves.
//!
//! Part of the forest in `rcf/`: boxes are cached for nodes of mass at least
//! `box_min_mass` (`tree.rs` decides when), in one dense `Vec` of slots;
//! smaller boxes are recomputed from their few leaves on demand, which trades
//! a little time for most of the memory a full cache would need.

use super::boxes::{extend, extend_n, merge, merge_n};
use super::point_store::PointStore;
use super::tree::{LEAF_BIT, NO_BOX, Tree, is_leaf};

/// Spare box slots a tree's cache may hold beyond its live boxes before the
/// capacity is given back.
const SPARE_BOXES: usize = 4;

impl Tree {
    /// The cached box of internal node `n`, if any, as (minima, maxima).
    #[inline]
    pub(super) fn cached_box(&self, n: u16) -> Option<(&[f32], &[f32])> {
        let slot = self.box_slot[n as usize];
        if slot == NO_BOX {
            return None;
        }
        let start = slot as usize * 2 * self.dims;
        let (lo, hi) = self.boxes[start..start + 2 * self.dims].split_at(self.dims);
        Some((lo, hi))
    }

    /// Grows (`bmin`, `bmax`) to cover the subtree at `r`: its cached boxes
    /// and the points of its leaves that no cached box covers.
    pub(super) fn union_box(&self, store: &PointStore, r: u16, bmin: &mut [f32], bmax: &mut [f32]) {
        by_dims_any!(
            self.dims,
            union_box_n(self, store, r, bmin, bmax),
            self.union_walk(store, r, bmin, bmax, extend, merge)
        )
    }

    /// The walk of `union_box`, with the point and box unions passed in so
    /// that the common dimensions get fully unrolled versions.
    #[inline(always)]
    fn union_walk(
        &self,
        store: &PointStore,
        r: u16,
        bmin: &mut [f32],
        bmax: &mut [f32],
        extend: impl Fn(&mut [f32], &mut [f32], &[f32]),
        merge: impl Fn(&mut [f32], &mut [f32], &[f32], &[f32]),
    ) {
        // Explicit stack for the (small) uncached subtrees; deeper ones recurse.
        let mut stack = [0u16; 16];
        let mut sp = 0usize;
        let mut cur = r;
        loop {
            if is_leaf(cur) {
                extend(
                    bmin,
                    bmax,
                    store.get(self.leaf_point[(cur & !LEAF_BIT) as usize]),
                );
            } else if let Some((lo, hi)) = self.cached_box(cur) {
                merge(bmin, bmax, lo, hi);
            } else {
                let node = &self.nodes[cur as usize];
                if sp < stack.len() {
                    stack[sp] = node.right;
                    sp += 1;
                } else {
                    self.union_box(store, node.right, bmin, bmax);
                }
                cur = node.left;
                continue;
            }
            if sp == 0 {
                break;
            }
            sp -= 1;
            cur = stack[sp];
        }
    }

    /// Gives node `n` a cached box computed from its children, in a new slot
    /// at the end (slots stay dense: see `drop_box`).
    pub(super) fn build_box(&mut self, store: &PointStore, n: u16) {
        self.sync_box_owners();
        let width = 2 * self.dims;
        if self.boxes.len() == self.boxes.capacity() {
            // Grow in small steps: box memory is the knob this cache exists
            // to control.
            self.boxes.reserve_exact(2 * width);
        }
        let slot = self.box_owner.len();
        self.boxes.resize(self.boxes.len() + width, 0.0);
        self.box_owner.push(n);
        self.box_slot[usize::from(n)] = slot as u16;
        self.refresh_box(store, n);
    }

    /// Recomputes the cached box of node `n` from its children.
    pub(super) fn refresh_box(&mut self, store: &PointStore, n: u16) {
        let dims = self.dims;
        let mut tmp = std::mem::take(&mut self.tmp);
        tmp.clear();
        tmp.resize(dims, f32::INFINITY);
        tmp.resize(2 * dims, f32::NEG_INFINITY);
        let i = n as usize;
        let (bmin, bmax) = tmp.split_at_mut(dims);
        self.union_box(store, self.nodes[i].left, bmin, bmax);
        self.union_box(store, self.nodes[i].right, bmin, bmax);
        let start = self.box_slot[i] as usize * 2 * dims;
        self.boxes[start..start + 2 * dims].copy_from_slice(&tmp);
        self.tmp = tmp;
    }

    /// Removes node `n`'s cached box, if any. The last slot moves into the
    /// freed one, so the cache holds exactly its live boxes, and spare
    /// capacity beyond a few boxes is returned: a free list would keep every
    /// tree at the most boxes it ever had, which creeps up over a long stream
    /// (+18 KB over 400,000 points at the default parameters).
    pub(super) fn drop_box(&mut self, n: u16) {
        if self.box_slot[usize::from(n)] == NO_BOX {
            return;
        }
        // Before reading the slot: a rebuild may renumber slots.
        self.sync_box_owners();
        let slot = self.box_slot[usize::from(n)];
        self.box_slot[usize::from(n)] = NO_BOX;
        let width = 2 * self.dims;
        let (s, last) = (usize::from(slot), self.box_owner.len() - 1);
        if s != last {
            self.boxes
                .copy_within(last * width..(last + 1) * width, s * width);
            let moved = self.box_owner[last];
            self.box_owner[s] = moved;
            self.box_slot[usize::from(moved)] = slot;
        }
        self.box_owner.pop();
        self.boxes.truncate(last * width);
        if self.boxes.capacity() - self.boxes.len() > SPARE_BOXES * width {
            self.boxes.shrink_to(self.boxes.len() + 2 * width);
        }
    }

    /// Rebuilds `box_owner` (not serialised) after a restore, compacting the
    /// free slots that snapshots of earlier versions may hold.
    fn sync_box_owners(&mut self) {
        let width = 2 * self.dims;
        if self.box_owner.len() * width == self.boxes.len() && self.free_boxes.is_empty() {
            return;
        }
        let mut owned: Vec<(u16, u16)> = self
            .box_slot
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s != NO_BOX)
            .map(|(n, &s)| (s, n as u16))
            .collect();
        owned.sort_unstable();
        self.box_owner.clear();
        for (dense, &(slot, n)) in owned.iter().enumerate() {
            let from = usize::from(slot) * width;
            // `dense <= slot`, so moving boxes down in slot order never
            // overwrites one not yet moved.
            self.boxes.copy_within(from..from + width, dense * width);
            self.box_slot[usize::from(n)] = dense as u16;
            self.box_owner.push(n);
        }
        self.boxes.truncate(owned.len() * width);
        self.free_boxes = Vec::new();
    }
}

fn union_box_n<const N: usize>(
    tree: &Tree,
    store: &PointStore,
    r: u16,
    bmin: &mut [f32],
    bmax: &mut [f32],
) {
    tree.union_walk(store, r, bmin, bmax, extend_n::<N>, merge_n::<N>);
}
