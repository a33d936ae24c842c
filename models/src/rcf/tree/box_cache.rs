//! The box cache of a tree: which internal nodes keep their bounding box,
//! where it lives, and how a box is recomputed.
//!
//! Part of the forest in `rcf/`: boxes are cached for nodes with at least
//! `box_min_mass` leaves (`tree.rs` decides when), in one dense `Vec` of
//! slots. A smaller subtree's box is the min and max over its run of leaves,
//! which the tree keeps contiguous, so recomputing it is a scan, never a walk.

use crate::rcf::boxes::{extend, extend_n, merge};
use crate::rcf::point_store::PointStore;
use crate::rcf::tree::{NO_BOX, Tree, is_leaf};

/// Spare box slots a tree's cache may hold beyond its live boxes before the
/// capacity is given back.
const SPARE_BOXES: usize = 4;

impl Tree {
    /// Where node `n`'s cached box lives in `boxes`, if it has one.
    #[inline]
    fn box_range(&self, n: u16) -> Option<std::ops::Range<usize>> {
        let slot = self.box_slot[usize::from(n)];
        let start = usize::from(slot) * 2 * self.dims;
        (slot != NO_BOX).then(|| start..start + 2 * self.dims)
    }

    /// The cached box of internal node `n`, if any, as (minima, maxima).
    #[inline]
    pub(in crate::rcf) fn cached_box(&self, n: u16) -> Option<(&[f32], &[f32])> {
        let range = self.box_range(n)?;
        Some(self.boxes[range].split_at(self.dims))
    }

    /// The cached boxes as rows of `N` values for the score-only climbs
    /// (`kernel.rs`, `avx8.rs`): slot `s` is rows `2s` (minima) and `2s + 1`
    /// (maxima). `None` only if `N` is not the tree's dimension.
    #[inline(always)]
    pub(in crate::rcf) fn box_rows<const N: usize>(&self) -> Option<&[[f32; N]]> {
        bytemuck::try_cast_slice(&self.boxes).ok()
    }

    /// Node `n`'s cached box in `rows` (from `box_rows`), as (minima,
    /// maxima). A missing box's slot (`NO_BOX`) names rows past the end, so
    /// one range check covers both that and a bad slot.
    #[inline(always)]
    pub(in crate::rcf) fn row_box<'r, const N: usize>(
        &self,
        rows: &'r [[f32; N]],
        n: u16,
    ) -> Option<(&'r [f32; N], &'r [f32; N])> {
        let row = 2 * usize::from(self.box_slot[usize::from(n)]);
        match rows.get(row..row + 2) {
            Some([lo, hi]) => Some((lo, hi)),
            _ => None,
        }
    }

    /// `cached_box`, writable.
    #[inline]
    pub(in crate::rcf) fn cached_box_mut(&mut self, n: u16) -> Option<(&mut [f32], &mut [f32])> {
        let range = self.box_range(n)?;
        let dims = self.dims;
        Some(self.boxes[range].split_at_mut(dims))
    }

    /// Grows (`bmin`, `bmax`) by the points of the leaves at positions
    /// `from..to` of the leaf order.
    pub(in crate::rcf) fn scan_run(
        &self,
        store: &PointStore,
        from: u16,
        to: u16,
        bmin: &mut [f32],
        bmax: &mut [f32],
    ) {
        let run = &self.leaves[usize::from(from)..usize::from(to)];
        by_dims_any!(
            self.dims,
            scan_n(store, run, bmin, bmax),
            for &h in run {
                extend(bmin, bmax, store.get(h));
            }
        )
    }

    /// Grows (`bmin`, `bmax`) by the subtree at child reference `r`, whose
    /// run is `[start, start + count)`: its cached box if it has one, else
    /// its leaves.
    pub(in crate::rcf) fn union_child(
        &self,
        store: &PointStore,
        r: u16,
        start: u16,
        count: u16,
        bmin: &mut [f32],
        bmax: &mut [f32],
    ) {
        if !is_leaf(r)
            && let Some((lo, hi)) = self.cached_box(r)
        {
            merge(bmin, bmax, lo, hi);
            return;
        }
        self.scan_run(store, start, start + count, bmin, bmax);
    }

    /// Grows (`bmin`, `bmax`) by the box of internal node `n`, whose run is
    /// `[start, start + count)`.
    pub(in crate::rcf) fn union_node(
        &self,
        store: &PointStore,
        n: u16,
        start: u16,
        count: u16,
        bmin: &mut [f32],
        bmax: &mut [f32],
    ) {
        let node = self.nodes[usize::from(n)];
        let ll = node.left_leaves;
        self.union_child(store, node.left, start, ll, bmin, bmax);
        self.union_child(store, node.right, start + ll, count - ll, bmin, bmax);
    }

    /// Gives node `n` (run `[start, start + count)`) a cached box computed
    /// from its children, in a new slot at the end (slots stay dense: see
    /// `drop_box`).
    pub(in crate::rcf) fn build_box(&mut self, store: &PointStore, n: u16, start: u16, count: u16) {
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
        self.refresh_box(store, n, start, count);
    }

    /// Recomputes the cached box of node `n` (run `[start, start + count)`)
    /// from its children.
    pub(in crate::rcf) fn refresh_box(
        &mut self,
        store: &PointStore,
        n: u16,
        start: u16,
        count: u16,
    ) {
        let dims = self.dims;
        // The new box is built apart from `boxes` (the children's boxes are
        // read from there): on the stack up to 32 dimensions, which saves
        // every tree a buffer of its own.
        let (mut stack, mut heap) = ([0.0f32; 64], Vec::new());
        let tmp: &mut [f32] = if 2 * dims <= stack.len() {
            &mut stack[..2 * dims]
        } else {
            heap.resize(2 * dims, 0.0);
            &mut heap
        };
        let (bmin, bmax) = tmp.split_at_mut(dims);
        bmin.fill(f32::INFINITY);
        bmax.fill(f32::NEG_INFINITY);
        self.union_node(store, n, start, count, bmin, bmax);
        let at = usize::from(self.box_slot[usize::from(n)]) * 2 * dims;
        self.boxes[at..at + 2 * dims].copy_from_slice(tmp);
    }

    /// Removes node `n`'s cached box, if any. The last slot moves into the
    /// freed one, so the cache holds exactly its live boxes, and spare
    /// capacity beyond a few boxes is returned: a free list would keep every
    /// tree at the most boxes it ever had, which creeps up over a long stream
    /// (+18 KB over 400,000 points at the default parameters).
    pub(in crate::rcf) fn drop_box(&mut self, n: u16) {
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
    /// free slots that snapshots of earlier versions may hold (their boxes
    /// then outnumber the owners).
    fn sync_box_owners(&mut self) {
        let width = 2 * self.dims;
        if self.box_owner.len() * width == self.boxes.len() {
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
    }
}

/// `scan_run` at `N` dimensions: the box is copied into local arrays so it
/// stays in registers over the run (through the slices, every leaf loaded
/// and stored it), then written back.
fn scan_n<const N: usize>(store: &PointStore, run: &[u32], bmin: &mut [f32], bmax: &mut [f32]) {
    let (lo, hi): (&mut [f32; N], &mut [f32; N]) = (
        (&mut bmin[..N]).try_into().expect("sliced to N"),
        (&mut bmax[..N]).try_into().expect("sliced to N"),
    );
    let (mut a, mut b) = (*lo, *hi);
    for &h in run {
        extend_n::<N>(&mut a, &mut b, store.get_n::<N>(h));
    }
    (*lo, *hi) = (a, b);
}
