//! A keyed slab: stable `u32` ids for keys (cohorts, hosts) so that per-GPU
//! state caches an id and the hot path indexes a `Vec` instead of hashing
//! strings. Part of the feature stage's shared state.
//!
//! Ids stay valid until [`KeyedSlab::retain`] frees entries; it bumps
//! [`KeyedSlab::epoch`], and holders of ids re-resolve them when the epoch
//! they saw differs. Serializes as its entries only; the key index is
//! rebuilt on deserialization.

use std::collections::HashMap;
use std::hash::Hash;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Entries addressed by id, with a key → id index.
#[derive(Debug, Clone)]
pub struct KeyedSlab<K, V> {
    entries: Vec<Option<(K, V)>>,
    free: Vec<u32>,
    index: HashMap<K, u32>,
    epoch: u32,
}

impl<K, V> Default for KeyedSlab<K, V> {
    fn default() -> Self {
        KeyedSlab {
            entries: Vec::new(),
            free: Vec::new(),
            index: HashMap::new(),
            epoch: 0,
        }
    }
}

/// Equal when the entries (and so the ids) are; the index follows from them.
impl<K: PartialEq, V: PartialEq> PartialEq for KeyedSlab<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries && self.free == other.free && self.epoch == other.epoch
    }
}

impl<K: Hash + Eq + Clone, V> KeyedSlab<K, V> {
    /// The id of `key`, inserting `make()` when it is new.
    pub fn resolve(&mut self, key: &K, make: impl FnOnce() -> V) -> u32 {
        if let Some(id) = self.index.get(key) {
            return *id;
        }
        let entry = Some((key.clone(), make()));
        let id = if let Some(id) = self.free.pop() {
            self.entries[id as usize] = entry;
            id
        } else {
            self.entries.push(entry);
            u32::try_from(self.entries.len() - 1).expect("fewer than 4 billion cohorts")
        };
        self.index.insert(key.clone(), id);
        id
    }

    /// The value at `id`, if live.
    #[inline]
    pub fn get(&self, id: u32) -> Option<&V> {
        self.entries
            .get(id as usize)
            .and_then(|e| e.as_ref())
            .map(|(_, v)| v)
    }

    /// The value at `id`, if live.
    #[inline]
    pub fn get_mut(&mut self, id: u32) -> Option<&mut V> {
        self.entries
            .get_mut(id as usize)
            .and_then(|e| e.as_mut())
            .map(|(_, v)| v)
    }

    /// Keeps entries for which `keep` is true; bumps the epoch when any was
    /// removed. Returns how many were removed.
    pub fn retain(&mut self, mut keep: impl FnMut(&K, &V) -> bool) -> usize {
        let mut removed = 0;
        for (id, slot) in self.entries.iter_mut().enumerate() {
            if let Some((k, v)) = slot
                && !keep(k, v)
            {
                self.index.remove(k);
                *slot = None;
                self.free
                    .push(u32::try_from(id).expect("ids fit in u32 by construction"));
                removed += 1;
            }
        }
        if removed > 0 {
            self.epoch = self.epoch.wrapping_add(1);
        }
        removed
    }

    /// Changes whenever ids may have been reused.
    #[inline]
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when no entry is live.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Live entries with their keys.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().flatten().map(|(k, v)| (k, v))
    }

    /// Heap bytes of the slab's own tables (not of what `V` owns).
    pub fn table_heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Option<(K, V)>>()
            + self.free.capacity() * 4
            + self.index.capacity() * (std::mem::size_of::<(K, u32)>() + 1)
    }
}

#[derive(Serialize)]
struct ReprRef<'a, K, V> {
    entries: &'a Vec<Option<(K, V)>>,
    free: &'a Vec<u32>,
    epoch: u32,
}

#[derive(Deserialize)]
struct Repr<K, V> {
    entries: Vec<Option<(K, V)>>,
    free: Vec<u32>,
    epoch: u32,
}

impl<K: Serialize, V: Serialize> Serialize for KeyedSlab<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ReprRef {
            entries: &self.entries,
            free: &self.free,
            epoch: self.epoch,
        }
        .serialize(s)
    }
}

impl<'de, K, V> Deserialize<'de> for KeyedSlab<K, V>
where
    K: DeserializeOwned + Hash + Eq + Clone,
    V: DeserializeOwned,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = Repr::<K, V>::deserialize(d)?;
        let mut index = HashMap::with_capacity(r.entries.len());
        for (id, e) in r.entries.iter().enumerate() {
            if let Some((k, _)) = e {
                let id = u32::try_from(id).map_err(serde::de::Error::custom)?;
                index.insert(k.clone(), id);
            }
        }
        Ok(KeyedSlab {
            entries: r.entries,
            free: r.free,
            index,
            epoch: r.epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_retain_reuse_and_round_trip() {
        let mut s: KeyedSlab<String, u32> = KeyedSlab::default();
        let a = s.resolve(&"a".to_string(), || 1);
        let b = s.resolve(&"b".to_string(), || 2);
        assert_eq!(s.resolve(&"a".to_string(), || 9), a);
        assert_eq!(s.retain(|k, _| k != "a"), 1);
        assert_eq!(s.epoch(), 1);
        let c = s.resolve(&"c".to_string(), || 3);
        assert_eq!(c, a, "freed ids are reused");
        let json = serde_json::to_string(&s).expect("serialize");
        let back: KeyedSlab<String, u32> = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, s);
        assert_eq!(back.get(b), Some(&2));
    }
}
