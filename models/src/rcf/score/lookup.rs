//! How the lockstep descent (`traversal.rs`) reads the descended point
//! (`Probe`) and a tree's node arena (`Table`).
//!
//! Part of the tree walks in `rcf/`. Each step of a descent reads one
//! coordinate and one node; both reads are chosen once per batch so that,
//! in the common case (at most 32 dimensions, trees of the default sample
//! size), a masked index replaces the bounds check of every step.

use crate::rcf::tree::Node;

/// Coordinates of the descended point. Up to 32 dimensions they are padded
/// into a fixed array read with a masked index (no bounds check per step).
pub(in crate::rcf) trait Probe {
    fn at(&self, d: u16) -> f32;
}

impl Probe for [f32; 32] {
    #[inline(always)]
    fn at(&self, d: u16) -> f32 {
        self[usize::from(d) & 31]
    }
}

impl Probe for &[f32] {
    #[inline(always)]
    fn at(&self, d: u16) -> f32 {
        self[usize::from(d)]
    }
}

/// Node count of a tree of the default sample size (256).
pub(in crate::rcf) const FULL: usize = 256;

/// A tree's node arena as the lockstep descent reads it.
pub(in crate::rcf) trait Table<'t>: Copy {
    /// The arena `nodes`, or `None` if it does not fit this table.
    fn of(nodes: &'t [Node], arena: usize) -> Option<Self>;
    fn node(self, i: u16) -> &'t Node;
}

impl<'t> Table<'t> for &'t [Node] {
    #[inline(always)]
    fn of(nodes: &'t [Node], arena: usize) -> Option<Self> {
        // One length for every lane lets one bound serve them all.
        (nodes.len() == arena).then_some(nodes)
    }
    #[inline(always)]
    fn node(self, i: u16) -> &'t Node {
        &self[usize::from(i)]
    }
}

/// Exactly `FULL` nodes: an internal node's index is below `FULL`, so
/// masking it is a no-op that saves the bounds check of every step.
impl<'t> Table<'t> for &'t [Node; FULL] {
    #[inline(always)]
    fn of(nodes: &'t [Node], _arena: usize) -> Option<Self> {
        nodes.try_into().ok()
    }
    #[inline(always)]
    fn node(self, i: u16) -> &'t Node {
        &self[usize::from(i) % FULL]
    }
}
