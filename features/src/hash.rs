//! Hashing for all of forewarn, in two kinds kept apart on purpose:
//!
//! - **Map hashing** ([`FxBuild`], `rustc-hash`): fast and deterministic for
//!   maps keyed by short, trusted strings (GPU UUIDs, DCGM field names,
//!   topology labels), which come from our own fleet's exporters, so speed
//!   (the per-GPU lookup is on the hot path) beats flood resistance. Its
//!   values may change with a crate upgrade: nothing may depend on them
//!   beyond one process.
//! - **Stable hashing** ([`fnv1a`], [`gpu_salt`]): where a hash decides
//!   something persistent or visible (which shard owns a GPU, a scenario's
//!   seed, a PagerDuty dedup key, which samples train the models), its
//!   output is part of behaviour and never changes.

use std::hash::Hasher;

/// Builds the map hasher (`rustc-hash`'s FxHash).
pub type FxBuild = rustc_hash::FxBuildHasher;

/// FNV-1a, 64-bit (the `fnv` crate): a documented, stable hash of bytes.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_keyed(0xcbf2_9ce4_8422_2325, bytes)
}

/// FNV-1a from the basis `key` instead of the standard offset basis (a
/// seeded variant: `fnv1a_keyed(seed ^ basis, b)`).
pub fn fnv1a_keyed(key: u64, bytes: &[u8]) -> u64 {
    let mut h = fnv::FnvHasher::with_key(key);
    h.write(bytes);
    h.finish()
}

/// A GPU's sampling salt: which of its samples train the models. This is
/// the FxHash scheme as forewarn first wrote it (eight bytes a step, the
/// tail zero-padded, then std's `0xff` string terminator); `rustc-hash`'s
/// FxHash differs from it, and changing the salt would change which samples
/// train, hence scores and alerts, so this tiny function stays as it is.
pub fn gpu_salt(gpu: &str) -> u32 {
    const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let step = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(SEED);
    let h = gpu.as_bytes().chunks(8).fold(0, |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        step(h, u64::from_le_bytes(w))
    });
    (step(h, 0xff) >> 16) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_values() {
        // FNV-1a test vectors (Fowler, Noll, Vo).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        // Salts of the hand-written FxHasher this module used to hold.
        assert_eq!(gpu_salt(""), SALT_EMPTY);
        assert_eq!(
            gpu_salt("GPU-0a1b2c3d-0000-1111-2222-333344445555"),
            SALT_UUID
        );
    }

    const SALT_EMPTY: u32 = 0xf56f_fae8;
    const SALT_UUID: u32 = 0x9c13_359f;
}
