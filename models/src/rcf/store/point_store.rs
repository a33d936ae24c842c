//! Shared, reference-counted, shingle-aware storage for the points that a
//! forest's trees hold.
//!
//! Every tree of a forest sees the same stream, so their reservoirs overlap
//! heavily; storing each accepted point once here (as `f32`) and letting tree
//! leaves hold a `u32` handle cuts memory several-fold. A handle is the
//! offset of the point's values in the arena, so reading a leaf's point is
//! one load: climbs scan runs of leaves, and a handle table in between cost
//! a dependent cache miss per leaf. A point's count is the number of tree
//! leaves holding it; a point whose count drops to zero is dead.
//!
//! Shingling makes consecutive points overlap: point `t` is point `t - 1`
//! shifted by one row. Points live in one flat arena, so a point whose first
//! `dims - step` values equal the arena's tail is stored by appending only
//! its last `step` values (AWS's random-cut-forest stores shingles the same
//! way). For a telemetry stream almost every recent row is kept by some tree,
//! so recent points cost one row each instead of a whole shingle. Every point
//! starts at a multiple of the row width, so counts are kept per row. Values
//! of dead points stay in the arena until it fills up; then `make_room` moves
//! the live runs down, keeping overlapping points overlapped, and returns the
//! new handles for the trees to rewrite. Where a value lives never changes
//! what it is, so compaction timing cannot change any score.

use serde::{Deserialize, Serialize};

/// Points of one fixed dimension, addressed by `u32` handles (arena offsets)
/// that stay valid until the next `make_room` that compacts. Read back
/// through `StoreRepr`, which checks the shape and recounts live points.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "StoreRepr")]
pub(crate) struct PointStore {
    dims: usize,
    /// Values that differ between consecutive shingles (the row width);
    /// `dims` when there is no shingling. `dims` is a multiple of it.
    step: usize,
    /// Point values; handle `h` is the point `arena[h..h + dims]`.
    arena: Vec<f32>,
    /// Number of tree leaves holding the point that starts at each row
    /// (`refs[h / step]`); 0 for a dead point or a row no point starts at. A
    /// tree holds a point in at most one leaf, so this never exceeds the
    /// tree count (at most 10,000).
    refs: Vec<u16>,
    /// Points with a nonzero count.
    #[serde(skip)]
    live: usize,
}

/// A stored point store, as read before its shape is checked.
#[derive(Deserialize)]
struct StoreRepr {
    dims: usize,
    step: usize,
    arena: Vec<f32>,
    refs: Vec<u16>,
}

/// Why a stored point store cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("invalid point store: {0}")]
pub(in crate::rcf) struct BadStore(&'static str);

impl TryFrom<StoreRepr> for PointStore {
    type Error = BadStore;

    fn try_from(r: StoreRepr) -> Result<Self, BadStore> {
        let StoreRepr {
            dims,
            step,
            arena,
            refs,
        } = r;
        if step == 0 || dims == 0 || dims % step != 0 {
            return Err(BadStore("dimensions are not a multiple of the row width"));
        }
        let mut store = PointStore {
            dims,
            step,
            arena,
            refs,
            live: 0,
        };
        if store.refs.len() != store.rows() {
            return Err(BadStore("counts do not match the arena's rows"));
        }
        store.live = store.refs.iter().filter(|&&c| c > 0).count();
        Ok(store)
    }
}

impl PointStore {
    pub(crate) fn new(dims: usize, step: usize) -> Self {
        let step = step.clamp(1, dims.max(1));
        // Shingles overlap by whole rows only when the row width divides
        // the dimension (it always does for internal shingling).
        let step = if dims.is_multiple_of(step) {
            step
        } else {
            dims.max(1)
        };
        Self {
            dims,
            step,
            arena: Vec::new(),
            refs: Vec::new(),
            live: 0,
        }
    }

    /// The row width: handles are multiples of it.
    /// Values per point (the forest's shingled dimensions).
    pub(crate) fn dims(&self) -> usize {
        self.dims
    }

    pub(crate) fn step(&self) -> usize {
        self.step
    }

    fn rows(&self) -> usize {
        self.arena.len() / self.step
    }

    /// The row `handle` starts at (where `check_refs` counts it), if it
    /// names a whole point of the arena.
    pub(crate) fn ref_index(&self, handle: u32) -> Option<usize> {
        let h = handle as usize;
        (h.is_multiple_of(self.step) && h.checked_add(self.dims)? <= self.arena.len())
            .then_some(h / self.step)
    }

    /// The coordinates of `handle`.
    #[inline]
    pub(crate) fn get(&self, handle: u32) -> &[f32] {
        let start = handle as usize;
        &self.arena[start..start + self.dims]
    }

    /// The first `N` coordinates of `handle` (`N` at most the dimension),
    /// with one bounds check: a `u32` offset plus a constant cannot overflow.
    #[inline(always)]
    pub(crate) fn get_n<const N: usize>(&self, handle: u32) -> &[f32; N] {
        let start = handle as usize;
        self.arena[start..start + N]
            .try_into()
            .expect("a slice of N values")
    }

    /// The coordinates of `handle`, or `None` if it names no point (snapshot checks).
    pub(crate) fn try_get(&self, handle: u32) -> Option<&[f32]> {
        self.ref_index(handle)?;
        Some(self.get(handle))
    }

    /// Start of the values the arena's tail shares with `point`, if the last
    /// `dims - step` values of the arena equal `point`'s first ones.
    fn shared_start(&self, point: &[f32]) -> Option<usize> {
        let overlap = self.dims - self.step;
        let len = self.arena.len();
        (overlap > 0 && len >= overlap && self.arena[len - overlap..] == point[..overlap])
            .then(|| len - overlap)
    }

    /// Compacts the arena if the next `add` might not fit in it. After a
    /// compaction, returns every live point's new handle (`map[h / step]`
    /// for old handle `h`), which the caller must apply to every handle it
    /// holds: the old ones name nothing any more.
    pub(crate) fn make_room(&mut self) -> Option<Vec<u32>> {
        if self.arena.len() + self.dims <= self.arena.capacity() {
            return None;
        }
        let map = self.compact();
        let live = self.arena.len() + self.dims;
        // Keep a sixteenth of headroom so compactions stay rare (each one is
        // a pass over the live values and over every tree's handles: at the
        // default parameters one per ~700 rows, ~0.05 us a row) without
        // wasting much memory, and give back capacity a past peak left (the
        // arena would otherwise keep the largest size it ever had).
        let headroom = (live / 16).max(64 * self.dims);
        let want = live + headroom;
        if want > self.arena.capacity() {
            self.arena.reserve_exact(want - self.arena.len());
        } else if self.arena.capacity() > want + headroom {
            self.arena.shrink_to(want);
        }
        let rows = self.arena.capacity() / self.step;
        if rows > self.refs.capacity() {
            self.refs.reserve_exact(rows - self.refs.len());
        } else {
            self.refs.shrink_to(rows);
        }
        Some(map)
    }

    /// Stores `point` with a count of zero (it stays dead unless a tree
    /// `retain`s it) and returns its handle. Call `make_room` first.
    pub(crate) fn add(&mut self, point: &[f32]) -> u32 {
        debug_assert_eq!(point.len(), self.dims);
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
        self.refs.resize(self.rows(), 0);
        u32::try_from(start).expect("the arena is compacted long before 2^32 values")
    }

    /// Moves the live points to the front of the arena, in arena order, so
    /// that points which overlapped still overlap; returns each old row's
    /// new handle (meaningful for live points only).
    fn compact(&mut self) -> Vec<u32> {
        let (dims, step) = (self.dims, self.step);
        let mut map = vec![0u32; self.refs.len()];
        let mut refs = vec![0u16; self.refs.len()];
        let mut write = 0usize;
        // Current run: where it started in the old arena and in the new one,
        // and the old end of what has been copied.
        let (mut old_start, mut new_start, mut old_end) = (0usize, 0usize, 0usize);
        for (row, &count) in self.refs.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let s = row * step;
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
            let at = new_start + (s - old_start);
            map[row] = at as u32;
            refs[at / step] = count;
        }
        self.arena.truncate(write);
        refs.truncate(self.rows());
        self.refs = refs;
        map
    }

    #[inline]
    pub(crate) fn retain(&mut self, handle: u32) {
        let r = &mut self.refs[handle as usize / self.step];
        self.live += usize::from(*r == 0);
        *r += 1;
    }

    /// Drops one reference; the point is dead once none remain.
    pub(crate) fn release(&mut self, handle: u32) {
        let r = &mut self.refs[handle as usize / self.step];
        debug_assert!(*r > 0, "releasing an unreferenced point");
        *r -= 1;
        self.live -= usize::from(*r == 0);
    }

    /// Number of points referenced by at least one leaf.
    pub(crate) fn live_points(&self) -> usize {
        self.live
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.arena.capacity() * std::mem::size_of::<f32>()
            + self.refs.capacity() * std::mem::size_of::<u16>()
    }

    /// Checks the counts against the leaves that claim them (snapshot
    /// restore and tests); `expected` is indexed by `ref_index`.
    pub(crate) fn check_refs(&self, expected: &[u32]) -> bool {
        expected.len() == self.refs.len()
            && self
                .refs
                .iter()
                .zip(expected)
                .all(|(&a, &b)| u32::from(a) == b)
    }

    /// Length of the table `check_refs` expects.
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
            if let Some(map) = s.make_room() {
                for (_, h) in &mut live {
                    *h = map[*h as usize / 2];
                }
            }
            let h = s.add(&point(t));
            // Keep runs of 10 consecutive points, every 7th point and the
            // most recent ones.
            if (t / 10) % 3 == 0 || t % 7 == 0 || t + 20 > 1990 {
                s.retain(h);
                live.push((t, h));
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
        let map = s.compact();
        for (_, h) in &mut live {
            *h = map[*h as usize / 2];
        }
        for &(t, h) in &live {
            assert_eq!(s.get(h), &point(t)[..], "point {t} after compaction");
        }
        assert!(s.arena.len() < live.len() * 4, "arena {}", s.arena.len());
    }
}
