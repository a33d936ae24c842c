//! Structural self-checks of a tree, used when restoring snapshots (which may
//! come from anywhere, so every index is bounds-checked) and by tests after
//! long runs of inserts and deletes.

use crate::rcf::boxes::merge;
use crate::rcf::point_store::PointStore;
use crate::rcf::tree::{NO_BOX, NONE, Tree, is_leaf};

/// What a subtree check reports: its bounding box.
struct Sub {
    lo: Vec<f32>,
    hi: Vec<f32>,
}

impl Tree {
    /// True if `box_owner` (when built) names, for every slot, the node
    /// whose `box_slot` points back at it; and, in any case, no two nodes
    /// name one slot and every slot named is inside the cache (a restored
    /// tree rebuilds `box_owner` from these, and `drop_box` trusts it).
    fn box_owners_agree(&self) -> bool {
        let width = 2 * self.dims;
        let slots = self.boxes.len() / width.max(1);
        let mut named: Vec<u16> = self
            .box_slot
            .iter()
            .copied()
            .filter(|&s| s != NO_BOX)
            .collect();
        named.sort_unstable();
        let distinct = named.windows(2).all(|w| w[0] != w[1]);
        if !distinct || named.last().is_some_and(|&s| usize::from(s) >= slots) {
            return false;
        }
        self.box_owner.is_empty()
            || (self.box_owner.len() * width == self.boxes.len()
                && self
                    .box_owner
                    .iter()
                    .enumerate()
                    .all(|(s, &n)| self.box_slot.get(usize::from(n)).copied() == Some(s as u16)))
    }

    /// True if runs, left-leaf counts, cached boxes, cuts, the free list and
    /// the sampler agree.
    pub(crate) fn check_structure(&self, store: &PointStore) -> bool {
        let nodes = self.nodes.len();
        let leaves = self.leaves.len();
        let arrays_ok = self.box_slot.len() == nodes
            && self.masses.len() == leaves
            && leaves <= nodes + 1
            && self.boxes.len().is_multiple_of((2 * self.dims).max(1));
        if !arrays_ok || !self.box_owners_agree() {
            return false;
        }
        let mut visited = 0usize;
        let shape_ok = match leaves {
            0 => self.root == crate::rcf::tree::LEAF,
            _ => self
                .check_sub(store, self.root, 0, leaves as u16, &mut visited)
                .is_some(),
        };
        // Every node is either in the tree or on the free list.
        shape_ok && visited + 1 == leaves.max(1) && self.free_nodes() == Some(nodes - visited) && {
            self.sampler_matches_leaves()
        }
    }

    /// Length of the free-node list, or `None` if it is malformed.
    fn free_nodes(&self) -> Option<usize> {
        let mut n = self.free_node;
        let mut len = 0;
        while n != NONE {
            len += 1;
            if len > self.nodes.len() {
                return None;
            }
            // A free node caches no box (its slot would never be dropped
            // through the tree, and a reuse would drop a box it never had).
            if *self.box_slot.get(usize::from(n))? != NO_BOX {
                return None;
            }
            n = self.nodes.get(usize::from(n))?.left;
        }
        Some(len)
    }

    /// Each leaf's mass equals the number of sample entries naming its point,
    /// and the sample names no other point.
    fn sampler_matches_leaves(&self) -> bool {
        let mut from_leaves: Vec<(u32, u16)> = self
            .leaves
            .iter()
            .copied()
            .zip(self.masses.iter())
            .collect();
        from_leaves.sort_unstable();
        let mut from_sampler: Vec<u32> = self.sampler.points().to_vec();
        from_sampler.sort_unstable();
        let mut expanded = Vec::with_capacity(from_sampler.len());
        for w in from_leaves.windows(2) {
            if w[0].0 == w[1].0 {
                return false; // one point in two leaves
            }
        }
        for &(h, m) in &from_leaves {
            expanded.extend(std::iter::repeat_n(h, usize::from(m)));
        }
        expanded == from_sampler
    }

    /// Checks the subtree at child reference `r` whose run is `[start,
    /// start + count)`; returns its box. Counts internal nodes in `visited`.
    fn check_sub(
        &self,
        store: &PointStore,
        r: u16,
        start: u16,
        count: u16,
        visited: &mut usize,
    ) -> Option<Sub> {
        if is_leaf(r) {
            if count != 1 || self.masses.get(usize::from(start))? == 0 {
                return None;
            }
            let q = store.try_get(*self.leaves.get(usize::from(start))?)?;
            if q.iter().any(|x| !x.is_finite()) {
                return None;
            }
            return Some(Sub {
                lo: q.to_vec(),
                hi: q.to_vec(),
            });
        }
        *visited += 1;
        let node = *self.nodes.get(usize::from(r))?;
        if *visited > self.nodes.len() || count < 2 {
            return None; // a cycle, or a run too short for a node
        }
        let ll = node.left_leaves;
        if ll == 0 || ll >= count {
            return None;
        }
        let left = self.check_sub(store, node.left, start, ll, visited)?;
        let right = self.check_sub(store, node.right, start + ll, count - ll, visited)?;
        let d = usize::from(node.cut_dim);
        if d >= self.dims || !(left.hi[d] <= node.cut_value && right.lo[d] > node.cut_value) {
            return None;
        }
        let Sub { mut lo, mut hi } = left;
        merge(&mut lo, &mut hi, &right.lo, &right.hi);
        let slot = self.box_slot[usize::from(r)];
        if (count >= self.box_min_mass) != (slot != NO_BOX) {
            return None;
        }
        if slot != NO_BOX {
            let dims = self.dims;
            let at = usize::from(slot) * 2 * dims;
            let cached = self.boxes.get(at..at + 2 * dims)?;
            if cached[..dims] != lo[..] || cached[dims..] != hi[..] {
                return None;
            }
        }
        Some(Sub { lo, hi })
    }
}
