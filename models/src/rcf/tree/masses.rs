//! Leaf multiplicities of a tree, stored sparsely.
//!
//! Part of the forest in `rcf/`: identical points share a leaf (no cut can
//! separate them), so a leaf has a mass, the number of sample entries that
//! hold its point. Almost every leaf of a telemetry stream has mass 1, so a
//! `u16` per leaf is mostly wasted, and memory saved here buys a lower
//! box-cache threshold (faster scores). `Masses` keeps only the leaves whose mass is not 1,
//! by position in the tree's leaf order. It serialises as the full list of
//! masses, as snapshots always held them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Masses {
    /// Number of leaves.
    len: usize,
    /// `(position, mass)` of every leaf whose mass is not 1, by position.
    other: Vec<(u16, u16)>,
}

impl Masses {
    /// Number of leaves.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn find(&self, pos: usize) -> Result<usize, usize> {
        self.other
            .binary_search_by_key(&pos, |&(p, _)| usize::from(p))
    }

    /// Mass of the leaf at `pos`, or `None` past the last leaf.
    pub(crate) fn get(&self, pos: usize) -> Option<u16> {
        (pos < self.len).then(|| self.find(pos).map_or(1, |i| self.other[i].1))
    }

    /// Mass of the leaf at `pos` (1 past the last leaf).
    #[inline]
    pub(crate) fn mass(&self, pos: usize) -> u16 {
        if self.other.is_empty() {
            return 1;
        }
        self.get(pos).unwrap_or(1)
    }

    /// One more copy of the leaf at `pos`.
    pub(crate) fn add_one(&mut self, pos: usize) {
        match self.find(pos) {
            Ok(i) => self.other[i].1 = self.other[i].1.saturating_add(1),
            Err(i) => self.other.insert(i, (pos as u16, 2)),
        }
    }

    /// One copy fewer of the leaf at `pos`; returns the copies left (0: the
    /// caller removes the leaf).
    pub(crate) fn remove_one(&mut self, pos: usize) -> u16 {
        match self.find(pos) {
            Ok(i) => {
                let left = self.other[i].1.saturating_sub(1);
                if left == 1 {
                    self.other.remove(i);
                } else {
                    self.other[i].1 = left;
                }
                left
            }
            Err(_) => 0,
        }
    }

    /// A new leaf of mass 1 at `pos`; later leaves move up one position.
    pub(crate) fn insert(&mut self, pos: usize) {
        self.len += 1;
        let from = self.find(pos).unwrap_or_else(|i| i);
        for e in &mut self.other[from..] {
            e.0 += 1;
        }
    }

    /// A new last leaf of mass 1.
    pub(crate) fn push(&mut self) {
        self.len += 1;
    }

    /// Removes the leaf at `pos`; later leaves move down one position.
    pub(crate) fn remove(&mut self, pos: usize) {
        self.len = self.len.saturating_sub(1);
        let from = match self.find(pos) {
            Ok(i) => {
                self.other.remove(i);
                i
            }
            Err(i) => i,
        };
        for e in &mut self.other[from..] {
            e.0 -= 1;
        }
    }

    /// Every leaf's mass, in leaf order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..self.len).map(|p| self.mass(p))
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.other.capacity() * std::mem::size_of::<(u16, u16)>()
    }
}

impl From<Vec<u16>> for Masses {
    /// Positions past `u16` cannot occur: a tree has at most
    /// `MAX_SAMPLE_SIZE + 1` leaves.
    fn from(masses: Vec<u16>) -> Self {
        let other = masses
            .iter()
            .enumerate()
            .filter(|&(_, &m)| m != 1)
            .map(|(p, &m)| (p as u16, m))
            .collect();
        Masses {
            len: masses.len(),
            other,
        }
    }
}

impl Serialize for Masses {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for Masses {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<u16>::deserialize(d).map(Masses::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every operation against the same operations on a plain `Vec<u16>`.
    #[test]
    fn behaves_like_a_list_of_masses() {
        let mut rng = crate::rng::Xoshiro256PlusPlus::seed_from_u64(8);
        let (mut m, mut v) = (Masses::default(), Vec::<u16>::new());
        for _ in 0..20_000 {
            let pos = |n: usize, rng: &mut crate::rng::Xoshiro256PlusPlus| {
                (rng.next_f64() * n as f64) as usize % n.max(1)
            };
            match (rng.next_f64() * 4.0) as u32 {
                0 => {
                    let p = pos(v.len() + 1, &mut rng);
                    m.insert(p);
                    v.insert(p, 1);
                }
                1 if !v.is_empty() => {
                    let p = pos(v.len(), &mut rng);
                    m.add_one(p);
                    v[p] += 1;
                }
                2 if !v.is_empty() => {
                    let p = pos(v.len(), &mut rng);
                    v[p] -= 1;
                    assert_eq!(m.remove_one(p), v[p]);
                    if v[p] == 0 {
                        m.remove(p);
                        v.remove(p);
                    }
                }
                _ => {
                    m.push();
                    v.push(1);
                }
            }
            assert_eq!(m.len(), v.len());
        }
        assert_eq!(m.iter().collect::<Vec<_>>(), v);
        assert!(v.iter().any(|&x| x > 2), "the walk should build duplicates");
        assert_eq!((m.get(v.len()), m.mass(0)), (None, v[0]));
        assert_eq!(Masses::from(v.clone()), m);
        let json = serde_json::to_string(&m).expect("serialises");
        assert_eq!(json, serde_json::to_string(&v).expect("serialises"));
        assert_eq!(serde_json::from_str::<Masses>(&json).expect("reads"), m);
    }

    #[test]
    fn a_stored_zero_mass_is_kept_for_the_consistency_check() {
        let m = Masses::from(vec![1, 0, 3]);
        assert_eq!((m.get(0), m.get(1), m.get(2)), (Some(1), Some(0), Some(3)));
    }
}
