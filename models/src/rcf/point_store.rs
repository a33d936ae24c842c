//! Shared, reference-counted, shingle-aware storage for the points that a
//! forest's trees hold.
//!
//! Every tree of a forest sees the same stream, so their reservoirs overlap
//! heavily; storing each accepted point once here (as `f32`) and letting tree
//! leaves hold a `u32` handle cuts memory several-fold. A handle's count is the
//! number of tree leaves that reference it; a handle whose count drops to zero
//! goes onto the free list and is reused.
//!
//! Shingling makes consecutive points overlap: point `t` is point `t - 1`
//! shifted by one row. Points live in one flat arena and a handle maps to the
//! start of its `dims` values there, so a point whose first `dims - step`
//! values equal the arena's tail is stored by appending only its last `step`
//! values (AWS's random-cut-forest stores shingles the same way). For a
//! telemetry stream almost every recent row is kept by some tree, so recent
//! points cost one row each instead of a whole shingle. Values of freed points
//! stay in the arena until it fills up; then `compact` moves the live runs
//! down, keeping overlapping points overlapped. Where a value lives never
//! changes what it is, so compaction timing cannot change any score.

use serde::{Deserialize, Serialize};

/// Sentinel location of a free handle.
const FREE: u32 = u32::MAX;

/// Points of one fixed dimension, addressed by a stable `u32` handle.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PointStore {
    dims: usize,
    /// Values that differ between consecutive shingles (the row width);
    /// `dims` when there is no shingling.
    step: usize,
    /// Point values; handle `h` occupies `arena[loc[h]..loc[h] + dims]`.
    arena: Vec<f32>,
    /// Start of each handle's values in `arena` (`FREE` for a free handle).
    loc: Vec<u32>,
    /// Number of tree leaves referencing each handle; 0 means free (or just
    /// added). A tree holds a point in at most one leaf, so this never exceeds
    /// the tree count (at most 10,000).
    refs: Vec<u16>,
    /// Free handles, reused last-in first-out.
    free: Vec<u32>,
}

impl PointStore {
    pub(crate) fn new(dims: usize, step: usize) -> Self {
        Self {
            dims,
            step: step.clamp(1, dims.max(1)),
            arena: Vec::new(),
            loc: Vec::new(),
            refs: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The coordinates of `handle`.
    #[inline]
    pub(crate) fn get(&self, handle: u32) -> &[f32] {
        let start = self.loc[handle as usize] as usize;
        &self.arena[start..start + self.dims]
    }

    /// The coordinates of `handle`, or `None` if it has none (snapshot checks).
    pub(crate) fn try_get(&self, handle: u32) -> Option<&[f32]> {
        let start = *self.loc.get(handle as usize)? as usize;
        self.arena.get(start..start.checked_add(self.dims)?)
    }

    /// Start of the values the arena's tail shares with `point`, if the last
    /// `dims - step` values of the arena equal `point`'s first ones.
    fn shared_start(&self, point: &[f32]) -> Option<usize> {
        let overlap = self.dims - self.step;
        let len = self.arena.len();
        (overlap > 0 && len >= overlap && self.arena[len - overlap..] == point[..overlap])
            .then(|| len - overlap)
    }

    /// Stores `point` with a reference count of zero; the caller must either
    /// `retain` it or call `release_if_unused` before the next `add`.
    pub(crate) fn add(&mut self, point: &[f32]) -> u32 {
        debug_assert_eq!(point.len(), self.dims);
        let needed = |s: &Self| match s.shared_start(point) {
            Some(_) => s.step,
            None => s.dims,
        };
        if self.arena.len() + needed(self) > self.arena.capacity() {
            self.compact();
            let live = self.arena.len() + needed(self);
            // Keep an eighth of headroom so compactions stay rare (each one
            // is a pass over the live values) without wasting much memory,
            // and give back capacity a past peak left (the arena would
            // otherwise keep the largest size it ever had).
            let headroom = (live / 8).max(64 * self.dims);
            let want = live + headroom;
            if want > self.arena.capacity() {
                self.arena.reserve_exact(want - self.arena.len());
            } else if self.arena.capacity() > want + headroom {
                self.arena.shrink_to(want);
            }
        }
        let start = match self.shared_start(point) {
            Some(s) => {
                self.arena
                    .extend_from_slice(&point[self.dims - self.step..]);
                s
            }
            None => {
                let s = self.arena.len();
                self.arena.extend_from_slice(point);
                s
            }
        };
        let start = u32::try_from(start).expect("the arena is compacted long before 2^32 values");
        if let Some(handle) = self.free.pop() {
            self.loc[handle as usize] = start;
            return handle;
        }
        let handle = self.refs.len();
        if self.refs.len() == self.refs.capacity() {
            // Grow by a quarter rather than doubling: doubling would waste up
            // to half of the largest allocations of a forest.
            let extra = (self.refs.len() / 4).max(64);
            self.refs.reserve_exact(extra);
            self.loc.reserve_exact(extra);
        }
        self.refs.push(0);
        self.loc.push(start);
        u32::try_from(handle).expect("more than 2^32 stored points is beyond any sample size")
    }

    /// Moves the live points to the front of the arena, in arena order, so
    /// that points which overlapped still overlap.
    fn compact(&mut self) {
        let dims = self.dims;
        let order = self.live_in_arena_order();
        let mut write = 0usize;
        // Current run: where it started in the old arena and in the new one,
        // and the old end of what has been copied.
        let (mut old_start, mut new_start, mut old_end) = (0usize, 0usize, 0usize);
        for h in order {
            let s = self.loc[h as usize] as usize;
            let e = s + dims;
            if s >= old_end {
                self.arena.copy_within(s..e, write);
                (old_start, new_start, old_end) = (s, write, e);
                write += dims;
            } else if e > old_end {
                self.arena.copy_within(old_end..e, write);
                write += e - old_end;
                old_end = e;
            }
            self.loc[h as usize] = (new_start + (s - old_start)) as u32;
        }
        self.arena.truncate(write);
    }

    /// Live handles by increasing location. Locations are distinct (every
    /// `add` appends at least one value), so one pass over an arena-sized
    /// table orders them; a sort (the old way, ~1.5 M instructions per
    /// compaction at 5,600 points) remains for a snapshot that breaks this.
    fn live_in_arena_order(&self) -> Vec<u32> {
        let mut at = vec![FREE; self.arena.len()];
        let mut live = 0usize;
        for (h, &l) in self.loc.iter().enumerate() {
            if l == FREE {
                continue;
            }
            match at.get_mut(l as usize) {
                Some(slot) if *slot == FREE => {
                    *slot = h as u32;
                    live += 1;
                }
                _ => {
                    let mut order: Vec<u32> = (0..self.loc.len() as u32)
                        .filter(|&h| self.loc[h as usize] != FREE)
                        .collect();
                    order.sort_unstable_by_key(|&h| self.loc[h as usize]);
                    return order;
                }
            }
        }
        let mut order = Vec::with_capacity(live);
        order.extend(at.into_iter().filter(|&h| h != FREE));
        order
    }

    #[inline]
    pub(crate) fn retain(&mut self, handle: u32) {
        self.refs[handle as usize] += 1;
    }

    /// Drops one reference and frees the handle when none remain.
    pub(crate) fn release(&mut self, handle: u32) {
        let r = &mut self.refs[handle as usize];
        debug_assert!(*r > 0, "releasing an unreferenced point");
        *r -= 1;
        if *r == 0 {
            self.free_handle(handle);
        }
    }

    /// Frees a handle returned by `add` that no tree ended up referencing.
    pub(crate) fn release_if_unused(&mut self, handle: u32) {
        if self.refs[handle as usize] == 0 {
            self.free_handle(handle);
        }
    }

    fn free_handle(&mut self, handle: u32) {
        self.loc[handle as usize] = FREE;
        self.free.push(handle);
    }

    /// Number of handles currently referenced by at least one leaf.
    pub(crate) fn live_points(&self) -> usize {
        self.refs.len() - self.free.len()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.arena.capacity() * std::mem::size_of::<f32>()
            + self.loc.capacity() * std::mem::size_of::<u32>()
            + self.refs.capacity() * std::mem::size_of::<u16>()
            + self.free.capacity() * std::mem::size_of::<u32>()
    }

    /// Checks reference counts against the leaves that claim them and that
    /// every live point lies inside the arena (snapshot restore and tests).
    pub(crate) fn check_refs(&self, expected: &[u32]) -> bool {
        let dims = self.dims;
        expected.len() == self.refs.len()
            && self.loc.len() == self.refs.len()
            && self.step >= 1
            && self.step <= dims.max(1)
            && self
                .refs
                .iter()
                .zip(expected)
                .all(|(&a, &b)| u32::from(a) == b)
            && self.free.iter().all(|&h| {
                self.refs.get(h as usize) == Some(&0) && self.loc.get(h as usize) == Some(&FREE)
            })
            && self
                .refs
                .iter()
                .zip(&self.loc)
                .all(|(&r, &l)| r == 0 || (l as usize).saturating_add(dims) <= self.arena.len())
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.refs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shingles_share_values_and_survive_compaction() {
        // 2 metrics x shingle 3: consecutive points share 4 of 6 values.
        let mut s = PointStore::new(6, 2);
        let rows: Vec<[f32; 2]> = (0..2000).map(|t| [t as f32, -(t as f32)]).collect();
        let point = |t: usize| -> Vec<f32> { rows[t..t + 3].concat() };
        let mut live = Vec::new();
        for t in 0..1990 {
            let h = s.add(&point(t));
            // Keep runs of 10 consecutive points, every 7th point and the
            // most recent ones.
            if (t / 10) % 3 == 0 || t % 7 == 0 || t + 20 > 1990 {
                s.retain(h);
                live.push((t, h));
            } else {
                s.release_if_unused(h);
            }
            // Drop old kept points now and then.
            if t % 7 == 0 && live.len() > 50 {
                let (_, h) = live.remove(live.len() / 3);
                s.release(h);
            }
        }
        for &(t, h) in &live {
            assert_eq!(s.get(h), &point(t)[..], "point {t}");
        }
        assert_eq!(s.live_points(), live.len());
        // Far fewer values than whole points would need.
        s.compact();
        for &(t, h) in &live {
            assert_eq!(s.get(h), &point(t)[..], "point {t} after compaction");
        }
        assert!(s.arena.len() < live.len() * 4, "arena {}", s.arena.len());
    }
}
