//! The anomaly component: one streaming random cut forest per shard over the
//! workload-aware columns (residuals against expected-at-this-load, peer
//! z-scores, error rates), with a calibrated thresholder. Fleet-wide rather
//! than per GPU: a 50-tree forest takes ~600–800 KB, far over a GPU's memory
//! budget, and "unlike the fleet at the same load" is the question asked.
//!
//! Each GPU is scored every [`SCORE_EVERY`]-th sample (its grade is carried
//! in between) and one scored row in [`UPDATE_EVERY`] is learnt: a forest
//! walk costs ~25 µs, so this keeps the model near 3 µs per sample, and a
//! degrading GPU teaches the forest that it is normal more slowly.

use crate::calibration::ThresholderConfig;
use crate::rcf::{Forest, RcfError, ThresholdedForest};
use features::{Col, FeatureRow};
use serde::{Deserialize, Serialize};

use super::Evidence;

/// The forest's input columns, in order.
pub const COLUMNS: [Col; 8] = [
    Col::GpuTempResidEwma,
    Col::MemoryTempResid,
    Col::SmClockResid,
    Col::PowerResid,
    Col::GpuTempPeerZ,
    Col::SmClockPeerZ,
    Col::PowerPeerZ,
    Col::EccSbeRate,
];

/// Scored rows per row learnt.
pub const UPDATE_EVERY: u64 = 4;
/// A GPU's samples per score: 4 × 30 s = a fresh grade every 2 minutes.
pub const SCORE_EVERY: u32 = 4;

/// Cache the bounding box of every tree node with at least this many leaves
/// (the forest's default is sized for the ≤ 600 KB of a standalone forest).
/// There are only one or two forests per shard, so the pipeline spends
/// ~200 KB more each to take most leaf scans out of the climbs: scores are
/// bit-identical (a box is the same whether cached or recomputed) and a
/// forest walk cheaper (BENCHMARKS.md, issue 7).
pub const BOX_CACHE_MIN_MASS: usize = 6;

/// A shard's anomaly model.
#[derive(Debug, Serialize, Deserialize)]
pub struct AnomalyModel {
    model: ThresholdedForest,
    seen: u64,
}

impl AnomalyModel {
    /// 50 trees × 256 samples (the paper's and AWS's defaults), warm-up of
    /// 512 rows, seeded.
    pub fn new(seed: u64) -> Result<Self, RcfError> {
        let forest: Forest = Forest::builder()
            .trees(50)
            .sample_size(256)
            .input_dimensions(COLUMNS.len())
            .shingle_size(1)
            .output_after(512)
            .box_cache_min_mass(BOX_CACHE_MIN_MASS)
            .seed(seed)
            .build()?;
        let cal = ThresholderConfig {
            false_positive_rate: 0.001,
            window: 4096,
            warmup: 1024,
            min_score: 1.5,
        };
        Ok(AnomalyModel {
            model: ThresholdedForest::new(forest, cal)?,
            seen: 0,
        })
    }

    fn input(row: &FeatureRow) -> [f64; COLUMNS.len()] {
        let mut x = [0.0; COLUMNS.len()];
        for (xi, c) in x.iter_mut().zip(COLUMNS) {
            let v = f64::from(row.get(c));
            // Missing → 0 (the column's healthy centre: residuals and
            // z-scores are centred); rates on a log scale.
            *xi = if !v.is_finite() {
                0.0
            } else if c == Col::EccSbeRate {
                v.max(0.0).ln_1p()
            } else {
                v.clamp(-50.0, 50.0)
            };
        }
        x
    }

    /// The calibrated grade of `row` (0 when ordinary), with the top reason
    /// when it is anomalous.
    pub fn assess(&mut self, row: &FeatureRow) -> Result<(f32, Option<Evidence>), RcfError> {
        let x = Self::input(row);
        self.seen += 1;
        if !self.seen.is_multiple_of(UPDATE_EVERY) {
            // Scoring alone: the grade comes from the last learnt rows.
            let score = self.model.forest().score(&x)?;
            let threshold = self
                .model
                .thresholder()
                .threshold()
                .unwrap_or(f64::INFINITY);
            if score <= threshold {
                return Ok((0.0, None));
            }
        }
        let verdict = self.model.process(&x)?;
        if !verdict.is_anomaly {
            return Ok((0.0, None));
        }
        let why = verdict.explanation().map(|e| {
            let col = COLUMNS.get(e.metric).copied().unwrap_or(Col::GpuTempPeerZ);
            Evidence {
                signal: col.name().to_string(),
                detail: format!(
                    "{} {} ({:.0}% of anomaly score {:.2})",
                    col.name(),
                    e.direction.as_str(),
                    e.share * 100.0,
                    verdict.score
                ),
            }
        });
        Ok((verdict.grade as f32, why))
    }

    pub fn heap_bytes(&self) -> usize {
        self.model.heap_bytes()
    }
}
