//! Box arithmetic of the tree walks: growing a bounding box by a point or a
//! box, and the gap/span sums behind a level's separation probability.
//!
//! The climbs of the common dimensions use the SIMD versions in `geo.rs`;
//! these serve box upkeep on insertion and deletion and the other
//! dimensions, and are written for LLVM's vectoriser rather than with
//! `std::arch` intrinsics (those are callable without `unsafe` only from
//! functions compiled for their instruction set, as in `avx8.rs`, and this
//! code runs in the baseline build): for the common dimensions (4, 8, 16
//! and 32) a const-size version is fully unrolled into SSE operations, and
//! the gap uses
//! `(d + |d|) / 2` rather than a comparison, which LLVM otherwise turns into
//! per-lane branches. `max(p - hi, lo - p)` is the signed distance of `p`
//! outside `[lo, hi]` because `lo <= hi`, so at most one side is positive.

/// Calls `$f::<N>` for small and common dimensions and `$generic` otherwise
/// (for functions correct at any `N`; `by_dims!` is for multiples of 4).
macro_rules! by_dims_any {
    ($n:expr, $f:ident ( $($arg:expr),* ), $generic:expr) => {
        match $n {
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            6 => $f::<6>($($arg),*),
            8 => $f::<8>($($arg),*),
            16 => $f::<16>($($arg),*),
            32 => $f::<32>($($arg),*),
            _ => $generic,
        }
    };
}

/// Calls `$f::<N>` for the common dimensions and `$generic` otherwise.
macro_rules! by_dims {
    ($n:expr, $f:ident ( $($arg:expr),* ), $generic:expr) => {
        match $n {
            4 => $f::<4>($($arg),*),
            8 => $f::<8>($($arg),*),
            16 => $f::<16>($($arg),*),
            32 => $f::<32>($($arg),*),
            _ => $generic,
        }
    };
}

#[inline(always)]
fn arr<const N: usize>(x: &[f32]) -> &[f32; N] {
    x[..N].try_into().expect("sliced to N")
}

#[inline(always)]
fn arr_mut<const N: usize>(x: &mut [f32]) -> &mut [f32; N] {
    (&mut x[..N]).try_into().expect("sliced to N")
}

/// Grows (`bmin`, `bmax`) to contain `q`.
#[inline]
pub(super) fn extend(bmin: &mut [f32], bmax: &mut [f32], q: &[f32]) {
    by_dims_any!(q.len(), extend_n(bmin, bmax, q), {
        for ((a, b), &x) in bmin.iter_mut().zip(bmax.iter_mut()).zip(q) {
            *a = fmin(*a, x);
            *b = fmax(*b, x);
        }
    })
}

#[inline(always)]
pub(super) fn extend_n<const N: usize>(bmin: &mut [f32], bmax: &mut [f32], q: &[f32]) {
    let (a, b, q) = (arr_mut::<N>(bmin), arr_mut::<N>(bmax), arr::<N>(q));
    for k in 0..N {
        a[k] = fmin(a[k], q[k]);
        b[k] = fmax(b[k], q[k]);
    }
}

/// Grows (`bmin`, `bmax`) to contain the box (`lo`, `hi`).
#[inline]
pub(super) fn merge(bmin: &mut [f32], bmax: &mut [f32], lo: &[f32], hi: &[f32]) {
    by_dims_any!(lo.len(), merge_n(bmin, bmax, lo, hi), {
        for ((a, b), (&l, &h)) in bmin.iter_mut().zip(bmax.iter_mut()).zip(lo.iter().zip(hi)) {
            *a = fmin(*a, l);
            *b = fmax(*b, h);
        }
    })
}

#[inline(always)]
pub(super) fn merge_n<const N: usize>(bmin: &mut [f32], bmax: &mut [f32], lo: &[f32], hi: &[f32]) {
    let (a, b) = (arr_mut::<N>(bmin), arr_mut::<N>(bmax));
    let (l, h) = (arr::<N>(lo), arr::<N>(hi));
    for k in 0..N {
        a[k] = fmin(a[k], l[k]);
        b[k] = fmax(b[k], h[k]);
    }
}

// Plain comparisons instead of `f32::min`/`max`, whose NaN handling costs
// several instructions per coordinate: every stored coordinate is finite.

#[inline(always)]
pub(super) fn fmin(a: f32, b: f32) -> f32 {
    if b < a { b } else { a }
}

#[inline(always)]
pub(super) fn fmax(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

/// Sum over coordinates of how far `p` lies outside `[lo, hi]`, and the sum
/// of the box's side lengths.
#[inline]
pub(super) fn gap_span(p: &[f32], lo: &[f32], hi: &[f32]) -> (f32, f32) {
    by_dims!(p.len(), gap_span_n(p, lo, hi), {
        let (mut gap, mut span) = (0.0f32, 0.0f32);
        for ((&x, &l), &h) in p.iter().zip(lo).zip(hi) {
            gap += pos(fmax(x - h, l - x));
            span += h - l;
        }
        (gap, span)
    })
}

#[inline(always)]
fn gap_span_n<const N: usize>(p: &[f32], lo: &[f32], hi: &[f32]) -> (f32, f32) {
    let (p, lo, hi) = (arr::<N>(p), arr::<N>(lo), arr::<N>(hi));
    let mut twice = [0f32; N];
    let mut side = [0f32; N];
    for k in 0..N {
        let d = fmax(p[k] - hi[k], lo[k] - p[k]);
        // 2 * max(d, 0), exactly.
        twice[k] = d + d.abs();
        side[k] = hi[k] - lo[k];
    }
    let (mut g, mut s) = ([0f32; 4], [0f32; 4]);
    for c in 0..N / 4 {
        for k in 0..4 {
            g[k] += twice[4 * c + k];
            s[k] += side[4 * c + k];
        }
    }
    (
        0.5 * ((g[0] + g[2]) + (g[1] + g[3])),
        (s[0] + s[2]) + (s[1] + s[3]),
    )
}

/// `max(x, 0)` for finite `x`.
#[inline(always)]
pub(super) fn pos(x: f32) -> f32 {
    if x > 0.0 { x } else { 0.0 }
}
