//! The detectors compared on the stream corpus, all on the same forest (50
//! trees, 256 points, shingle 4 for one metric, one seed):
//!
//! - `raw_minmax`: the raw forest score, min-max scaled per stream with
//!   hindsight (the stream's own minimum and maximum after probation);
//! - `quantile_grade`: the earlier per-stream quantile calibration
//!   (`models::calibration::Thresholder`, its defaults) on the raw scores;
//! - `grade`: the thresholded grader (`models::rcf::ThresholdedForest`).
//!
//! Rows of several metrics (a stream with its companions, see
//! [`super::companions`]) go to forests of single rows instead, as
//! `forewarn score` feeds several metrics.
//!
//! Part of the stream benchmark (`streams/`). The grader's forest sees
//! normalised inputs (each value and, by default, its change), so its
//! scores are kept too: grader settings are tuned on them without running
//! the forest again ([`regrade`]).

use models::calibration::{Thresholder, ThresholderConfig};
use models::grading::{Episode, GraderConfig, ScoreStats};
use models::rcf::{Forest, RcfError, ThresholdedForest};

/// Forest seed of every detector.
const SEED: u64 = 17;
/// Points a tree keeps; scores count once the samplers are full.
const SAMPLE: usize = 256;

/// A forest over rows of `metrics` values fed as `dims` inputs: shingles
/// of 4 rows for one metric, single rows for several (`forewarn score`'s
/// rule).
fn forest(metrics: usize, dims: usize) -> Result<Forest, RcfError> {
    Forest::builder()
        .trees(50)
        .sample_size(SAMPLE)
        .shingle_size(if metrics == 1 { 4 } else { 1 })
        .input_dimensions(dims)
        .threads(1)
        .seed(SEED)
        .build()
}

/// Every detector's output on one stream, one value per row.
#[derive(Debug, Clone)]
pub struct Outputs {
    pub raw_minmax: Vec<f64>,
    pub quantile_grade: Vec<f64>,
    pub grade: Vec<f64>,
    /// Forest scores of the normalised rows (0 while the forest fills).
    pub normalised_scores: Vec<f64>,
}

/// Names of the detectors in [`Outputs`], in report order.
pub const DETECTORS: [&str; 3] = ["raw_minmax", "quantile_grade", "grade"];

impl Outputs {
    pub fn get(&self, name: &str) -> &[f64] {
        match name {
            "raw_minmax" => &self.raw_minmax,
            "quantile_grade" => &self.quantile_grade,
            _ => &self.grade,
        }
    }
}

/// Runs every detector over `values`, one metric; `probation` rows are
/// left out of the min-max scaling.
pub fn run(values: &[f64], probation: usize, grading: &GraderConfig) -> Result<Outputs, RcfError> {
    run_rows(values, 1, probation, grading)
}

/// Runs every detector over rows of `metrics` values (`values` row after
/// row); `probation` rows are left out of the min-max scaling.
pub fn run_rows(
    values: &[f64],
    metrics: usize,
    probation: usize,
    grading: &GraderConfig,
) -> Result<Outputs, RcfError> {
    let metrics = metrics.max(1);
    let mut raw_forest = forest(metrics, metrics)?;
    let mut quantile = Thresholder::new(ThresholderConfig::default())?;
    let mut graded = ThresholdedForest::new(
        forest(metrics, grading.forest_dimensions(metrics))?,
        grading.clone(),
    )?;
    let n = values.len() / metrics;
    let mut raw = Vec::with_capacity(n);
    let mut quantile_grade = Vec::with_capacity(n);
    let mut grade = Vec::with_capacity(n);
    let mut normalised_scores = Vec::with_capacity(n);
    for row in values.chunks_exact(metrics) {
        let s = raw_forest.score_and_update(row)?;
        let mature = raw_forest.points_seen() > SAMPLE as u64 && s > 0.0;
        raw.push(if mature { s } else { 0.0 });
        quantile_grade.push(if mature {
            quantile.process(s).grade
        } else {
            0.0
        });
        let verdict = graded.process(row)?;
        grade.push(verdict.grade);
        let mature = graded.forest().points_seen() > SAMPLE as u64;
        normalised_scores.push(if mature { verdict.score } else { 0.0 });
    }
    let seen = raw.iter().skip(probation).filter(|s| **s > 0.0);
    let (lo, hi) = seen.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &s| {
        (lo.min(s), hi.max(s))
    });
    let span = hi - lo;
    let raw_minmax = raw
        .iter()
        .map(|&s| {
            if s > 0.0 && span > 0.0 {
                ((s - lo) / span).clamp(0.0, 1.0)
            } else {
                0.0
            }
        })
        .collect();
    Ok(Outputs {
        raw_minmax,
        quantile_grade,
        grade,
        normalised_scores,
    })
}

/// The grades `config` gives the forest scores `scores` (0 while the forest
/// fills), as `ThresholdedForest` would with that config but without its
/// memory of recurring events (which needs the forest's inputs, not kept
/// here): `streams --search` tunes the other settings.
pub fn regrade(scores: &[f64], config: &GraderConfig) -> Vec<f64> {
    let mut stats = ScoreStats::default();
    let mut episode = Episode::default();
    scores
        .iter()
        .map(|&s| {
            if s <= 0.0 {
                return 0.0;
            }
            let g = models::grading::grade(s, &stats, &mut episode, config);
            stats.learn(s, config);
            g.grade
        })
        .collect()
}
