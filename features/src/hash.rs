//! The project's fast, deterministic hasher for maps keyed by short,
//! trusted strings (GPU UUIDs, DCGM field names, topology labels): the
//! FxHash scheme, eight bytes per step. Its output is part of behaviour (the
//! feature engine salts per-GPU sampling with it), so it never changes.

use std::hash::{BuildHasherDefault, Hasher};

/// The per-GPU map's hasher: FxHash-style, eight bytes per step. GPU UUIDs
/// come from our own fleet's exporters, so speed (the lookup is on the hot
/// path, SipHash cost ~10 % of the stage) beats flood resistance here; it
/// is also deterministic.
#[derive(Default)]
pub struct FxHasher(u64);

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl Hasher for FxHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(FX_SEED);
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(FX_SEED);
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(i)).wrapping_mul(FX_SEED);
    }
}

/// Builds [`FxHasher`]s.
pub type FxBuild = BuildHasherDefault<FxHasher>;
