//! The second booster candidate: `forust-ml` (pure Rust, histogram-based,
//! classic knobs: rounds, learning rate, depth, bins, row subsampling).
//! Trained on the same weighted rows as `perpetual`, flattened into the
//! same [`Gbdt`] arrays, so the artifact and the hot path do not depend on
//! which booster trained them (see `docs/decisions/0001-gradient-boosting.md`).

use forust_ml::gradientbooster::GradientBooster;
use forust_ml::objective::ObjectiveType;
use forust_ml::sampler::SampleMethod;

use super::FailureModelError;
use super::gbdt::{Columns, Gbdt, GbdtParams, Node};

fn err(e: impl std::fmt::Display) -> FailureModelError {
    FailureModelError::Training(format!("forust-ml: {e}"))
}

/// Fits a forust booster (LogLoss) on column-major data.
pub(crate) fn fit_booster(
    d: &Columns,
    width: usize,
    p: &GbdtParams,
) -> Result<GradientBooster, FailureModelError> {
    let m = forust_ml::Matrix::new(&d.cols, d.n, width);
    let mut b = GradientBooster::default()
        .set_objective_type(ObjectiveType::LogLoss)
        .set_iterations(p.rounds)
        .set_learning_rate(p.learning_rate)
        .set_max_depth(p.max_depth)
        .set_nbins(p.max_bin)
        .set_min_leaf_weight(p.min_leaf_weight)
        .set_l2(1.0)
        .set_seed(p.seed)
        .set_num_threads(p.threads)
        .set_allow_missing_splits(true)
        .set_create_missing_branch(false);
    if p.subsample < 1.0 {
        b = b
            .set_subsample(p.subsample)
            .set_sample_method(SampleMethod::Random);
    }
    b.fit(&m, &d.y, &d.w, None).map_err(err)?;
    Ok(b)
}

/// Flattens a trained forust booster.
pub fn flatten(b: &GradientBooster) -> Result<Gbdt, FailureModelError> {
    // The trees forust predicts with (all of them unless early stopping
    // chose fewer).
    let n = b
        .prediction_iteration
        .unwrap_or(b.trees.len())
        .min(b.trees.len());
    let mut trees = Vec::with_capacity(n);
    for t in &b.trees[..n] {
        // Nodes are stored by number; children may come in any order.
        let mut nodes = Vec::with_capacity(t.nodes.len());
        for (i, n) in t.nodes.iter().enumerate() {
            if n.num != i {
                return Err(err(format!("node {} stored at {i}", n.num)));
            }
            nodes.push(if n.is_leaf {
                Node::leaf(n.weight_value)
            } else {
                Node::split(
                    n.split_feature as u32,
                    n.split_value,
                    [
                        n.left_child as u32,
                        n.right_child as u32,
                        n.missing_node as u32,
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
