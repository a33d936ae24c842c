//! Forest plus calibration: the per-stream anomaly detector the models stage
//! runs. One call per row gives the raw score, a calibrated grade and flag, and
//! the attribution behind them; the whole state snapshots to JSON and a restored
//! detector continues exactly where the saved one stopped.

use serde::{Deserialize, Serialize};

use super::{DiVector, Direction, Forest, RcfError};
use crate::calibration::{Thresholder, ThresholderConfig};

/// Everything known about one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Raw forest score (about 1 for ordinary points, 0 during warm-up).
    pub score: f64,
    /// Calibrated grade in [0, 1]; 0 unless flagged.
    pub grade: f64,
    pub is_anomaly: bool,
    /// Threshold the score was compared with (0 during warm-up).
    pub threshold: f64,
    /// Per-metric (shingle lags folded) attribution; sums to `score`.
    pub attribution: DiVector,
}

/// The main reason behind a score: which metric, which way, what share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// Index of the input metric.
    pub metric: usize,
    pub direction: Direction,
    /// Fraction of the score this metric and direction explain.
    pub share: f64,
}

impl Verdict {
    pub fn explanation(&self) -> Option<Explanation> {
        let (metric, direction, part) = self.attribution.top()?;
        let total = self.attribution.total();
        Some(Explanation {
            metric,
            direction,
            share: if total > 0.0 { part / total } else { 0.0 },
        })
    }
}

/// A [`Forest`] with a [`Thresholder`] on its scores.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThresholdedForest {
    forest: Forest,
    thresholder: Thresholder,
}

impl ThresholdedForest {
    pub fn new(forest: Forest, calibration: ThresholderConfig) -> Result<Self, RcfError> {
        Ok(Self {
            forest,
            thresholder: Thresholder::new(calibration)?,
        })
    }

    pub fn forest(&self) -> &Forest {
        &self.forest
    }

    pub fn thresholder(&self) -> &Thresholder {
        &self.thresholder
    }

    /// Scores, grades and explains `row`, then learns from it.
    pub fn process(&mut self, row: &[f64]) -> Result<Verdict, RcfError> {
        let attribution = self.forest.attribute_and_update(row)?;
        let seen = self.forest.points_seen();
        Ok(self.verdict(attribution, seen))
    }

    /// `process` for each row in order (identical verdicts), with the
    /// forest's tree groups on its `threads` threads.
    pub fn process_batch<R: AsRef<[f64]>>(&mut self, rows: &[R]) -> Result<Vec<Verdict>, RcfError> {
        let rows = self.forest.attribute_and_update_batch(rows)?;
        Ok(rows
            .into_iter()
            .map(|(attribution, seen)| self.verdict(attribution, seen))
            .collect())
    }

    /// Grades a row's attribution; `seen` is the forest's `points_seen`
    /// right after the row.
    fn verdict(&mut self, attribution: DiVector, seen: u64) -> Verdict {
        let score = attribution.total();
        let attribution = attribution.per_metric(self.forest.config().input_dimensions);
        // Scores run high while the samplers are still filling; calibrating on
        // them would set the threshold too high for the rest of the window.
        let mature = seen > self.forest.config().sample_size as u64;
        let grade = if mature && score > 0.0 {
            self.thresholder.process(score)
        } else {
            crate::calibration::Grade {
                grade: 0.0,
                is_anomaly: false,
                threshold: 0.0,
            }
        };
        Verdict {
            score,
            grade: grade.grade,
            is_anomaly: grade.is_anomaly,
            threshold: grade.threshold,
            attribution,
        }
    }

    pub fn heap_bytes(&self) -> usize {
        self.forest.heap_bytes() + self.thresholder.heap_bytes()
    }

    /// Serialises forest and thresholder (JSON).
    pub fn to_json(&self) -> Result<String, RcfError> {
        Ok(serde_json::to_string(self)?)
    }

    /// Restores a detector saved by `to_json`, checking its consistency.
    pub fn from_json(json: &str) -> Result<Self, RcfError> {
        super::snapshot::check_nested_json_version(json)?;
        let d: ThresholdedForest = serde_json::from_str(json)?;
        d.forest.check_consistency()?;
        if !d.thresholder.is_consistent() {
            return Err(RcfError::CorruptSnapshot {
                reason: "thresholder window is inconsistent",
            });
        }
        Ok(d)
    }
}

/// Name of a direction as used in explanations: `cpu_high`.
pub fn reason_label(metric_name: &str, direction: Direction) -> String {
    format!("{metric_name}_{}", direction.as_str())
}
