//! Scoring a point against a tree, fast: the lockstep descent and its
//! table reads, the climb that scores and plans an insertion, the SIMD point
//! and running box, the score-only kernel, and the per-instruction-set
//! variants chosen at run time. `super::reference` is the slow, plain
//! version every path here is tested against.

#[cfg(target_arch = "x86_64")]
pub(in crate::rcf) mod avx8;
pub(in crate::rcf) mod climb;
pub(in crate::rcf) mod geo;
pub(in crate::rcf) mod isa;
pub(in crate::rcf) mod kernel;
pub(in crate::rcf) mod lookup;
pub(in crate::rcf) mod traversal;
