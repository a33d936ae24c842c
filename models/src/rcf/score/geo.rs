//! The point and running bounding box of a climb (`Geo`), in one of two
//! representations chosen once per point by its dimension.
//!
//! Part of the tree walks in `rcf/` (`climb.rs` is their user). `Packed<L, N>`
//! holds `N` coordinates in `L` SIMD registers (`wide::f32x4`, safe code:
//! SSE on x86-64, NEON on aarch64) and serves the common dimensions 2, 3, 4,
//! 6, 8, 12, 16 and 32; `Dyn` works on slices for any other. For multiples of
//! 4 both sum in the same order (four partial sums, paired as `boxes.rs`
//! pairs them), so which one runs never changes a score.

use wide::f32x4;

use crate::rcf::boxes::gap_span;
use crate::rcf::climb::attribute_terms;
use crate::rcf::kernel::Scan;
use crate::rcf::point_store::PointStore;
use crate::rcf::traversal::Path;
use crate::rcf::tree::Tree;

/// The scored point and the running bounding box of a climb.
pub(in crate::rcf) trait Geo {
    fn p(&self) -> &[f32];
    /// The box becomes the single point `q`.
    fn reset(&mut self, q: &[f32]);
    /// How far `p` lies outside the running box (summed over coordinates)
    /// and the sum of the box's sides.
    fn gap_span(&self) -> (f32, f32);
    /// The same for the box (`lo`, `hi`).
    fn gap_span_of(&self, lo: &[f32], hi: &[f32]) -> (f32, f32);
    fn lo(&self) -> &[f32];
    fn hi(&self) -> &[f32];
    /// One level of the attribution recurrence (`climb::attribute_level`)
    /// for the box (`lo`, `hi`): `a` holds the high terms, then the low ones.
    #[inline(always)]
    fn attribute_level(&self, a: &mut [f64], lo: &[f32], hi: &[f32], keep: f64, inv: f64) {
        let p = self.p();
        let (high, low) = a.split_at_mut(p.len());
        attribute_terms(high, low, p, lo, hi, keep, inv);
    }
    /// Grows the box by the points of `tree`'s leaves at positions
    /// `from..to` of its leaf order.
    fn add_run(&mut self, tree: &Tree, store: &PointStore, from: u16, to: u16);
    /// `tree`'s normalised score of the point, which descended along `path`
    /// (`None`: the tree is empty), adding its attribution terms to `attr`
    /// if given (`Tree::score_in`), reading sibling runs as `scan` says
    /// where the geometry has a choice.
    #[inline(always)]
    fn score_tree(
        &mut self,
        tree: &Tree,
        store: &PointStore,
        path: Option<Path<'_>>,
        tree_attr: &mut Vec<f64>,
        attr: Option<&mut [f64]>,
        _scan: Scan,
    ) -> f64
    where
        Self: Sized,
    {
        tree.score_in(self, store, path, tree_attr, attr)
    }
}

/// `Geo` for any dimension, on the scratch buffers of a `Climb`.
pub(in crate::rcf) struct Dyn<'a> {
    pub(in crate::rcf) p: &'a [f32],
    pub(in crate::rcf) lo: &'a mut [f32],
    pub(in crate::rcf) hi: &'a mut [f32],
}

impl Geo for Dyn<'_> {
    fn p(&self) -> &[f32] {
        self.p
    }
    fn reset(&mut self, q: &[f32]) {
        self.lo.copy_from_slice(q);
        self.hi.copy_from_slice(q);
    }
    fn add_run(&mut self, tree: &Tree, store: &PointStore, from: u16, to: u16) {
        tree.scan_run(store, from, to, self.lo, self.hi);
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

/// `Geo` for `N` coordinates, four to a SIMD register in `L = ceil(N / 4)`
/// registers; the lanes past `N` hold zeros, which add nothing to any sum.
pub(in crate::rcf) struct Packed<const L: usize, const N: usize> {
    pub(in crate::rcf) p: [f32x4; L],
    pub(in crate::rcf) lo: [f32x4; L],
    pub(in crate::rcf) hi: [f32x4; L],
}

/// Loads `N` coordinates (the slice must hold at least that many) into `L`
/// registers, zero-padded.
#[inline(always)]
pub(in crate::rcf) fn load<const L: usize, const N: usize>(x: &[f32]) -> [f32x4; L] {
    let x = &x[..N];
    std::array::from_fn(|i| {
        let c: [f32; 4] = if 4 * i + 4 <= N {
            x[4 * i..4 * i + 4].try_into().expect("four values")
        } else {
            std::array::from_fn(|k| x.get(4 * i + k).copied().unwrap_or(0.0))
        };
        f32x4::from(c)
    })
}

/// The gap and span sums of `p` against (`lo`, `hi`), in the order of the
/// four partial sums of `boxes::gap_span`.
#[inline(always)]
pub(in crate::rcf) fn gap_span_packed<const L: usize>(
    p: &[f32x4; L],
    lo: &[f32x4; L],
    hi: &[f32x4; L],
) -> (f32, f32) {
    // max(p - hi, lo - p) is the signed distance outside [lo, hi]; its
    // positive part and `hi - lo` are never -0 (max returns its second
    // operand on ties, x - x is +0), so starting the sums from the first
    // register's terms instead of from zero changes no bit.
    let outside = |i: usize| (p[i] - hi[i]).fast_max(lo[i] - p[i]).fast_max(f32x4::ZERO);
    let (mut g, mut s) = (outside(0), hi[0] - lo[0]);
    for i in 1..L {
        g += outside(i);
        s += hi[i] - lo[i];
    }
    // Both reductions in one: [g0 + g2, s0 + s2, g1 + g3, s1 + s3], then
    // the pairs, in the order `boxes::gap_span` adds them.
    let c = (g.unpack_lo(s) + g.unpack_hi(s)).to_array();
    (c[0] + c[2], c[1] + c[3])
}

impl<const L: usize, const N: usize> Packed<L, N> {
    #[inline(always)]
    pub(in crate::rcf) fn new(p: &[f32]) -> Self {
        let p = load::<L, N>(p);
        Self { p, lo: p, hi: p }
    }
}

impl<const L: usize, const N: usize> Geo for Packed<L, N> {
    #[inline(always)]
    fn p(&self) -> &[f32] {
        &bytemuck::cast_slice(&self.p[..])[..N]
    }
    #[inline(always)]
    fn reset(&mut self, q: &[f32]) {
        let q = load::<L, N>(q);
        self.lo = q;
        self.hi = q;
    }
    #[inline(always)]
    fn gap_span(&self) -> (f32, f32) {
        gap_span_packed(&self.p, &self.lo, &self.hi)
    }
    #[inline(always)]
    fn gap_span_of(&self, lo: &[f32], hi: &[f32]) -> (f32, f32) {
        gap_span_packed(&self.p, &load::<L, N>(lo), &load::<L, N>(hi))
    }
    #[inline(always)]
    fn lo(&self) -> &[f32] {
        &bytemuck::cast_slice(&self.lo[..])[..N]
    }
    #[inline(always)]
    fn hi(&self) -> &[f32] {
        &bytemuck::cast_slice(&self.hi[..])[..N]
    }
    #[inline(always)]
    fn attribute_level(&self, a: &mut [f64], lo: &[f32], hi: &[f32], keep: f64, inv: f64) {
        // Cut to the `N` known lanes, so the loop unrolls.
        let (high, low) = a[..2 * N].split_at_mut(N);
        attribute_terms(high, low, self.p(), &lo[..N], &hi[..N], keep, inv);
    }
    #[inline(always)]
    fn add_run(&mut self, tree: &Tree, store: &PointStore, from: u16, to: u16) {
        // Learning climbs (`climb.rs` with insertion planning) and the
        // kernel's cold fallback for an inconsistent tree get here; the
        // scores of `Forest::score` go through `score_packed` instead.
        tree.add_run_packed::<L, N>(store, from, to, &mut self.lo, &mut self.hi, Scan::Chunked);
    }
    #[inline(always)]
    fn score_tree(
        &mut self,
        tree: &Tree,
        store: &PointStore,
        path: Option<Path<'_>>,
        tree_attr: &mut Vec<f64>,
        attr: Option<&mut [f64]>,
        scan: Scan,
    ) -> f64 {
        match (path, attr) {
            (Some(path), None) => tree.score_packed(self, store, path, scan),
            (Some(path), Some(a)) => tree.attribute_packed(self, store, path, a, scan),
            (None, attr) => tree.score_in(self, store, None, tree_attr, attr),
        }
    }
}
