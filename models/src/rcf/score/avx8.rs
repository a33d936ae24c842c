//! The score-only climb at 8 dimensions in 256-bit AVX registers, for the
//! x86-64-v3 variant of the scoring loop (`isa.rs`).
//!
//! Part of the tree walks in `rcf/`. `kernel.rs`'s packed climb holds 8
//! coordinates in two 128-bit registers, the widest the x86-64 baseline
//! has, so each min, max and difference of a point or box is two
//! instructions; here it is one, and a cached box (64 bytes, one cache line
//! in `lines.rs`'s storage) is two loads instead of four. The arithmetic and
//! its order are `kernel.rs`'s: the gap and span sums add the two halves
//! first, as `gap_span_packed` adds its two registers, then pair the
//! partial sums the same way, so scores are bit-identical (`isa.rs`'s test
//! compares the variants at 8 dims). Paths the kernel hands to the general
//! climb, and points that equal their leaf, go to the kernel unchanged.
//!
//! Every function here is compiled for the v3 variant's features (the
//! `x86_64_v3!` list of `isa.rs`); they are reached only from
//! `Group::score_only_v3`.

use std::arch::x86_64::{
    __m256, _CMP_EQ_OQ, _mm_add_ps, _mm_unpackhi_ps, _mm_unpacklo_ps, _mm256_castps256_ps128,
    _mm256_cmp_ps, _mm256_extractf128_ps, _mm256_max_ps, _mm256_min_ps, _mm256_movemask_ps,
    _mm256_setzero_ps, _mm256_sub_ps,
};

use crate::rcf::climb::{TABLED_DEPTHS, score_unseen_tabled};
use crate::rcf::geo::Packed;
use crate::rcf::isa::x86_64_v3;
use crate::rcf::kernel::{Scan, UncachedLevels, level_score};
use crate::rcf::point_store::PointStore;
use crate::rcf::traversal::{Path, Step};
use crate::rcf::tree::Tree;

x86_64_v3! {
    /// Eight values in one register.
    #[inline]
    fn load8(x: &[f32; 8]) -> __m256 {
        bytemuck::cast(*x)
    }
}

x86_64_v3! {
    /// `geo::gap_span_packed` for one 8-lane register: the same sums in the
    /// same order.
    #[inline]
    fn gap_span8(p: __m256, lo: __m256, hi: __m256) -> (f32, f32) {
        let outside = _mm256_max_ps(
            _mm256_max_ps(_mm256_sub_ps(p, hi), _mm256_sub_ps(lo, p)),
            _mm256_setzero_ps(),
        );
        let span = _mm256_sub_ps(hi, lo);
        // The two halves first, as `gap_span_packed` adds its two registers.
        let g = _mm_add_ps(
            _mm256_castps256_ps128(outside),
            _mm256_extractf128_ps::<1>(outside),
        );
        let s = _mm_add_ps(
            _mm256_castps256_ps128(span),
            _mm256_extractf128_ps::<1>(span),
        );
        let c: [f32; 4] = bytemuck::cast(_mm_add_ps(_mm_unpacklo_ps(g, s), _mm_unpackhi_ps(g, s)));
        (c[0] + c[2], c[1] + c[3])
    }
}

impl Tree {
    x86_64_v3! {
    /// `score_packed::<2, 8>` with the point in one AVX register.
    #[inline]
    pub(in crate::rcf) fn score_avx8(&self, p8: &[f32; 8], store: &PointStore, path: Path<'_>) -> f64 {
        let kernel = || self.score_kernel8(p8, store, path.steps, path.leaf);
        let steps = path.steps;
        let depth = steps.len();
        if depth >= TABLED_DEPTHS {
            return kernel();
        }
        let p = load8(p8);
        let q = load8(store.get_n::<8>(self.leaves[usize::from(path.leaf)]));
        if _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(q, p)) == 0xFF {
            return kernel();
        }
        let norm = self.norm();
        let (mut lo, mut hi) = (q, q);
        let mut score = score_unseen_tabled(depth);
        let mut uncached = UncachedLevels::new(path, self.box_min_mass);
        'climb: {
            for (level, a, b) in uncached.by_ref() {
                for &handle in &self.leaves[usize::from(a)..usize::from(b)] {
                    let x = load8(store.get_n::<8>(handle));
                    lo = _mm256_min_ps(lo, x);
                    hi = _mm256_max_ps(hi, x);
                }
                let (gap, span) = gap_span8(p, lo, hi);
                if gap <= 0.0 {
                    break 'climb;
                }
                let prob = f64::from(gap) / f64::from(gap + span);
                score = level_score(score, level, prob);
            }
            let mut level = uncached.level;
            let Some(rows) = self.box_rows::<8>() else {
                return kernel();
            };
            while level > 0 {
                level -= 1;
                let Some((b_lo, b_hi)) = self.row_box(rows, steps[level].node()) else {
                    return kernel();
                };
                let (gap, span) = gap_span8(p, load8(b_lo), load8(b_hi));
                if gap <= 0.0 {
                    break 'climb;
                }
                let prob = f64::from(gap) / f64::from(gap + span);
                score = level_score(score, level, prob);
            }
        }
        score * norm
    }
    }

    /// `kernel.rs`'s climb, for what `score_avx8` leaves to it. Out of
    /// line and given the path's parts, so that it takes no registers from
    /// the hot climb.
    #[cold]
    #[inline(never)]
    fn score_kernel8(&self, p8: &[f32; 8], store: &PointStore, steps: &[Step], leaf: u16) -> f64 {
        let path = Path { steps, leaf };
        self.score_packed::<2, 8>(&mut Packed::new(p8), store, path, Scan::Loop)
    }
}
