//! The forest's loops and their instruction-set variants: scoring
//! (`Group::score_only`: every tree's score of a point, without learning)
//! and learning (`Group::learn`: each point scored, attributed and offered
//! to the trees, in order). The same code compiled twice, for the x86-64
//! baseline every build targets and for x86-64-v3 (AVX2, BMI2, FMA: every
//! x86 server CPU since about 2015), and chosen at run time by what the
//! CPU has.
//!
//! Part of the forest in `rcf/`: `Forest::score` and `Forest::attribution`
//! call `Group::score_only_best`, the batches and `score_and_update`
//! `Group::learn`. The v3 variants run the same operations in the same
//! order, so results are bit-identical (the tests below check);
//! it is faster because three-operand vector and shift instructions save
//! the register copies the baseline needs. Scores of 8-dim points (the
//! acceptance parameters; no attribution) go one step further in the v3
//! variant: `avx8.rs` climbs with the point in one 256-bit register, the
//! same arithmetic in the same order.
//! This module holds the workspace's only `unsafe`: the calls of the v3
//! variants, each right after checking that the CPU has its features.
//! Both the check and the functions' `#[target_feature]` come from one
//! list, the `x86_64_v3!` macro.
//!
//! A variant covers only what is inlined into it, so `Group::score_only`
//! and everything under it are `#[inline(always)]`, except the lockstep
//! descent: inlined, it lost registers to the climbs, so it gets its own v3
//! function, handed down as a closure (a closure inherits its function's
//! features, so it may call another v3 function without `unsafe`).
//! Learning (`score_and_update`, the batches of `forewarn score`) inlines
//! its descent and climb (where its time goes) into its variants; the
//! insertion, deletion and box upkeep they call stay baseline functions.

use crate::rcf::forest::{Group, Step};
use crate::rcf::geo::{Dyn, Geo, Packed};
use crate::rcf::kernel::Scan;
use crate::rcf::point_store::PointStore;
use crate::rcf::traversal::{Climb, LANES, Lanes, Path, Scratch};
use crate::rcf::tree::Tree;

/// The widths with a packed (SIMD) point: `$arm!(lanes, dims)` for each,
/// `$other` for every other width. Listed once so the scoring loop and the
/// reference test cover the same widths.
macro_rules! packed_dims {
    ($dims:expr, $arm:ident, $other:expr) => {
        match $dims {
            2 => $arm!(1, 2),
            3 => $arm!(1, 3),
            4 => $arm!(1, 4),
            6 => $arm!(2, 6),
            8 => $arm!(2, 8),
            12 => $arm!(3, 12),
            16 => $arm!(4, 16),
            32 => $arm!(8, 32),
            _ => $other,
        }
    };
}
// The reference test reaches it by path; this file uses it in place.
#[cfg(test)]
pub(in crate::rcf) use packed_dims;

/// The x86-64-v3 features, listed once. `x86_64_v3!(detect)` is whether
/// this CPU has them all; `x86_64_v3! { fn ... }` compiles a function for
/// them. Calling such a function needs `unsafe` unless the caller has the
/// same features, and the one `unsafe` call (`score_only_best`) is sound
/// only after `detect`: one list for both keeps them from drifting apart.
#[cfg(target_arch = "x86_64")]
macro_rules! x86_64_v3 {
    (@with [$($f:tt)*] detect) => {
        true $(&& std::arch::is_x86_feature_detected!($f))*
    };
    (@with [$($f:tt)*] $(#[$m:meta])* $v:vis fn $($rest:tt)*) => {
        $(#[$m])*
        #[target_feature($(enable = $f),*)]
        $v fn $($rest)*
    };
    ($($input:tt)*) => {
        x86_64_v3! { @with ["avx2" "bmi1" "bmi2" "fma" "lzcnt" "popcnt"] $($input)* }
    };
}
#[cfg(target_arch = "x86_64")]
pub(in crate::rcf) use x86_64_v3;

impl Group {
    /// Adds the trees' scores of `p` to `total` (in tree order) without
    /// learning. Inlined into each instruction-set variant (`isa.rs`).
    #[inline(always)]
    pub(in crate::rcf) fn score_only(
        &self,
        p: &[f32],
        s: &mut Scratch,
        attr: Option<&mut [f64]>,
        total: &mut f64,
        descend: &impl Fn(&mut Lanes, &[Tree], &[f32]),
    ) {
        // The point is wrapped once for all trees (one dispatch on the
        // dimension per point, not per tree). `process` keeps the per-tree
        // dispatch of `Tree::climb`: the same change there was slower
        // (LLVM inlines differently).
        let Scratch { lanes, climb, .. } = s;
        let Climb {
            bmin,
            bmax,
            attr: tree_attr,
        } = climb;
        // One arm per packed dimension count: `L` registers of four, `N` used.
        macro_rules! packed {
            ($l:literal, $n:literal) => {
                self.score_in(
                    p,
                    &mut Packed::<$l, $n>::new(p),
                    lanes,
                    tree_attr,
                    attr,
                    total,
                    descend,
                )
            };
        }
        packed_dims!(p.len(), packed, {
            let mut g = Dyn {
                p,
                lo: &mut bmin[..],
                hi: &mut bmax[..],
            };
            self.score_in(p, &mut g, lanes, tree_attr, attr, total, descend)
        })
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn score_in<G: Geo>(
        &self,
        p: &[f32],
        g: &mut G,
        lanes: &mut Lanes,
        tree_attr: &mut Vec<f64>,
        mut attr: Option<&mut [f64]>,
        total: &mut f64,
        descend: &impl Fn(&mut Lanes, &[Tree], &[f32]),
    ) {
        self.sum_trees(p, lanes, total, descend, |tree, store, path| {
            let a = attr.as_deref_mut();
            g.score_tree(tree, store, path, tree_attr, a, Scan::Loop)
        });
    }

    /// Adds every tree's score of `p` to `total`, in tree order: `descend`
    /// takes the trees `LANES` at a time, then `climb` scores each from its
    /// path (`None` for an empty tree). Shared by `score_in` and the v3
    /// variant's 8-dim climb (`isa.rs`).
    #[inline(always)]
    pub(in crate::rcf) fn sum_trees(
        &self,
        p: &[f32],
        lanes: &mut Lanes,
        total: &mut f64,
        descend: &impl Fn(&mut Lanes, &[Tree], &[f32]),
        mut climb: impl FnMut(&Tree, &PointStore, Option<Path<'_>>) -> f64,
    ) {
        // Summed in a local (in tree order, as before): through `total`
        // every tree's score was stored to memory.
        let mut sum = *total;
        for trees in self.trees.chunks(LANES) {
            descend(lanes, trees, p);
            for (k, tree) in trees.iter().enumerate() {
                sum += climb(tree, &self.store, lanes.path(k));
            }
        }
        *total = sum;
    }
}

impl Group {
    /// `score_only` in the best variant this CPU runs.
    #[inline]
    pub(in crate::rcf) fn score_only_best(
        &self,
        p: &[f32],
        s: &mut Scratch,
        attr: Option<&mut [f64]>,
        total: &mut f64,
    ) {
        #[cfg(target_arch = "x86_64")]
        if use_v3() {
            #[allow(unsafe_code)]
            // SAFETY: `score_only_v3` needs the features `has_v3` has just
            // found on this CPU; it is otherwise an ordinary safe function.
            unsafe {
                self.score_only_v3(p, s, attr, total)
            };
            return;
        }
        self.score_only_baseline(p, s, attr, total);
    }

    /// `score_only` compiled for the x86-64 baseline.
    #[inline(never)]
    fn score_only_baseline(
        &self,
        p: &[f32],
        s: &mut Scratch,
        attr: Option<&mut [f64]>,
        total: &mut f64,
    ) {
        self.score_only(p, s, attr, total, &|lanes, trees, p| {
            lanes.descend(trees, p, |_| true);
        });
    }
}

impl Group {
    /// Runs each point of `steps` (`points`, one after another) through
    /// `process` in order, in the best variant this CPU runs: the learning
    /// loop of the batch path (`forewarn score`) and of `score_and_update`.
    pub(in crate::rcf) fn learn(
        &mut self,
        points: &[f32],
        steps: &[Step],
        s: &mut Scratch,
        want_attr: bool,
        sink: &mut impl FnMut(f64, &[f64]),
    ) {
        #[cfg(target_arch = "x86_64")]
        if use_v3() {
            #[allow(unsafe_code)]
            // SAFETY: `learn_v3` needs the features `has_v3` has just found
            // on this CPU; it is otherwise an ordinary safe function.
            unsafe {
                self.learn_v3(points, steps, s, want_attr, sink)
            };
            return;
        }
        self.learn_inline(points, steps, s, want_attr, sink);
    }

    /// `learn`'s body, inlined into each variant (here the baseline).
    #[inline(always)]
    fn learn_inline(
        &mut self,
        points: &[f32],
        steps: &[Step],
        s: &mut Scratch,
        want_attr: bool,
        sink: &mut impl FnMut(f64, &[f64]),
    ) {
        let dims = points.len() / steps.len().max(1);
        for (p, step) in points.chunks_exact(dims.max(1)).zip(steps) {
            if step.acts() {
                self.process(p, *step, s, want_attr, sink);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Group {
    x86_64_v3! {
        /// `learn` compiled for x86-64-v3.
        #[inline(never)]
        fn learn_v3(&mut self, points: &[f32], steps: &[Step], s: &mut Scratch, want_attr: bool, sink: &mut impl FnMut(f64, &[f64])) {
            self.learn_inline(points, steps, s, want_attr, sink);
        }
    }

    x86_64_v3! {
        /// `score_only` compiled for x86-64-v3.
        #[inline(never)]
        fn score_only_v3(&self, p: &[f32], s: &mut Scratch, attr: Option<&mut [f64]>, total: &mut f64) {
            if let (Ok(p8), None) = (<&[f32; 8]>::try_from(p), &attr) {
                return self.score_avx8(p8, s, total);
            }
            self.score_only(p, s, attr, total, &|lanes, trees, p| {
                lanes.descend_v3(trees, p);
            });
        }
    }

    x86_64_v3! {
        /// `score_only` of an 8-dimensional point without attribution, with
        /// the climb of `avx8.rs`.
        #[inline]
        fn score_avx8(&self, p: &[f32; 8], s: &mut Scratch, total: &mut f64) {
            let descend = |lanes: &mut Lanes, trees: &[Tree], p: &[f32]| lanes.descend_v3(trees, p);
            self.sum_trees(p, &mut s.lanes, total, &descend, |tree, store, path| {
                path.map_or(0.0, |path| tree.score_avx8(p, store, path))
            });
        }
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes {
    x86_64_v3! {
        /// `descend` of every tree, compiled for x86-64-v3.
        #[inline(never)]
        fn descend_v3(&mut self, trees: &[Tree], p: &[f32]) {
            self.descend_inline(trees, p, |_| true);
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's scores take the baseline variant.
    pub(in crate::rcf) static FORCE_BASELINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether to run the v3 variant: the CPU has its features, and a test has
/// not asked this thread for the baseline.
#[cfg(target_arch = "x86_64")]
#[inline]
fn use_v3() -> bool {
    #[cfg(test)]
    if FORCE_BASELINE.get() {
        return false;
    }
    has_v3()
}

/// Whether this CPU has every feature of the functions `x86_64_v3!`
/// compiles (the standard library caches the answer).
#[cfg(target_arch = "x86_64")]
#[inline]
fn has_v3() -> bool {
    x86_64_v3!(detect)
}

#[cfg(test)]
mod tests {
    use super::FORCE_BASELINE;
    use crate::rcf::Forest;
    use crate::rng::Xoshiro256PlusPlus;

    /// Scores and attributions of probes near and far from the data and of
    /// learned rows, with the variant this CPU picks and with the baseline:
    /// they must agree bit for bit, at packed dimensions (8 with and without
    /// shingling, 3, 32; `avx8.rs` takes 8) and at the general path's (5).
    #[test]
    fn every_instruction_set_variant_gives_the_same_bits() {
        #[cfg(target_arch = "x86_64")]
        if !super::has_v3() {
            eprintln!("this CPU lacks x86-64-v3: only the baseline is checked");
        }
        for (metrics, shingle) in [(2, 4), (8, 1), (3, 1), (8, 4), (5, 1)] {
            let mut f = Forest::builder()
                .trees(20)
                .sample_size(64)
                .input_dimensions(metrics)
                .shingle_size(shingle)
                .box_cache_min_mass(8)
                .seed(3)
                .build()
                .expect("valid config");
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
            let mut row = |spread: f64| -> Vec<f64> {
                (0..metrics)
                    .map(|_| spread * (rng.next_f64() - 0.5))
                    .collect()
            };
            let mut learned = Vec::new();
            for _ in 0..2_000 {
                let r = row(4.0);
                f.update(&r).expect("dims match");
                learned.push(r);
            }
            // A score and its attribution, as bits.
            let bits = |f: &Forest, p: &[f64]| {
                let score = f.score(p).expect("dims match").to_bits();
                let a = f.attribution(p).expect("dims match");
                let terms: Vec<u64> = a.high.iter().chain(&a.low).map(|x| x.to_bits()).collect();
                (score, terms)
            };
            for probe in 0..300 {
                // Without shingling, a learned row is a point some leaves hold.
                let p = match probe % 10 {
                    0 => row(40.0),
                    5 => learned[learned.len() - 1 - probe].clone(),
                    _ => row(4.0),
                };
                let best = bits(&f, &p);
                FORCE_BASELINE.set(true);
                let baseline = bits(&f, &p);
                FORCE_BASELINE.set(false);
                assert_eq!(best, baseline, "{metrics} x {shingle} dims, probe {probe}");
            }
        }
    }

    /// Learning (`Group::learn`) in the variant this CPU picks and in the
    /// baseline: the same attributions and the same forest after, row by
    /// row and in batches, at packed widths (6: `forewarn score`'s three
    /// metrics with their changes; 8) and the general one (5). One thread:
    /// the baseline switch is per thread.
    #[test]
    fn learning_gives_the_same_bits_in_every_variant() {
        for (metrics, shingle) in [(6, 1), (2, 4), (5, 1)] {
            let build = || {
                Forest::builder()
                    .trees(12)
                    .sample_size(64)
                    .input_dimensions(metrics)
                    .shingle_size(shingle)
                    .seed(5)
                    .build()
                    .expect("valid config")
            };
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
            let rows: Vec<Vec<f64>> = (0..1_500)
                .map(|t| {
                    let spread = if t % 101 == 50 { 40.0 } else { 4.0 };
                    (0..metrics)
                        .map(|_| spread * (rng.next_f64() - 0.5))
                        .collect()
                })
                .collect();
            let bits = |f: &mut Forest, batch: bool| -> Vec<u64> {
                let attrs = if batch {
                    let mut out = Vec::new();
                    for chunk in rows.chunks(256) {
                        let a = f.attribute_and_update_batch(chunk).expect("dims match");
                        out.extend(a.into_iter().map(|(a, _)| a));
                    }
                    out
                } else {
                    rows.iter()
                        .map(|r| f.attribute_and_update(r).expect("dims match"))
                        .collect()
                };
                let mut bits: Vec<u64> = attrs
                    .iter()
                    .flat_map(|a| a.high.iter().chain(&a.low).map(|x| x.to_bits()))
                    .collect();
                bits.push(f.score(&rows[0]).expect("dims match").to_bits());
                bits
            };
            for batch in [false, true] {
                let best = bits(&mut build(), batch);
                FORCE_BASELINE.set(true);
                let baseline = bits(&mut build(), batch);
                FORCE_BASELINE.set(false);
                assert_eq!(best, baseline, "{metrics} x {shingle}, batch {batch}");
            }
        }
    }
}
