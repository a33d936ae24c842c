//! The thresholded grader: turns a raw anomaly score into a grade that means
//! the same on every stream.
//!
//! Sits after the random cut forest in the models stage (`rcf::ThresholdedForest`
//! wires it; `forewarn score` and the pipeline's anomaly model use it). Raw
//! forest scores are not comparable across streams: a noisy series scores
//! higher than a smooth one, and a level that suits one stream fires all the
//! time on another or never. The grader makes them comparable in three steps:
//!
//! 1. **Inputs** ([`InputNormalizer`]): each input dimension is centred and
//!    scaled by its own running mean and deviation (decay `input_decay`)
//!    before the forest sees it.
//! 2. **Scores** ([`ScoreStats`]): the scores' own running mean and deviation
//!    (decay `score_decay`). A score's *standing* is how many deviations it
//!    lies above that mean; anomalies enter the statistics winsorised at the
//!    upper threshold, so one event does not mask the next.
//! 3. **Events** ([`Episode`]): a row standing at least `lower` deviations
//!    up (and scoring above `min_score`) opens an event and is flagged with a
//!    grade from 0.5 (at `lower`) to 1 (at `upper` and beyond). The event stays
//!    open until the standing falls below `release` (hysteresis); inside it,
//!    rows are repeats of the flagged event and get grade 0 unless they rise
//!    `repeat_rise` deviations above its peak. `event_grade` holds the open
//!    event's peak grade for consumers that need a level (alert lifecycles).
//!
//! Until `warmup` scores have been learnt nothing is graded and the grade
//! says so (`warming_up`). Everything is arithmetic on the inputs in order:
//! same rows, same grades.

mod normalize;
mod state;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use crate::calibration::CalibrationError;
pub use normalize::{InputNormalizer, NORMALIZED_LIMIT};
pub use state::{Episode, ScoreStats};

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
}

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
        if self.warmup > 1_000_000 {
            return bad("warmup", "must be at most 1000000", self.warmup as f64);
        }
        Ok(())
    }

    /// The grade of a row standing `z` deviations up: 0.5 at `lower`, 1 at
    /// `upper` and beyond.
    pub fn grade_of(&self, z: f64) -> f64 {
        0.5 + 0.5 * ((z - self.lower) / (self.upper - self.lower)).clamp(0.0, 1.0)
    }
}

/// The graded view of one score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    /// In [0.5, 1] for a flagged row (a new event, or a clear rise inside
    /// one); 0 otherwise, repeats of a flagged event included.
    pub grade: f64,
    /// `grade > 0`.
    pub is_anomaly: bool,
    /// The open event's peak grade, held until it closes (0 when none).
    pub event_grade: f64,
    /// An event is open.
    pub in_event: bool,
    /// Score that stands at the lower threshold now (0 while warming up).
    pub threshold: f64,
    /// Fewer than `warmup` scores learnt: nothing is graded yet.
    pub warming_up: bool,
}

impl Grade {
    /// The grade of a row scored while warming up.
    pub const WARMING_UP: Grade = Grade {
        grade: 0.0,
        is_anomaly: false,
        event_grade: 0.0,
        in_event: false,
        threshold: 0.0,
        warming_up: true,
    };
}

/// Grades `score` against `stats` for the stream whose event is `episode`
/// (without learning the score: see [`ScoreStats::learn`]).
pub fn grade(
    score: f64,
    stats: &ScoreStats,
    episode: &mut Episode,
    config: &GraderConfig,
) -> Grade {
    if !stats.is_warm(config) {
        return Grade::WARMING_UP;
    }
    if !score.is_finite() {
        let mut g = Grade::WARMING_UP;
        g.warming_up = false;
        return g;
    }
    let z = stats.standing(score, config);
    let step = episode.step(z, score > config.min_score, config);
    let grade = if step.flagged {
        config.grade_of(z)
    } else {
        0.0
    };
    Grade {
        grade,
        is_anomaly: step.flagged,
        event_grade: if step.open {
            config.grade_of(step.peak)
        } else {
            0.0
        },
        in_event: step.open,
        threshold: stats.score_at(config.lower, config).max(config.min_score),
        warming_up: false,
    }
}

/// Score statistics and one stream's episode: the grader of a single
/// stream (the forest's own, in `rcf::ThresholdedForest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grader {
    config: GraderConfig,
    stats: ScoreStats,
    episode: Episode,
}

impl Grader {
    pub fn new(config: GraderConfig) -> Result<Self, CalibrationError> {
        config.validate()?;
        Ok(Self {
            config,
            stats: ScoreStats::default(),
            episode: Episode::default(),
        })
    }

    pub fn config(&self) -> &GraderConfig {
        &self.config
    }

    pub fn stats(&self) -> &ScoreStats {
        &self.stats
    }

    /// Grades `score` against the scores before it, then learns it.
    pub fn process(&mut self, score: f64) -> Grade {
        let g = grade(score, &self.stats, &mut self.episode, &self.config);
        self.stats.learn(score, &self.config);
        g
    }

    /// Grades `score` for another stream's `episode` (the pipeline's
    /// per-GPU events), learning the score when `learn`.
    pub fn process_for(&mut self, score: f64, episode: &mut Episode, learn: bool) -> Grade {
        let g = grade(score, &self.stats, episode, &self.config);
        if learn {
            self.stats.learn(score, &self.config);
        }
        g
    }

    /// Statistics finite and config valid (snapshot restore).
    pub fn is_consistent(&self) -> bool {
        self.config.validate().is_ok() && self.stats.is_consistent() && self.episode.is_consistent()
    }
}
