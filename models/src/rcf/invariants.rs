//! Structural self-checks of a tree, used when restoring snapshots (which may
//! come from anywhere, so every index is bounds-checked) and by tests after
//! long runs of inserts and deletes.

use super::point_store::PointStore;
use super::tree::{LEAF_BIT, NONE, Tree, is_leaf};

impl Tree {
    /// True if `box_owner` (when built) names, for every slot, the node
    /// whose `box_slot` points back at it.
    fn box_owners_agree(&self) -> bool {
        let width = 2 * self.dims;
        self.box_owner.is_empty()
            || (self.box_owner.len() * width == self.boxes.len()
                && self
                    .box_owner
                    .iter()
                    .enumerate()
                    .all(|(s, &n)| self.box_slot.get(usize::from(n)).copied() == Some(s as u16)))
    }

    /// True if masses, cached boxes, cuts, free lists and the sampler agree.
    pub(crate) fn check_structure(&self, store: &PointStore) -> bool {
        let nodes = self.nodes.len();
        let arrays_ok = self.leaf_point.len() == nodes + 1
            && self.box_slot.len() == nodes
            && self.leaf_mass.len() == nodes + 1
            && self.boxes.len() % (2 * self.dims).max(1) == 0;
        if !arrays_ok || !self.box_owners_agree() {
            return false;
        }
        let mut leaf_seen = vec![0u16; nodes + 1];
        let mut visited = 0usize;
        let total = if self.root == NONE {
            Some(0)
        } else {
            let mut bmin = vec![f32::INFINITY; self.dims];
            let mut bmax = vec![f32::NEG_INFINITY; self.dims];
            self.check_node(
                store,
                self.root,
                &mut bmin,
                &mut bmax,
                &mut leaf_seen,
                &mut visited,
            )
        };
        let Some(total) = total else { return false };
        if total != self.sampler.len() {
            return false;
        }
        let mut from_sampler = vec![0u16; nodes + 1];
        for &l in self.sampler.leaves() {
            match from_sampler.get_mut(l as usize) {
                Some(c) => *c += 1,
                None => return false,
            }
        }
        from_sampler == leaf_seen
    }

    /// Checks the subtree at `r`, growing (`bmin`, `bmax`) by its points;
    /// returns its mass.
    fn check_node(
        &self,
        store: &PointStore,
        r: u16,
        bmin: &mut [f32],
        bmax: &mut [f32],
        leaf_seen: &mut [u16],
        visited: &mut usize,
    ) -> Option<usize> {
        *visited += 1;
        if *visited > 2 * self.nodes.len() + 2 {
            return None; // a cycle
        }
        if is_leaf(r) {
            let l = (r & !LEAF_BIT) as usize;
            let handle = *self.leaf_point.get(l)?;
            let mass = self.leaf_mass[l];
            if mass == 0 || leaf_seen[l] != 0 {
                return None;
            }
            leaf_seen[l] = mass;
            let q = store.try_get(handle)?;
            if q.iter().any(|x| !x.is_finite()) {
                return None;
            }
            super::boxes::extend(bmin, bmax, q);
            return Some(usize::from(mass));
        }
        let i = r as usize;
        if i >= self.nodes.len() {
            return None;
        }
        let dims = self.dims;
        let (mut lmin, mut lmax) = (vec![f32::INFINITY; dims], vec![f32::NEG_INFINITY; dims]);
        let (mut rmin, mut rmax) = (vec![f32::INFINITY; dims], vec![f32::NEG_INFINITY; dims]);
        let lm = self.check_node(
            store,
            self.nodes[i].left,
            &mut lmin,
            &mut lmax,
            leaf_seen,
            visited,
        )?;
        let rm = self.check_node(
            store,
            self.nodes[i].right,
            &mut rmin,
            &mut rmax,
            leaf_seen,
            visited,
        )?;
        let d = usize::from(self.nodes[i].cut_dim);
        let cut = self.nodes[i].cut_value;
        if d >= dims || !(lmax[d] <= cut && rmin[d] > cut) {
            return None;
        }
        let mass = lm + rm;
        if usize::from(self.nodes[i].mass) != mass {
            return None;
        }
        for k in 0..dims {
            lmin[k] = lmin[k].min(rmin[k]);
            lmax[k] = lmax[k].max(rmax[k]);
        }
        let should_cache = mass >= usize::from(self.box_min_mass);
        let slot = self.box_slot[i];
        if should_cache != (slot != u16::MAX) {
            return None;
        }
        if should_cache {
            let start = usize::from(slot) * 2 * dims;
            let cached = self.boxes.get(start..start + 2 * dims)?;
            if cached[..dims] != lmin[..] || cached[dims..] != lmax[..] {
                return None;
            }
        }
        for k in 0..dims {
            bmin[k] = bmin[k].min(lmin[k]);
            bmax[k] = bmax[k].max(lmax[k]);
        }
        Some(mass)
    }
}
