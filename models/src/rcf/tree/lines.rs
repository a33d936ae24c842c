//! `f32` storage that starts on a cache line, for the box cache.
//!
//! Part of the forest in `rcf/`: a tree's cached boxes (`box_cache.rs`) are
//! read whole by every climb that passes them. At 8 dimensions a box is 64
//! bytes, so a `Vec<f32>` (aligned to 4 or 16 bytes) split most boxes over
//! two cache lines, and a climb is bound by its memory reads. `Lines` keeps the values in
//! 64-byte aligned blocks and derefs to the `f32`s, so slot `s` of a
//! 16-value box is exactly line `s`. It serialises as the plain list of
//! values, so snapshots are unchanged.

use bytemuck::{Pod, Zeroable};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Values per block: one 64-byte cache line of `f32`.
const PER_LINE: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Pod, Zeroable)]
#[repr(C, align(64))]
struct Line([f32; PER_LINE]);

/// A growable list of `f32` whose first value starts a cache line.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lines {
    blocks: Vec<Line>,
    len: usize,
}

#[inline]
fn blocks_for(values: usize) -> usize {
    values.div_ceil(PER_LINE)
}

impl Lines {
    /// Values the storage holds without reallocating.
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.blocks.capacity() * PER_LINE
    }

    /// Makes room for exactly `additional` more values (rounded up to whole
    /// lines).
    #[inline]
    pub(crate) fn reserve_exact(&mut self, additional: usize) {
        let want = blocks_for(self.len + additional);
        self.blocks
            .reserve_exact(want.saturating_sub(self.blocks.len()));
    }

    /// Sets the length, filling new values with `value`.
    #[inline]
    pub(crate) fn resize(&mut self, len: usize, value: f32) {
        let old = self.len;
        self.blocks.resize(blocks_for(len), Line([0.0; PER_LINE]));
        self.len = len;
        if len > old {
            self[old..].fill(value);
        }
    }

    /// Keeps the first `len` values.
    #[inline]
    pub(crate) fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.len = len;
            self.blocks.truncate(blocks_for(len));
        }
    }

    /// Gives back capacity beyond `min_capacity` values (at least the length).
    #[inline]
    pub(crate) fn shrink_to(&mut self, min_capacity: usize) {
        let want = blocks_for(min_capacity.max(self.len));
        // Capacity comes in whole lines, so callers may ask for less than
        // is already there; nothing to do then.
        if self.blocks.capacity() > want {
            self.blocks.shrink_to(want);
        }
    }
}

impl std::ops::Deref for Lines {
    type Target = [f32];

    #[inline(always)]
    fn deref(&self) -> &[f32] {
        &bytemuck::cast_slice::<Line, f32>(&self.blocks)[..self.len]
    }
}

impl std::ops::DerefMut for Lines {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [f32] {
        let len = self.len;
        &mut bytemuck::cast_slice_mut::<Line, f32>(&mut self.blocks)[..len]
    }
}

impl PartialEq for Lines {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl From<Vec<f32>> for Lines {
    fn from(values: Vec<f32>) -> Self {
        let mut lines = Lines::default();
        lines.reserve_exact(values.len());
        lines.resize(values.len(), 0.0);
        lines.copy_from_slice(&values);
        lines
    }
}

impl Serialize for Lines {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Lines {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<f32>::deserialize(d).map(Lines::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_start_on_a_cache_line_and_behave_like_a_vec() {
        let mut l = Lines::default();
        assert!(l.is_empty());
        l.resize(20, 1.5);
        assert_eq!(l.as_ptr() as usize % 64, 0);
        assert_eq!(l.len(), 20);
        assert!(l.capacity() >= 20 && l.capacity() % PER_LINE == 0);
        l[19] = 2.0;
        l.copy_within(19..20, 0);
        assert_eq!((l[0], l[1], l[19]), (2.0, 1.5, 2.0));
        l.truncate(3);
        assert_eq!(&l[..], &[2.0, 1.5, 1.5]);
        // Regrowing fills with the new value, not what was cut off.
        l.resize(18, -1.0);
        assert_eq!((l[2], l[3], l[17]), (1.5, -1.0, -1.0));
        l.shrink_to(0);
        assert_eq!(l.capacity(), 32);
        let json = serde_json::to_string(&l).expect("serialises");
        let back: Lines = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, l);
        assert_eq!(
            serde_json::from_str::<Vec<f32>>(&json)
                .expect("a list")
                .len(),
            18
        );
    }
}
