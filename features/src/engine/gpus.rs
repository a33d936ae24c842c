//! The engine's per-GPU table: every GPU's [`GpuState`] in a `Vec`, found
//! by a dense `u32` slot. Part of the feature stage's engine.
//!
//! Decoders intern GPU ids (`decode::intern`), so consecutive samples of a
//! GPU carry the same `Arc<str>`. The table keeps one *canonical* `Arc` per
//! GPU and finds its slot by the `Arc`'s address (a one-word hash, no
//! string hashing or comparison); a sample with another `Arc` of the same
//! id falls back to the by-name index and, when that `Arc` is shared (an
//! interner holds it too), becomes the canonical one. The canonical `Arc`
//! is owned by the table, so its address cannot be reused by another
//! allocation while it is a key.
//!
//! Before any hashing, the slot after the previous sample's is tried.
//! States sit in insertion order, so a shard that sees its GPUs in the same
//! order every tick walks its state memory front to back (the hardware
//! prefetcher's best case), instead of jumping around a hash table of
//! kilobyte entries.
//!
//! Serializes as its slots (ids and states) and free list; both indexes are
//! rebuilt on deserialization.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::hash::FxBuild;
use crate::sample::GpuId;
use crate::state::GpuState;

/// Hashes an address: a multiplicative mix whose high bits land in the low
/// bits too (addresses end in zero bits, which a hash table must not see).
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b) ^ self.0.rotate_left(8));
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        let h = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }

    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

/// The address of an id's string, the key of the by-address index.
#[inline]
fn addr(id: &GpuId) -> usize {
    Arc::as_ptr(id).cast::<u8>() as usize
}

/// One GPU: its canonical id and its state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuEntry {
    pub id: GpuId,
    pub state: GpuState,
}

/// GPU states by slot, with by-address and by-name indexes.
#[derive(Debug, Clone, Default)]
pub struct GpuTable {
    slots: Vec<Option<GpuEntry>>,
    free: Vec<u32>,
    by_name: HashMap<GpuId, u32, FxBuild>,
    by_addr: HashMap<usize, u32, BuildHasherDefault<AddrHasher>>,
    /// The slot after the last one found: where the next sample's GPU
    /// usually is.
    next_hint: u32,
}

impl GpuTable {
    /// The slot of `gpu`, if it has state.
    #[inline]
    pub fn find(&mut self, gpu: &GpuId) -> Option<u32> {
        // A shard sees its GPUs in much the same order every tick: try the
        // slot after the last one found before hashing (that slot's memory
        // is next in line anyway; a hash probe is a cache miss).
        let hint = self.next_hint as usize;
        if let Some(Some(e)) = self.slots.get(hint)
            && Arc::ptr_eq(&e.id, gpu)
        {
            self.next_hint = self.next_hint.wrapping_add(1);
            return Some(hint as u32);
        }
        let i = self.find_indexed(gpu)?;
        self.next_hint = i.wrapping_add(1);
        Some(i)
    }

    fn find_indexed(&mut self, gpu: &GpuId) -> Option<u32> {
        if let Some(i) = self.by_addr.get(&addr(gpu)) {
            return Some(*i);
        }
        let i = *self.by_name.get(&**gpu)?;
        if Arc::strong_count(gpu) > 1 {
            // An interner shares this `Arc`: later samples will carry it, so
            // it becomes the canonical one. (A per-sample `Arc` is left out:
            // it would only churn the index.)
            let e = self.slots[i as usize]
                .as_mut()
                .expect("indexed slots are occupied");
            self.by_addr.remove(&addr(&e.id));
            self.by_name.remove(&**gpu);
            e.id = gpu.clone();
            self.by_name.insert(gpu.clone(), i);
            self.by_addr.insert(addr(gpu), i);
        }
        Some(i)
    }

    /// Adds `gpu` (which has no state yet) with `state`; returns its slot.
    pub fn insert(&mut self, gpu: &GpuId, state: GpuState) -> u32 {
        debug_assert!(!self.by_name.contains_key(&**gpu));
        let entry = Some(GpuEntry {
            id: gpu.clone(),
            state,
        });
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = entry;
                i
            }
            None => {
                self.slots.push(entry);
                u32::try_from(self.slots.len() - 1).expect("fewer than 4 billion GPUs per shard")
            }
        };
        self.by_name.insert(gpu.clone(), i);
        self.by_addr.insert(addr(gpu), i);
        self.next_hint = i.wrapping_add(1);
        i
    }

    /// The entry in slot `i` (which [`Self::find`] or [`Self::insert`]
    /// returned).
    #[inline]
    pub fn entry_mut(&mut self, i: u32) -> &mut GpuEntry {
        self.slots[i as usize]
            .as_mut()
            .expect("slots handed out are occupied")
    }

    /// The state of the GPU called `gpu`.
    pub fn get(&self, gpu: &str) -> Option<&GpuState> {
        let i = *self.by_name.get(gpu)?;
        self.slots[i as usize].as_ref().map(|e| &e.state)
    }

    /// GPUs with state.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Every GPU, in slot order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut GpuEntry> {
        self.slots.iter_mut().flatten()
    }

    /// Every GPU, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &GpuEntry> {
        self.slots.iter().flatten()
    }

    /// Drops the GPU called `gpu`; its slot is reused. False if it had no
    /// state.
    pub fn remove(&mut self, gpu: &str) -> bool {
        let Some(i) = self.by_name.remove(gpu) else {
            return false;
        };
        if let Some(e) = self.slots[i as usize].take() {
            self.by_addr.remove(&addr(&e.id));
        }
        self.free.push(i);
        true
    }

    /// Drops the GPUs for which `keep` is false; their slots are reused.
    pub fn retain(&mut self, mut keep: impl FnMut(&GpuState) -> bool) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|e| !keep(&e.state)) {
                let e = slot.take().expect("checked occupied");
                self.by_name.remove(&*e.id);
                self.by_addr.remove(&addr(&e.id));
                self.free
                    .push(u32::try_from(i).expect("slots fit in u32 by construction"));
            }
        }
    }

    /// Approximate heap bytes: slots, free list, indexes and id strings.
    pub fn approx_heap_bytes(&self) -> usize {
        let slots = self.slots.capacity() * std::mem::size_of::<Option<GpuEntry>>();
        let by_name = self.by_name.capacity() * (std::mem::size_of::<(GpuId, u32)>() + 1);
        let by_addr = self.by_addr.capacity() * (std::mem::size_of::<(usize, u32)>() + 1);
        let ids: usize = self
            .slots
            .iter()
            .flatten()
            .map(|e| e.id.len() + 16 + e.state.heap_bytes())
            .sum();
        slots + self.free.capacity() * 4 + by_name + by_addr + ids
    }
}

#[derive(Serialize)]
struct ReprRef<'a> {
    slots: &'a Vec<Option<GpuEntry>>,
    free: &'a Vec<u32>,
}

#[derive(Deserialize)]
struct Repr {
    slots: Vec<Option<GpuEntry>>,
    free: Vec<u32>,
}

impl Serialize for GpuTable {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ReprRef {
            slots: &self.slots,
            free: &self.free,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for GpuTable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = Repr::deserialize(d)?;
        let mut t = GpuTable {
            slots: r.slots,
            free: r.free,
            ..GpuTable::default()
        };
        for (i, e) in t.slots.iter().enumerate() {
            if let Some(e) = e {
                let i = u32::try_from(i).map_err(serde::de::Error::custom)?;
                if t.by_name.insert(e.id.clone(), i).is_some() {
                    return Err(serde::de::Error::custom(format!("gpu {} twice", e.id)));
                }
                t.by_addr.insert(addr(&e.id), i);
            }
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_by_address_and_by_name_and_reuses_slots() {
        let mut t = GpuTable::default();
        let a: GpuId = "GPU-a".into();
        let b: GpuId = "GPU-b".into();
        assert_eq!(t.find(&a), None);
        let ia = t.insert(&a, GpuState::new(1));
        let ib = t.insert(&b, GpuState::new(2));
        assert_eq!(t.find(&a), Some(ia));
        // Another `Arc` of the same id, not shared: found by name, not
        // made canonical.
        let fresh: GpuId = "GPU-a".into();
        assert_eq!(t.find(&fresh), Some(ia));
        assert!(Arc::ptr_eq(&t.entry_mut(ia).id, &a));
        // A shared one becomes canonical.
        let shared: GpuId = "GPU-a".into();
        let keep = shared.clone();
        assert_eq!(t.find(&shared), Some(ia));
        assert!(Arc::ptr_eq(&t.entry_mut(ia).id, &keep));
        assert_eq!(t.by_addr.len(), 2);
        t.retain(|s| s.salt != 1);
        assert_eq!((t.len(), t.find(&keep), t.by_addr.len()), (1, None, 1));
        let c: GpuId = "GPU-c".into();
        assert_eq!(t.insert(&c, GpuState::new(3)), ia, "freed slot reused");
        let mut bytes = Vec::new();
        ciborium::into_writer(&t, &mut bytes).expect("serialize");
        let mut back: GpuTable = ciborium::from_reader(bytes.as_slice()).expect("deserialize");
        assert_eq!(back.find(&b), Some(ib));
        assert_eq!(back.get("GPU-c").map(|s| s.salt), Some(3));
    }
}
