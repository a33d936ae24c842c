//! The streaming random cut forest: shingles input rows, scores each point
//! against every tree and feeds the trees' samplers, in one pass per tree.
//!
//! Trees are split into groups that each own a `PointStore`; with the default
//! single group every accepted point is stored once for the whole forest.
//! `threads > 1` gives one group per thread so the batch calls
//! (`forest/batch.rs`) can run groups in parallel; results are identical for
//! any thread count because each tree has its own generator and per-tree
//! scores and attribution terms are summed in tree order.

use serde::{Deserialize, Serialize};

use super::RcfError;
use super::attribution::DiVector;
use super::config::{ForestBuilder, ForestConfig};
use super::point_store::PointStore;
use super::shingle::Shingler;
use super::snapshot::{ForestRepr, SNAPSHOT_VERSION, check_json_version};
use super::traversal::{LANES, Plan, Scratch};
use super::tree::Tree;
use crate::rng::SplitMix64;

mod batch;

thread_local! {
    /// Walk buffers for the read-only `score` and `attribution`, which cannot
    /// use the forest's own (they take `&self`).
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::new(0));
}

/// Trees sharing one point store.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Group {
    pub(super) store: PointStore,
    pub(super) trees: Vec<Tree>,
}

/// What to do with one point.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    /// Time index offered to the samplers.
    t: u64,
    /// Offer the point to the samplers.
    insert: bool,
    /// Compute its score.
    score: bool,
}

impl Step {
    /// Whether the trees have anything to do with the point.
    #[inline(always)]
    pub(super) fn acts(self) -> bool {
        self.insert || self.score
    }
}

impl Group {
    /// Scores `p` in each tree and offers it to the trees' samplers. Each
    /// scored tree reports through `sink`, in tree order, its score and (with
    /// `want_attr`) its `2 * dims` attribution terms, so that callers sum them
    /// in one fixed order however the trees are grouped. Inlined into each
    /// instruction-set variant of the learning loop (`Group::learn`,
    /// `score/isa.rs`).
    #[inline(always)]
    pub(super) fn process(
        &mut self,
        p: &[f32],
        step: Step,
        s: &mut Scratch,
        want_attr: bool,
        sink: &mut impl FnMut(f64, &[f64]),
    ) {
        let want_attr = want_attr && step.score;
        let mut terms = std::mem::take(&mut s.terms);
        terms.clear();
        terms.resize(if want_attr { 2 * p.len() } else { 0 }, 0.0);
        let mut handle = None;
        if step.insert {
            // Compacting moves points, so it happens here, before any tree
            // holds a handle of this step.
            if let Some(map) = self.store.make_room() {
                self.remap(&map);
            }
        }
        let n = self.trees.len();
        for start in (0..n).step_by(LANES) {
            let trees = &mut self.trees[start..n.min(start + LANES)];
            let mut accs = [None; LANES];
            if step.insert {
                for (a, tree) in accs.iter_mut().zip(trees.iter_mut()) {
                    *a = tree.sampler.offer(step.t, &mut tree.rng);
                }
            }
            if !step.score && accs.iter().all(Option::is_none) {
                continue;
            }
            s.lanes
                .descend_inline(trees, p, |k| step.score || accs[k].is_some());
            for (k, tree) in trees.iter_mut().enumerate() {
                let path = s.lanes.path(k);
                let a = want_attr.then(|| {
                    terms.fill(0.0);
                    &mut terms[..]
                });
                let Some(acc) = accs[k] else {
                    if step.score {
                        let score = tree.climb(&self.store, p, path, &mut s.climb, a, None);
                        sink(score.0, &terms);
                    }
                    continue;
                };
                let mut rng = tree.rng.clone();
                let (score, plan) =
                    tree.climb(&self.store, p, path, &mut s.climb, a, Some(&mut rng));
                tree.rng = rng;
                if step.score {
                    sink(score, &terms);
                }
                let h = *handle.get_or_insert_with(|| self.store.add(p));
                // The handle the sample entry refers to: the leaf's point.
                let kept = match (plan, path) {
                    (Plan::Duplicate, Some(path)) => tree.insert_duplicate(path),
                    (
                        Plan::Split {
                            level,
                            cut_dim,
                            cut_value,
                        },
                        Some(path),
                    ) => {
                        tree.insert_split(&mut self.store, path, level, cut_dim, cut_value, h, p);
                        h
                    }
                    _ => {
                        tree.insert_root(&mut self.store, h);
                        h
                    }
                };
                if let Some(evicted) = acc.evict {
                    tree.delete(&mut self.store, evicted, &mut s.path, &mut s.q);
                }
                tree.sampler.commit(step.t, acc, kept, &mut tree.rng);
            }
        }
        s.terms = terms;
    }

    /// Rewrites every handle the trees hold after the store compacted
    /// (`PointStore::make_room`).
    fn remap(&mut self, map: &[u32]) {
        let step = self.store.step();
        for t in &mut self.trees {
            t.map_handles(|h| map[h as usize / step]);
        }
    }
}

/// A streaming random cut forest over rows of `input_dimensions` values.
///
/// ```
/// use models::rcf::Forest;
/// let mut forest = Forest::builder().input_dimensions(2).shingle_size(4).seed(17).build()?;
/// for t in 0..1000 {
///     let x = (t as f64 / 10.0).sin();
///     let score = forest.score_and_update(&[x, 2.0 * x])?;
///     assert!(score >= 0.0);
/// }
/// let why = forest.attribution(&[5.0, 0.0])?;
/// assert!(why.total() > 1.0);
/// # Ok::<(), models::rcf::RcfError>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "ForestRepr")]
pub struct Forest {
    /// Snapshot format version (`snapshot.rs`), always `SNAPSHOT_VERSION`.
    version: u32,
    config: ForestConfig,
    groups: Vec<Group>,
    shingle: Shingler,
    /// Points offered to the samplers so far (their time index).
    stored: u64,
    #[serde(skip)]
    scratch: Option<Scratch>,
    #[serde(skip)]
    point: Vec<f32>,
}

impl Forest {
    pub fn builder() -> ForestBuilder {
        ForestBuilder::default()
    }

    pub(crate) fn new(config: ForestConfig) -> Self {
        let dims = config.dimensions();
        let mut seeds = SplitMix64::new(config.seed);
        let groups_n = config.threads.min(config.trees);
        let per_group = config.trees.div_ceil(groups_n);
        let mut groups = Vec::with_capacity(groups_n);
        let mut made = 0;
        while made < config.trees {
            let n = per_group.min(config.trees - made);
            let trees = (0..n)
                .map(|_| {
                    Tree::new(
                        dims,
                        config.sample_size,
                        config.time_decay,
                        config.box_cache_min_mass as u16,
                        seeds.next_u64(),
                    )
                })
                .collect();
            groups.push(Group {
                store: PointStore::new(dims, config.input_dimensions),
                trees,
            });
            made += n;
        }
        let shingle = Shingler::new(config.input_dimensions, config.shingle_size);
        let mut f = Self::restored(config, groups, shingle, 0);
        f.scratch = Some(Scratch::new(dims));
        f.point = Vec::with_capacity(dims);
        f
    }

    /// A forest of the given state, without walk buffers (made on first use).
    pub(super) fn restored(
        config: ForestConfig,
        groups: Vec<Group>,
        shingle: Shingler,
        stored: u64,
    ) -> Self {
        Self {
            version: SNAPSHOT_VERSION,
            config,
            groups,
            shingle,
            stored,
            scratch: None,
            point: Vec::new(),
        }
    }

    pub fn config(&self) -> &ForestConfig {
        &self.config
    }

    /// True once `output_after` points are stored and scores are reported.
    pub fn is_ready(&self) -> bool {
        self.stored >= self.config.output_after as u64
    }

    /// The point the last row learnt was scored as (its shingle, imputed
    /// values included; zeros before any row).
    pub(crate) fn last_point(&self) -> &[f32] {
        self.shingle.point()
    }

    /// Points offered to the samplers so far.
    pub fn points_seen(&self) -> u64 {
        self.stored
    }

    /// Score of `row` without learning from it (0 before warm-up).
    pub fn score(&self, row: &[f64]) -> Result<f64, RcfError> {
        self.evaluate(row, None)
    }

    /// Attribution of the score of `row` without learning from it.
    pub fn attribution(&self, row: &[f64]) -> Result<DiVector, RcfError> {
        let mut flat = vec![0.0; 2 * self.config.dimensions()];
        self.evaluate(row, Some(&mut flat))?;
        Ok(DiVector::from_flat(&flat))
    }

    /// Learns from `row`.
    pub fn update(&mut self, row: &[f64]) -> Result<(), RcfError> {
        self.step(row, None, false).map(|_| ())
    }

    /// Scores `row` as `score` would, then learns from it.
    pub fn score_and_update(&mut self, row: &[f64]) -> Result<f64, RcfError> {
        self.step(row, None, true)
    }

    /// Attribution of `row` as `attribution` would give, then learns from it.
    pub fn attribute_and_update(&mut self, row: &[f64]) -> Result<DiVector, RcfError> {
        let mut flat = vec![0.0; 2 * self.config.dimensions()];
        self.step(row, Some(&mut flat), true)?;
        Ok(DiVector::from_flat(&flat))
    }

    fn check(&self, row: &[f64]) -> Result<(), RcfError> {
        if row.len() != self.config.input_dimensions {
            return Err(RcfError::DimensionMismatch {
                expected: self.config.input_dimensions,
                got: row.len(),
            });
        }
        Ok(())
    }

    fn evaluate(&self, row: &[f64], mut attr: Option<&mut [f64]>) -> Result<f64, RcfError> {
        self.check(row)?;
        let mut total = 0.0;
        let scored = SCRATCH.with_borrow_mut(|s| {
            let mut point = std::mem::take(&mut s.q);
            let cand = self.shingle.candidate(row, &mut point);
            let scored = cand.complete && self.is_ready();
            if scored {
                s.ensure(self.config.dimensions());
                for g in &self.groups {
                    g.score_only_best(&point, s, attr.as_deref_mut(), &mut total);
                }
            }
            s.q = point;
            scored
        });
        Ok(if scored {
            self.finish(total, attr)
        } else {
            0.0
        })
    }

    fn finish(&self, total: f64, attr: Option<&mut [f64]>) -> f64 {
        let n = self.config.trees as f64;
        if let Some(a) = attr {
            a.iter_mut().for_each(|x| *x /= n);
        }
        total / n
    }

    fn step(
        &mut self,
        row: &[f64],
        attr: Option<&mut [f64]>,
        want_score: bool,
    ) -> Result<f64, RcfError> {
        self.check(row)?;
        let mut point = std::mem::take(&mut self.point);
        let cand = self.shingle.candidate(row, &mut point);
        let step = Step {
            t: self.stored,
            insert: cand.complete && !cand.poisoned,
            score: want_score && cand.complete && self.is_ready(),
        };
        let dims = self.config.dimensions();
        let mut s = self.scratch.take().unwrap_or_else(|| Scratch::new(dims));
        let mut total = 0.0;
        let mut attr = if step.score { attr } else { None };
        if step.acts() {
            let want_attr = attr.is_some();
            let mut sink = |x: f64, terms: &[f64]| {
                total += x;
                if let Some(a) = attr.as_deref_mut() {
                    a.iter_mut().zip(terms).for_each(|(a, t)| *a += t);
                }
            };
            for g in &mut self.groups {
                g.learn(&point, &[step], &mut s, want_attr, &mut sink);
            }
        }
        if step.insert {
            self.stored += 1;
        }
        self.shingle.push(row, &point);
        self.point = point;
        self.scratch = Some(s);
        Ok(if step.score {
            self.finish(total, attr)
        } else {
            0.0
        })
    }

    /// Bytes allocated on the heap (by capacity) for the forest's state.
    pub fn heap_bytes(&self) -> usize {
        let mut bytes = self.groups.capacity() * std::mem::size_of::<Group>();
        for g in &self.groups {
            bytes += g.store.heap_bytes() + g.trees.capacity() * std::mem::size_of::<Tree>();
            bytes += g.trees.iter().map(Tree::heap_bytes).sum::<usize>();
        }
        bytes
            + self.shingle.heap_bytes()
            + self.point.capacity() * 4
            + 64 * 2
            + self.config.dimensions() * 32
    }

    /// Distinct points held in the point stores.
    pub fn stored_points(&self) -> usize {
        self.groups.iter().map(|g| g.store.live_points()).sum()
    }

    /// Serialises the complete state (JSON).
    pub fn to_json(&self) -> Result<String, RcfError> {
        Ok(serde_json::to_string(self)?)
    }

    /// Restores a forest saved by `to_json`, checking its version and its
    /// internal consistency.
    pub fn from_json(json: &str) -> Result<Self, RcfError> {
        check_json_version(json)?;
        // Through the unchecked form, so that a corrupt snapshot is a
        // `CorruptSnapshot` here rather than a JSON error.
        let repr: ForestRepr = serde_json::from_str(json)?;
        Forest::try_from(repr)
    }

    #[cfg(test)]
    pub(crate) fn groups_for_tests(&self) -> Vec<(&PointStore, &[Tree])> {
        self.groups
            .iter()
            .map(|g| (&g.store, g.trees.as_slice()))
            .collect()
    }

    #[cfg(test)]
    pub(crate) fn shingle_for_tests(&self) -> &Shingler {
        &self.shingle
    }

    pub(crate) fn check_consistency(&self) -> Result<(), RcfError> {
        let trees: usize = self.groups.iter().map(|g| g.trees.len()).sum();
        if trees != self.config.trees {
            return Err(RcfError::CorruptSnapshot {
                reason: "tree count differs from config",
            });
        }
        if !self
            .shingle
            .is_consistent(self.config.input_dimensions, self.config.shingle_size)
        {
            return Err(RcfError::CorruptSnapshot {
                reason: "shingle shape differs from config",
            });
        }
        if self.config.sample_size > super::MAX_SAMPLE_SIZE {
            return Err(RcfError::CorruptSnapshot {
                reason: "sample size out of range",
            });
        }
        for g in &self.groups {
            // The store's points are the trees' points (a store of another
            // width broke the first insert after restore).
            if g.store.dims() != self.config.dimensions()
                || g.store.step() != self.config.input_dimensions
            {
                return Err(RcfError::CorruptSnapshot {
                    reason: "point store shape differs from config",
                });
            }
            let mut refs = vec![0u32; g.store.slot_count()];
            for t in &g.trees {
                // Every tree's node arena has the sample size (the lockstep
                // descent relies on it) and its points the forest's dimensions.
                if t.nodes.len() != self.config.sample_size || t.dims != self.config.dimensions() {
                    return Err(RcfError::CorruptSnapshot {
                        reason: "a tree's node arena or dimensions differ from the config",
                    });
                }
                if !t
                    .sampler
                    .is_consistent(self.config.sample_size, self.stored)
                    || !t.check_structure(&g.store)
                {
                    return Err(RcfError::CorruptSnapshot {
                        reason: "tree structure is invalid",
                    });
                }
                if !t.count_refs(&g.store, &mut refs) {
                    return Err(RcfError::CorruptSnapshot {
                        reason: "a leaf names no stored point",
                    });
                }
            }
            if !g.store.check_refs(&refs) {
                return Err(RcfError::CorruptSnapshot {
                    reason: "point reference counts differ",
                });
            }
        }
        Ok(())
    }
}
