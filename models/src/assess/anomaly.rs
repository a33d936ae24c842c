//! The anomaly component: one streaming random cut forest per shard over the
//! workload-aware columns (residuals against expected-at-this-load, peer
//! z-scores, error rates), graded by the thresholded grader (`crate::grading`)
//! with an event per GPU. Fleet-wide rather
//! than per GPU: a 50-tree forest takes ~600–800 KB, far over a GPU's memory
//! budget, and "unlike the fleet at the same load" is the question asked.
//!
//! Each GPU is scored every [`SCORE_EVERY`]-th sample (its grade is carried
//! in between) and one scored row in [`UPDATE_EVERY`] is learnt: a forest
//! walk costs ~25 µs, so this keeps the model near 3 µs per sample, and a
//! degrading GPU teaches the forest that it is normal more slowly.

use std::collections::HashMap;

use crate::grading::{Episode, GraderConfig};
use crate::rcf::{Direction, Forest, RcfError, ThresholdedForest, ThresholdedRepr};
use features::{Col, FeatureRow, GpuId};
use serde::{Deserialize, Serialize};

use super::Evidence;
use super::anomaly_repeat::Repeats;

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

/// What the forest says about one GPU's row.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnomalyRead {
    /// The open event's peak grade (0 when none).
    pub grade: f32,
    /// The metric and direction that drove the score most.
    pub why: Option<Evidence>,
    /// The GPU reports why it runs slow ([`explained_by_clock_event`]), or
    /// it only runs cool ([`harmless_cool`]): the grade stays (exports,
    /// the failure model) but raises no alert.
    pub explained: bool,
    /// The event repeats one this GPU already raised
    /// ([`super::anomaly_repeat`]): the grade stays, no new alert.
    #[serde(default)]
    pub repeat: bool,
}

/// Whether a row's anomaly, driven most by `col` in `dir`, is one the
/// GPU explains itself: SM clocks *low* while the driver reports a power
/// cap or a thermal slowdown as the clock-event reason (DCGM's
/// `DCGM_FI_DEV_CLOCK_EVENT_REASONS`). A GPU at its power limit, or
/// slowing down on heat, clocks below its peers by design; the heat is the
/// thermal rules' to judge. At the nine seen full random-precursor seeds
/// such clock dips were 25 of the 28 `anomaly` false warnings (healthy
/// GPUs running hot or less efficient than their peers) and none of the
/// alerts that came first on a failing GPU. A hardware slowdown (an
/// external or protective signal) explains nothing: it stays anomalous.
pub fn explained_by_clock_event(row: &FeatureRow, col: Col, dir: Direction) -> bool {
    matches!(col, Col::SmClockResid | Col::SmClockPeerZ)
        && dir == Direction::Low
        && (row.get(Col::ThrottlePower) >= 1.0 || row.get(Col::ThrottleThermal) >= 1.0)
}

/// A GPU cooler than its own model or its peers at the same power is not
/// on its way to a heat failure: such an event keeps its grade (exports,
/// the failure model) but raises no alert. Seen once whole hosts share a
/// shard (`detector::pipeline::placement`): most of the extra quiet-fleet
/// warnings were `gpu_temp_resid_ewma low` on healthy GPUs.
pub fn harmless_cool(col: Col, dir: Direction) -> bool {
    matches!(
        col,
        Col::GpuTempResidEwma | Col::MemoryTempResid | Col::GpuTempPeerZ
    ) && dir == Direction::Low
}

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

/// A shard's anomaly model: one forest, score statistics shared by the
/// shard's GPUs, and an event per GPU (hysteresis and repeats are a GPU's
/// own, not its neighbours').
#[derive(Debug, Serialize, Deserialize)]
#[serde(try_from = "AnomalyRepr")]
pub struct AnomalyModel {
    model: ThresholdedForest,
    seen: u64,
    /// GPUs with an open anomaly event (closed ones are dropped).
    episodes: HashMap<GpuId, Episode>,
    /// Each GPU's last anomaly event, for repeats.
    #[serde(default)]
    repeats: Repeats,
}

/// A checkpointed model as decoded. Checkpoints written before the
/// thresholded grader hold a forest that learnt unnormalised rows: that model
/// restarts cold (same seed) while the rest of the shard's state is kept.
/// The grader's thresholds are the running build's (`grader_config`), not
/// the checkpoint's.
#[derive(Deserialize)]
struct AnomalyRepr {
    model: ThresholdedRepr,
    seen: u64,
    #[serde(default)]
    episodes: HashMap<GpuId, Episode>,
    #[serde(default)]
    repeats: Repeats,
}

impl TryFrom<AnomalyRepr> for AnomalyModel {
    type Error = RcfError;

    fn try_from(r: AnomalyRepr) -> Result<Self, RcfError> {
        let seed = r.model.forest.config().seed;
        if !r.model.is_current() {
            return AnomalyModel::new(seed);
        }
        let mut model = ThresholdedForest::try_from(r.model)?;
        // The thresholds are the running build's, not the checkpoint's;
        // a forest that learnt other inputs than this build feeds it
        // restarts cold, as one from before the grader does.
        if model.regrade(grader_config()).is_err() {
            return AnomalyModel::new(seed);
        }
        Ok(AnomalyModel {
            model,
            seen: r.seen,
            episodes: r.episodes,
            repeats: r.repeats,
        })
    }
}

/// The pipeline's grader: stricter than the defaults (which were tuned on
/// single streams): a shard's forest scores many GPUs, and an anomaly
/// warning needs its grade held for the alert's `for`, so an event opens at
/// 5 deviations, holds while the standing stays at 4 and reaches grade 1 at
/// 15; a longer warm-up, and no event below a forest score of 1.5. Its
/// inputs are features already (rates, residuals against load and peers),
/// so the forest takes no differences; its events are per GPU (episodes
/// of `process_for`), so no memory of recurrences either (one forest's
/// memory would mix GPUs).
pub fn grader_config() -> GraderConfig {
    GraderConfig {
        warmup: 1024,
        lower: 5.0,
        upper: 15.0,
        release: 4.0,
        min_score: 1.5,
        differences: false,
        recurrence: 0.0,
        known_horizon: 0,
        stuck_run: 0,
        ..GraderConfig::default()
    }
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
        Ok(AnomalyModel {
            model: ThresholdedForest::new(forest, grader_config())?,
            seen: 0,
            episodes: HashMap::new(),
            repeats: Repeats::default(),
        })
    }

    /// Forgets `gpu`'s open event (eviction).
    pub fn forget(&mut self, gpu: &str) {
        self.episodes.remove(gpu);
        self.repeats.forget(gpu);
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

    /// The grade of `row`'s GPU: its open event's peak grade, held while
    /// the event lasts (0 when none), with the top reason and whether the
    /// GPU's own clock-event report explains it ([`explained_by_clock_event`]).
    pub fn assess(&mut self, row: &FeatureRow) -> Result<AnomalyRead, RcfError> {
        let x = Self::input(row);
        self.seen += 1;
        let mut episode = self.episodes.get(&row.gpu).copied().unwrap_or_default();
        let verdict = if self.seen.is_multiple_of(UPDATE_EVERY) {
            self.model.process_for(&x, &mut episode)?
        } else {
            // Scoring alone: statistics and forest come from the learnt rows.
            self.model.assess_for(&x, &mut episode)?
        };
        if episode.is_open() {
            self.episodes.insert(row.gpu.clone(), episode);
        } else {
            self.episodes.remove(&row.gpu);
        }
        if !verdict.in_event {
            self.repeats.observe(&row.gpu, row.ts_ms, None);
            return Ok(AnomalyRead::default());
        }
        let top = verdict.explanation().map(|e| {
            (
                COLUMNS.get(e.metric).copied().unwrap_or(Col::GpuTempPeerZ),
                e,
            )
        });
        let driver = top
            .as_ref()
            .map(|(_, e)| (e.metric, e.direction == Direction::High, verdict.score));
        let repeat = self.repeats.observe(&row.gpu, row.ts_ms, driver);
        let explained = top.as_ref().is_some_and(|(col, e)| {
            explained_by_clock_event(row, *col, e.direction) || harmless_cool(*col, e.direction)
        });
        let why = top.map(|(col, e)| Evidence {
            signal: col.name().to_string(),
            detail: format!(
                "{} {} ({:.0}% of anomaly score {:.2})",
                col.name(),
                e.direction.as_str(),
                e.share * 100.0,
                verdict.score
            ),
        });
        Ok(AnomalyRead {
            grade: verdict.event_grade as f32,
            why,
            explained,
            repeat,
        })
    }

    pub fn heap_bytes(&self) -> usize {
        self.model.heap_bytes() + (self.episodes.len() + self.repeats.len()) * 64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Low clocks under a reported power cap or thermal slowdown are
    /// explained; high clocks, other metrics, a hardware slowdown or no
    /// reported reason are not.
    #[test]
    fn only_a_clock_dip_with_a_reported_power_or_heat_reason_is_explained() {
        let mut row = FeatureRow {
            ts_ms: 0,
            gpu: "GPU-a".into(),
            topo: Default::default(),
            phase: features::Phase::Training,
            values: [0.0; features::FEATURE_COUNT],
        };
        use Direction::{High, Low};
        // (power cap, thermal slowdown, hardware slowdown), metric, direction.
        let cases = [
            ((0.0, 0.0, 0.0), Col::SmClockPeerZ, Low, false),
            ((1.0, 0.0, 0.0), Col::SmClockPeerZ, Low, true),
            ((1.0, 0.0, 0.0), Col::SmClockResid, Low, true),
            ((1.0, 0.0, 0.0), Col::SmClockPeerZ, High, false),
            ((1.0, 0.0, 0.0), Col::GpuTempPeerZ, High, false),
            ((1.0, 0.0, 0.0), Col::PowerResid, Low, false),
            ((0.0, 0.0, 1.0), Col::SmClockResid, Low, false),
            ((0.0, 1.0, 1.0), Col::SmClockResid, Low, true),
        ];
        for ((power, heat, hw), col, dir, want) in cases {
            row.values[Col::ThrottlePower as usize] = power;
            row.values[Col::ThrottleThermal as usize] = heat;
            row.values[Col::ThrottleHwSlowdown as usize] = hw;
            assert_eq!(
                explained_by_clock_event(&row, col, dir),
                want,
                "{col:?} {dir:?} at {power}/{heat}/{hw}"
            );
        }
    }

    #[test]
    fn only_a_cool_temperature_is_harmless() {
        use Direction::{High, Low};
        assert!(harmless_cool(Col::GpuTempResidEwma, Low));
        assert!(harmless_cool(Col::GpuTempPeerZ, Low));
        assert!(harmless_cool(Col::MemoryTempResid, Low));
        assert!(!harmless_cool(Col::GpuTempResidEwma, High));
        assert!(!harmless_cool(Col::PowerResid, Low));
        assert!(!harmless_cool(Col::SmClockPeerZ, Low));
    }

    /// A checkpoint from before the grader (`model` = forest + quantile
    /// `thresholder`) restores with a cold model of the same seed; the
    /// current layout round-trips exactly.
    #[test]
    fn checkpoints_of_the_quantile_calibration_restore_cold() {
        let fresh = AnomalyModel::new(9).expect("valid");
        let forest: serde_json::Value =
            serde_json::from_str(&fresh.model.forest().to_json().expect("json")).expect("parse");
        let legacy = serde_json::json!({
            "model": { "forest": forest, "thresholder": { "recent": [1.0] } },
            "seen": 12,
        });
        let restored: AnomalyModel = serde_json::from_value(legacy).expect("legacy restores");
        assert_eq!(restored.seen, 0);
        assert_eq!(restored.model.forest().config().seed, 9);
        let again: AnomalyModel =
            serde_json::from_str(&serde_json::to_string(&restored).expect("json"))
                .expect("restores");
        assert_eq!(
            serde_json::to_string(&again).expect("json"),
            serde_json::to_string(&restored).expect("json")
        );
    }

    /// A checkpoint written with other grader thresholds (an older build's)
    /// grades by this build's from the restore on, keeping what it
    /// learnt; one whose forest learnt other inputs restarts cold.
    #[test]
    fn a_restored_model_grades_with_this_builds_thresholds() {
        let mut m = AnomalyModel::new(9).expect("valid");
        let row = FeatureRow {
            ts_ms: 0,
            gpu: "GPU-a".into(),
            topo: Default::default(),
            phase: features::Phase::Training,
            values: [0.0; features::FEATURE_COUNT],
        };
        for _ in 0..64 {
            m.assess(&row).expect("assess");
        }
        let mut json = serde_json::to_value(&m).expect("json");
        let config = &mut json["model"]["grader"]["config"];
        assert_eq!(config["lower"], serde_json::json!(5.0), "the layout moved");
        config["lower"] = serde_json::json!(3.0);
        config["release"] = serde_json::json!(1.5);
        let restored: AnomalyModel = serde_json::from_value(json.clone()).expect("restores");
        assert_eq!(*restored.model.grader().config(), grader_config());
        assert_eq!(restored.seen, 64, "its state is kept");
        json["model"]["grader"]["config"]["normalize_inputs"] = serde_json::json!(false);
        let cold: AnomalyModel = serde_json::from_value(json).expect("restores cold");
        assert_eq!(cold.seen, 0);
        assert_eq!(*cold.model.grader().config(), grader_config());
    }
}
