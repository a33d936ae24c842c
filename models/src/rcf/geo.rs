//! The point and running bounding box of a climb (`Geo`), in one of three
//! representations chosen once per point by its dimension.
//!
//! Part of the tree walks in `rcf/` (`climb.rs` is their user). `Packed<L>`
//! holds `4 * L` coordinates in SIMD registers (`wide::f32x4`, safe code:
//! SSE on x86-64, NEON on aarch64) and serves the common dimensions 4, 8,
//! 12, 16 and 32; `Fixed<N>` holds other small dimensions in plain arrays;
//! `Dyn` works on slices for any dimension. All three compute the same sums
//! in the same order, so which one runs never changes a score.

use wide::f32x4;

use super::boxes::{extend, fmax, fmin, gap_span};
use super::point_store::PointStore;
use super::tree::Tree;

/// The scored point and the running bounding box of a climb.
pub(super) trait Geo {
    fn p(&self) -> &[f32];
    /// The box becomes the single point `q`.
    fn reset(&mut self, q: &[f32]);
    fn add_point(&mut self, q: &[f32]);
    /// `add_point` of the stored point `handle`.
    #[inline(always)]
    fn add_stored(&mut self, store: &PointStore, handle: u32) {
        self.add_point(store.get(handle));
    }
    /// How far `p` lies outside the running box (summed over coordinates)
    /// and the sum of the box's sides.
    fn gap_span(&self) -> (f32, f32);
    /// The same for the box (`lo`, `hi`).
    fn gap_span_of(&self, lo: &[f32], hi: &[f32]) -> (f32, f32);
    fn lo(&self) -> &[f32];
    fn hi(&self) -> &[f32];
    /// `tree`'s normalised score of the point, which descended to `leaf`
    /// (`None`: the tree is empty) through `path`, adding its attribution
    /// terms to `attr` if given (`Tree::score_in`).
    #[inline(always)]
    fn score_tree(
        &mut self,
        tree: &Tree,
        store: &PointStore,
        leaf: Option<u16>,
        path: &[u16],
        tree_attr: &mut Vec<f64>,
        attr: Option<&mut [f64]>,
    ) -> f64
    where
        Self: Sized,
    {
        tree.score_in(self, store, leaf, path, tree_attr, attr)
    }
}

/// `Geo` for `N`-coordinate points, all in registers or on the stack.
pub(super) struct Fixed<const N: usize> {
    p: [f32; N],
    lo: [f32; N],
    hi: [f32; N],
}

impl<const N: usize> Fixed<N> {
    #[inline(always)]
    pub(super) fn new(p: &[f32]) -> Self {
        let p = *arr::<N>(p);
        Self { p, lo: p, hi: p }
    }
}

#[inline(always)]
fn arr<const N: usize>(x: &[f32]) -> &[f32; N] {
    x[..N].try_into().expect("sliced to N")
}

#[inline(always)]
#[allow(clippy::needless_range_loop)] // indexed loops vectorise best here (callgrind)
fn gap_span_arr<const N: usize>(p: &[f32; N], lo: &[f32; N], hi: &[f32; N]) -> (f32, f32) {
    if N % 4 == 0 {
        // Four partial sums each, in separate loops: fused, LLVM vectorises
        // them only 2 wide (or not at all for the span).
        let mut g = [0f32; 4];
        for c in 0..N / 4 {
            for k in 0..4 {
                let i = 4 * c + k;
                let d = fmax(p[i] - hi[i], lo[i] - p[i]);
                // 2 * max(d, 0), exactly, without a per-lane branch.
                g[k] += d + d.abs();
            }
        }
        let mut s = [0f32; 4];
        for c in 0..N / 4 {
            for k in 0..4 {
                let i = 4 * c + k;
                s[k] += hi[i] - lo[i];
            }
        }
        (
            0.5 * ((g[0] + g[2]) + (g[1] + g[3])),
            (s[0] + s[2]) + (s[1] + s[3]),
        )
    } else {
        let (mut g, mut s) = (0f32, 0f32);
        for k in 0..N {
            let d = fmax(p[k] - hi[k], lo[k] - p[k]);
            g += d + d.abs();
            s += hi[k] - lo[k];
        }
        (0.5 * g, s)
    }
}

impl<const N: usize> Geo for Fixed<N> {
    #[inline(always)]
    fn p(&self) -> &[f32] {
        &self.p
    }
    #[inline(always)]
    fn reset(&mut self, q: &[f32]) {
        let q = arr::<N>(q);
        self.lo = *q;
        self.hi = *q;
    }
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // the zip form is 20% slower (callgrind)
    fn add_point(&mut self, q: &[f32]) {
        let q = arr::<N>(q);
        for k in 0..N {
            self.lo[k] = fmin(self.lo[k], q[k]);
            self.hi[k] = fmax(self.hi[k], q[k]);
        }
    }
    #[inline(always)]
    #[allow(clippy::needless_range_loop)]
    fn add_stored(&mut self, store: &PointStore, handle: u32) {
        let q = store.get_n::<N>(handle);
        for k in 0..N {
            self.lo[k] = fmin(self.lo[k], q[k]);
            self.hi[k] = fmax(self.hi[k], q[k]);
        }
    }
    #[inline(always)]
    fn gap_span(&self) -> (f32, f32) {
        gap_span_arr(&self.p, &self.lo, &self.hi)
    }
    #[inline(always)]
    fn gap_span_of(&self, lo: &[f32], hi: &[f32]) -> (f32, f32) {
        gap_span_arr(&self.p, arr::<N>(lo), arr::<N>(hi))
    }
    #[inline(always)]
    fn lo(&self) -> &[f32] {
        &self.lo
    }
    #[inline(always)]
    fn hi(&self) -> &[f32] {
        &self.hi
    }
}

/// `Geo` for any dimension, on the scratch buffers of a `Climb`.
pub(super) struct Dyn<'a> {
    pub(super) p: &'a [f32],
    pub(super) lo: &'a mut [f32],
    pub(super) hi: &'a mut [f32],
}

impl Geo for Dyn<'_> {
    fn p(&self) -> &[f32] {
        self.p
    }
    fn reset(&mut self, q: &[f32]) {
        self.lo.copy_from_slice(q);
        self.hi.copy_from_slice(q);
    }
    fn add_point(&mut self, q: &[f32]) {
        extend(self.lo, self.hi, q);
    }
    fn gap_span(&self) -> (f32, f32) {
        gap_span(self.p, self.lo, self.hi)
    }
    fn gap_span_of(&self, lo: &[f32], hi: &[f32]) -> (f32, f32) {
        gap_span(self.p, lo, hi)
    }
    fn lo(&self) -> &[f32] {
        self.lo
    }
    fn hi(&self) -> &[f32] {
        self.hi
    }
}


/// `Geo` for `4 * L` coordinates, four to a SIMD register.
pub(super) struct Packed<const L: usize> {
    pub(super) p: [f32x4; L],
    pub(super) lo: [f32x4; L],
    pub(super) hi: [f32x4; L],
}

/// Loads `4 * L` coordinates (the slice must hold at least that many).
#[inline(always)]
pub(super) fn load<const L: usize>(x: &[f32]) -> [f32x4; L] {
    let x = &x[..4 * L];
    std::array::from_fn(|i| {
        let c: [f32; 4] = x[4 * i..4 * i + 4].try_into().expect("four values");
        f32x4::from(c)
    })
}

/// The gap and span sums of `p` against (`lo`, `hi`), in the order of
/// `Fixed`'s four partial sums.
#[inline(always)]
pub(super) fn gap_span_packed<const L: usize>(
    p: &[f32x4; L],
    lo: &[f32x4; L],
    hi: &[f32x4; L],
) -> (f32, f32) {
    let (mut g, mut s) = (f32x4::ZERO, f32x4::ZERO);
    for i in 0..L {
        // max(p - hi, lo - p) is the signed distance outside [lo, hi].
        let d = (p[i] - hi[i]).fast_max(lo[i] - p[i]);
        g += d.fast_max(f32x4::ZERO);
        s += hi[i] - lo[i];
    }
    let (g, s) = (g.to_array(), s.to_array());
    ((g[0] + g[2]) + (g[1] + g[3]), (s[0] + s[2]) + (s[1] + s[3]))
}

impl<const L: usize> Packed<L> {
    #[inline(always)]
    pub(super) fn new(p: &[f32]) -> Self {
        let p = load::<L>(p);
        Self { p, lo: p, hi: p }
    }
}

impl<const L: usize> Geo for Packed<L> {
    #[inline(always)]
    fn p(&self) -> &[f32] {
        bytemuck::cast_slice(&self.p[..])
    }
    #[inline(always)]
    fn reset(&mut self, q: &[f32]) {
        let q = load::<L>(q);
        self.lo = q;
        self.hi = q;
    }
    #[inline(always)]
    fn add_point(&mut self, q: &[f32]) {
        let q = load::<L>(q);
        for i in 0..L {
            self.lo[i] = self.lo[i].fast_min(q[i]);
            self.hi[i] = self.hi[i].fast_max(q[i]);
        }
    }
    #[inline(always)]
    fn gap_span(&self) -> (f32, f32) {
        gap_span_packed(&self.p, &self.lo, &self.hi)
    }
    #[inline(always)]
    fn gap_span_of(&self, lo: &[f32], hi: &[f32]) -> (f32, f32) {
        gap_span_packed(&self.p, &load::<L>(lo), &load::<L>(hi))
    }
    #[inline(always)]
    fn lo(&self) -> &[f32] {
        bytemuck::cast_slice(&self.lo[..])
    }
    #[inline(always)]
    fn hi(&self) -> &[f32] {
        bytemuck::cast_slice(&self.hi[..])
    }
    #[inline(always)]
    fn score_tree(
        &mut self,
        tree: &Tree,
        store: &PointStore,
        leaf: Option<u16>,
        path: &[u16],
        tree_attr: &mut Vec<f64>,
        attr: Option<&mut [f64]>,
    ) -> f64 {
        match (leaf, attr) {
            (Some(leaf), None) => tree.score_packed(self, store, leaf, path),
            (leaf, attr) => tree.score_in(self, store, leaf, path, tree_attr, attr),
        }
    }
}
