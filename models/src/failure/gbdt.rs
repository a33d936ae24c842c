//! The gradient-boosted classifier: trained with `forust-ml` or `perpetual`
//! (both pure Rust; see `docs/decisions/0001-gradient-boosting.md`), then
//! flattened into our own array-of-nodes trees, which are what the artifact
//! stores and the pipeline runs: no hash lookups on the hot path, and an
//! artifact format that does not change when the training crate does.

use std::collections::HashMap;

use perpetual::booster::config::MissingNodeTreatment;
use perpetual::objective::Objective;
use perpetual::{Matrix, PerpetualBooster};
use serde::{Deserialize, Serialize};

use super::common::FailureModelError;

/// One node: a split (`feature` < `threshold` → `left`, else `right`,
/// missing → `missing`) or a leaf (`feature` = `LEAF`, `value`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub feature: u32,
    pub threshold: f64,
    pub left: u32,
    pub right: u32,
    pub missing: u32,
    pub value: f32,
}

pub(crate) const LEAF: u32 = u32::MAX;

impl Node {
    /// A leaf of value `value`.
    pub(crate) fn leaf(value: f32) -> Node {
        Node {
            feature: LEAF,
            threshold: 0.0,
            left: 0,
            right: 0,
            missing: 0,
            value,
        }
    }

    /// A split on `feature` at `threshold`; children `[left, right, missing]`.
    pub(crate) fn split(feature: u32, threshold: f64, children: [u32; 3]) -> Node {
        let [left, right, missing] = children;
        Node {
            feature,
            threshold,
            left,
            right,
            missing,
            value: 0.0,
        }
    }
}

/// A flattened ensemble; the raw output is a logit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gbdt {
    pub base: f64,
    pub trees: Vec<Vec<Node>>,
}

/// Which crate trains the trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Booster {
    /// `forust-ml`: fixed rounds, learning rate and depth.
    Forust,
    /// `perpetual`: one complexity budget, stops by itself.
    Perpetual,
}

impl Booster {
    pub const fn describe(self) -> &'static str {
        match self {
            Booster::Forust => "forust-ml 0.8.0 (LogLoss)",
            Booster::Perpetual => "perpetual 3.0.0-rc.2 (LogLoss)",
        }
    }
}

/// Training parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GbdtParams {
    pub booster: Booster,
    pub seed: u64,
    /// Threads (None: all cores).
    pub threads: Option<usize>,
    /// Histogram bins per feature.
    pub max_bin: u16,
    /// perpetual: complexity budget (higher: more, finer trees).
    pub budget: f32,
    /// perpetual: stop after this many boosting rounds.
    pub iteration_limit: Option<usize>,
    /// forust: boosting rounds.
    pub rounds: usize,
    /// forust: learning rate.
    pub learning_rate: f32,
    /// forust: tree depth.
    pub max_depth: usize,
    /// forust: least hessian weight in a leaf.
    pub min_leaf_weight: f32,
    /// forust: share of rows each tree sees.
    pub subsample: f32,
}

impl Default for GbdtParams {
    fn default() -> Self {
        GbdtParams {
            booster: Booster::Forust,
            seed: 1,
            threads: None,
            max_bin: 64,
            budget: 0.5,
            iteration_limit: Some(200),
            rounds: 300,
            learning_rate: 0.1,
            max_depth: 3,
            min_leaf_weight: 5.0,
            subsample: 0.8,
        }
    }
}

/// Training data as both boosters read it: column-major f64 features,
/// f64 labels and weights.
pub(crate) struct Columns {
    pub cols: Vec<f64>,
    pub n: usize,
    pub y: Vec<f64>,
    pub w: Vec<f64>,
}

impl Columns {
    /// From row-major `x` (`width` columns), labels and weights.
    pub(crate) fn new(x: &[f32], width: usize, y: &[u8], w: &[f32]) -> Columns {
        let n = y.len();
        let mut cols = vec![0f64; n * width];
        for (r, row) in x.chunks_exact(width).enumerate() {
            for (c, v) in row.iter().enumerate() {
                cols[c * n + r] = f64::from(*v);
            }
        }
        Columns {
            cols,
            n,
            y: y.iter().map(|v| f64::from(*v)).collect(),
            w: w.iter().map(|v| f64::from(*v)).collect(),
        }
    }
}

impl Gbdt {
    /// Trains on row-major `x` (`width` columns, NaN = missing), labels and
    /// weights.
    pub fn train(
        x: &[f32],
        width: usize,
        y: &[u8],
        w: &[f32],
        p: &GbdtParams,
    ) -> Result<Gbdt, FailureModelError> {
        match p.booster {
            Booster::Perpetual => Gbdt::from_booster(&fit_booster(x, width, y, w, p)?),
            Booster::Forust => {
                let d = Columns::new(x, width, y, w);
                super::forust::flatten(&super::forust::fit_booster(&d, width, p)?)
            }
        }
    }

    /// Flattens a trained booster.
    pub fn from_booster(b: &PerpetualBooster) -> Result<Gbdt, FailureModelError> {
        if b.regression_head.is_some() {
            return Err(FailureModelError::Training(
                "perpetual fitted a linear head; flattening does not support it".into(),
            ));
        }
        let mut trees = Vec::new();
        for t in b.get_prediction_trees() {
            let mut pos: HashMap<usize, u32> = HashMap::new();
            let mut order = vec![0usize];
            let mut i = 0;
            while i < order.len() {
                let key = order[i];
                pos.insert(key, i as u32);
                let n = t
                    .nodes
                    .get(&key)
                    .ok_or_else(|| FailureModelError::Training(format!("tree lacks node {key}")))?;
                if !n.is_leaf {
                    if n.left_cats.is_some() {
                        return Err(FailureModelError::Training(
                            "categorical splits are not supported".into(),
                        ));
                    }
                    for c in [n.left_child, n.right_child, n.missing_node] {
                        if !pos.contains_key(&c) && !order.contains(&c) {
                            order.push(c);
                        }
                    }
                }
                i += 1;
            }
            let mut nodes = Vec::with_capacity(order.len());
            for key in &order {
                let n = &t.nodes[key];
                nodes.push(if n.is_leaf {
                    Node::leaf(n.weight_value)
                } else {
                    Node::split(
                        n.split_feature as u32,
                        n.split_value,
                        [
                            pos[&n.left_child],
                            pos[&n.right_child],
                            pos[&n.missing_node],
                        ],
                    )
                });
            }
            trees.push(nodes);
        }
        Ok(Gbdt {
            base: b.base_score,
            trees,
        })
    }

    /// The raw logit of one input row.
    #[inline]
    pub fn logit(&self, x: &[f32]) -> f64 {
        let mut s = self.base;
        for t in &self.trees {
            let mut i = 0usize;
            loop {
                let n = &t[i];
                if n.feature == LEAF {
                    s += f64::from(n.value);
                    break;
                }
                let v = x[n.feature as usize];
                i = if v.is_nan() {
                    n.missing
                } else if f64::from(v) < n.threshold {
                    n.left
                } else {
                    n.right
                } as usize;
            }
        }
        s
    }

    /// Checks every split names a column below `width` and every child
    /// index is in range (a loaded artifact is untrusted).
    pub fn validate(&self, width: usize) -> Result<(), String> {
        for (ti, t) in self.trees.iter().enumerate() {
            for n in t {
                if n.feature == LEAF {
                    continue;
                }
                let bad_child = [n.left, n.right, n.missing]
                    .iter()
                    .any(|c| *c as usize >= t.len());
                if n.feature as usize >= width || bad_child {
                    return Err(format!("tree {ti} has an invalid node"));
                }
            }
        }
        Ok(())
    }

    pub fn nodes(&self) -> usize {
        self.trees.iter().map(Vec::len).sum()
    }
}

/// Fits a perpetual booster (LogLoss) on row-major data.
pub fn fit_booster(
    x: &[f32],
    width: usize,
    y: &[u8],
    w: &[f32],
    p: &GbdtParams,
) -> Result<PerpetualBooster, FailureModelError> {
    let d = Columns::new(x, width, y, w);
    let m = Matrix::new(&d.cols, d.n, width);
    let mut b = PerpetualBooster::default()
        .set_objective(Objective::LogLoss)
        .set_budget(p.budget)
        .set_seed(p.seed)
        .set_num_threads(p.threads)
        .set_iteration_limit(p.iteration_limit)
        .set_max_bin(p.max_bin)
        .set_missing_node_treatment(MissingNodeTreatment::AverageNodeWeight)
        .set_log_iterations(0);
    b.fit(&m, &d.y, Some(&d.w), None)
        .map_err(|e| FailureModelError::Training(format!("perpetual: {e}")))?;
    Ok(b)
}
