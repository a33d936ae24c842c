//! Shared, reference-counted storage for the points that a forest's trees hold.
//!
//! Every tree of a forest sees the same stream, so their reservoirs overlap
//! heavily; storing each accepted point once here (as `f32`) and letting tree
//! leaves hold a `u32` handle cuts memory several-fold. A slot's count is the
//! number of tree leaves that reference it; a slot whose count drops to zero goes
//! onto the free list and is reused.

use serde::{Deserialize, Serialize};

/// Points of one fixed dimension, addressed by a stable `u32` handle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PointStore {
    dims: usize,
    /// Slot `i` occupies `values[i * dims..(i + 1) * dims]`.
    values: Vec<f32>,
    /// Number of tree leaves referencing each slot; 0 means free. A tree holds
    /// a point in at most one leaf, so this never exceeds the tree count
    /// (at most 10,000).
    refs: Vec<u16>,
    /// Free slots, reused last-in first-out.
    free: Vec<u32>,
}

impl PointStore {
    pub(crate) fn new(dims: usize) -> Self {
        Self {
            dims,
            values: Vec::new(),
            refs: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The coordinates of slot `handle`.
    #[inline]
    pub(crate) fn get(&self, handle: u32) -> &[f32] {
        let start = handle as usize * self.dims;
        &self.values[start..start + self.dims]
    }

    /// Stores `point` with a reference count of zero; the caller must either
    /// `retain` it or call `release_if_unused` before the next `add`.
    pub(crate) fn add(&mut self, point: &[f32]) -> u32 {
        debug_assert_eq!(point.len(), self.dims);
        if let Some(handle) = self.free.pop() {
            let start = handle as usize * self.dims;
            self.values[start..start + self.dims].copy_from_slice(point);
            return handle;
        }
        let handle = self.refs.len();
        if self.refs.len() == self.refs.capacity() {
            // Grow by a quarter rather than doubling: the store is the largest
            // allocation of a forest and doubling would waste up to half of it.
            let extra = (self.refs.len() / 4).max(64);
            self.refs.reserve_exact(extra);
            self.values.reserve_exact(extra * self.dims);
        }
        self.refs.push(0);
        self.values.extend_from_slice(point);
        u32::try_from(handle).expect("more than 2^32 stored points is beyond any sample size")
    }

    #[inline]
    pub(crate) fn retain(&mut self, handle: u32) {
        self.refs[handle as usize] += 1;
    }

    /// Drops one reference and frees the slot when none remain.
    pub(crate) fn release(&mut self, handle: u32) {
        let r = &mut self.refs[handle as usize];
        debug_assert!(*r > 0, "releasing an unreferenced point");
        *r -= 1;
        if *r == 0 {
            self.free.push(handle);
        }
    }

    /// Frees a slot returned by `add` that no tree ended up referencing.
    pub(crate) fn release_if_unused(&mut self, handle: u32) {
        if self.refs[handle as usize] == 0 {
            self.free.push(handle);
        }
    }

    /// Number of slots currently referenced by at least one leaf.
    pub(crate) fn live_points(&self) -> usize {
        self.refs.len() - self.free.len()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<f32>()
            + self.refs.capacity() * std::mem::size_of::<u16>()
            + self.free.capacity() * std::mem::size_of::<u32>()
    }

    /// Checks reference counts against the leaves that claim them (snapshot
    /// restore and tests).
    pub(crate) fn check_refs(&self, expected: &[u32]) -> bool {
        expected.len() == self.refs.len()
            && self
                .refs
                .iter()
                .zip(expected)
                .all(|(&a, &b)| u32::from(a) == b)
            && self.free.iter().all(|&h| self.refs[h as usize] == 0)
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.refs.len()
    }
}
