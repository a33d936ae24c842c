//! The grader's parameters and what they mean: the thresholds on a score's
//! standing, the decays and the warm-up, and the grade a standing earns.
//!
//! Part of the thresholded grader (`grading/`): a leaf that the score
//! statistics and events (`state`) and the grader itself read.

use serde::{Deserialize, Serialize};

use crate::calibration::CalibrationError;

/// Parameters of the grader. Defaults were tuned on the labelled stream
/// corpus of `evaluation` (`cargo run -p evaluation --bin streams`, see
/// docs/performance.md) and hold for every stream: that is the point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraderConfig {
    /// Normalise each input by its running mean and deviation.
    pub normalize_inputs: bool,
    /// Decay of the inputs' running statistics (memory `1 / input_decay` rows).
    pub input_decay: f64,
    /// Decay of the scores' running statistics.
    pub score_decay: f64,
    /// Scores learnt before anything is graded.
    pub warmup: usize,
    /// Standing (deviations above the mean score) that opens an event.
    pub lower: f64,
    /// Standing at which the grade reaches 1.
    pub upper: f64,
    /// Standing below which an open event closes; at most `lower`.
    pub release: f64,
    /// Scores at or below this are never flagged (a forest scores ordinary
    /// points about 1).
    pub min_score: f64,
    /// The deviation is at least this share of the mean score.
    pub min_deviation: f64,
    /// Rise of the standing above an open event's peak that flags again.
    pub repeat_rise: f64,
    /// Beside each input, its change since the row before (normalised on
    /// its own): the forest sees a level and a step per metric, so a jump
    /// on a wandering level or a busy period unlike the others stands out
    /// where the level alone has moved on. Used by `rcf::ThresholdedForest`
    /// (its forest takes [`Self::forest_dimensions`] inputs); snapshots
    /// from before it have none.
    #[serde(default)]
    pub differences: bool,
    /// An event whose opening forest input lies within this mean distance
    /// (normalised units, per coordinate) of one opened in the last
    /// `recurrence_horizon` rows is a normal pattern coming back and is not
    /// flagged (`grading::recurrence`). 0 turns it off; snapshots from
    /// before it have it off.
    #[serde(default)]
    pub recurrence: f64,
    /// Rows an opened event is remembered for `recurrence`.
    #[serde(default)]
    pub recurrence_horizon: u64,
    /// Rows a raw forest input (over the shingle, before normalisation) is
    /// remembered exactly: a row that repeats one seen on a normal row ends
    /// an open event, one that repeats an earlier event's row opens none
    /// (`grading::known`). 0 turns it off; snapshots from before it have it
    /// off.
    #[serde(default)]
    pub known_horizon: u64,
    /// A metric repeating its last value for at least this many rows, and
    /// for `stuck_factor` times its longest earlier run, is stuck: an event
    /// at grade 1 (`grading::stuck`; judged once the metric has ended
    /// `grading::MIN_ENDED_RUNS` runs). 0 turns it off; snapshots from
    /// before it have it off.
    #[serde(default)]
    pub stuck_run: u32,
    /// How many times its longest earlier run a metric must repeat a value
    /// to be stuck (at least 1).
    #[serde(default)]
    pub stuck_factor: f64,
}

/// The longest memory of raw inputs: on a stream that never repeats a row,
/// the known states hold up to twice this many entries (~50 bytes each).
pub const MAX_KNOWN_HORIZON: u64 = 100_000;

impl Default for GraderConfig {
    fn default() -> Self {
        Self {
            normalize_inputs: true,
            input_decay: 1.0 / 1024.0,
            score_decay: 1.0 / 1024.0,
            warmup: 128,
            lower: 2.5,
            upper: 9.0,
            release: 2.0,
            min_score: 1.0,
            min_deviation: 0.0,
            repeat_rise: 4.0,
            differences: true,
            recurrence: 0.25,
            recurrence_horizon: 3_000,
            known_horizon: 3_000,
            stuck_run: 8,
            stuck_factor: 2.0,
        }
    }
}

impl GraderConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), CalibrationError> {
        let bad = |field, reason, value: f64| {
            Err(CalibrationError::InvalidParameter {
                field,
                reason,
                value: value.to_string(),
            })
        };
        for (field, v) in [
            ("input_decay", self.input_decay),
            ("score_decay", self.score_decay),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return bad(field, "must be in (0, 1]", v);
            }
        }
        if !(self.lower.is_finite() && self.lower > 0.0) {
            return bad("lower", "must be finite and positive", self.lower);
        }
        if !(self.upper.is_finite() && self.upper > self.lower) {
            return bad("upper", "must be finite and above lower", self.upper);
        }
        if !(self.release.is_finite() && self.release <= self.lower) {
            return bad("release", "must be finite and at most lower", self.release);
        }
        if !self.min_score.is_finite() {
            return bad("min_score", "must be finite", self.min_score);
        }
        if !(self.min_deviation.is_finite() && self.min_deviation >= 0.0) {
            return bad(
                "min_deviation",
                "must be finite and non-negative",
                self.min_deviation,
            );
        }
        if !(self.repeat_rise.is_finite() && self.repeat_rise >= 0.0) {
            return bad(
                "repeat_rise",
                "must be finite and non-negative",
                self.repeat_rise,
            );
        }
        if !(self.recurrence.is_finite() && self.recurrence >= 0.0) {
            return bad(
                "recurrence",
                "must be finite and non-negative (0 turns it off)",
                self.recurrence,
            );
        }
        if self.recurrence > 0.0 && self.recurrence_horizon == 0 {
            return bad(
                "recurrence_horizon",
                "must be at least 1 row when recurrence is on",
                0.0,
            );
        }
        if self.stuck_run > 0 && !(self.stuck_factor.is_finite() && self.stuck_factor >= 1.0) {
            return bad(
                "stuck_factor",
                "must be finite and at least 1 when stuck_run is on",
                self.stuck_factor,
            );
        }
        if self.known_horizon > MAX_KNOWN_HORIZON {
            return bad(
                "known_horizon",
                "must be at most 100000 rows (each row of a noisy stream is a new entry)",
                self.known_horizon as f64,
            );
        }
        if self.warmup > 1_000_000 {
            return bad("warmup", "must be at most 1000000", self.warmup as f64);
        }
        Ok(())
    }

    /// The forest's input width for rows of `metrics` values: each value
    /// and, with [`Self::differences`], its change.
    pub fn forest_dimensions(&self, metrics: usize) -> usize {
        if self.differences {
            2 * metrics
        } else {
            metrics
        }
    }

    /// The grade of a row standing `z` deviations up: 0.5 at `lower`, 1 at
    /// `upper` and beyond.
    pub fn grade_of(&self, z: f64) -> f64 {
        0.5 + 0.5 * ((z - self.lower) / (self.upper - self.lower)).clamp(0.0, 1.0)
    }
}
