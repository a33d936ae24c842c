//! The grader's two pieces of state: the running statistics of the scores
//! ([`ScoreStats`], one per scorer) and the open event of one stream
//! ([`Episode`], one per stream: the pipeline's shared forest scores many
//! GPUs and keeps an episode for each).
//!
//! Part of the thresholded grader (`grading/`); the rules that use them are
//! in `mod.rs`.

use serde::{Deserialize, Serialize};

use super::config::GraderConfig;

/// Exponentially weighted mean and variance of the scores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScoreStats {
    mean: f64,
    var: f64,
    seen: u64,
}

impl ScoreStats {
    /// Scores learnt so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    pub fn is_warm(&self, config: &GraderConfig) -> bool {
        self.seen >= config.warmup as u64
    }

    /// The deviation scores are measured in, never below the configured
    /// share of the mean (a stream whose scores barely move must not turn
    /// every wobble into many deviations).
    pub fn deviation(&self, config: &GraderConfig) -> f64 {
        self.var
            .sqrt()
            .max(config.min_deviation * self.mean.abs())
            .max(1e-9)
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// How many deviations `score` stands above the running mean.
    pub fn standing(&self, score: f64, config: &GraderConfig) -> f64 {
        (score - self.mean) / self.deviation(config)
    }

    /// The score that stands `z` deviations above the mean.
    pub fn score_at(&self, z: f64, config: &GraderConfig) -> f64 {
        self.mean + z * self.deviation(config)
    }

    /// Learns `score`, winsorised at the upper threshold once warm: an
    /// anomaly moves the statistics no more than a score at the upper
    /// threshold would, so one event does not hide the next.
    pub fn learn(&mut self, score: f64, config: &GraderConfig) {
        if !score.is_finite() {
            return;
        }
        let x = if self.is_warm(config) {
            score.min(self.score_at(config.upper, config))
        } else {
            score
        };
        self.seen += 1;
        let a = config.score_decay.max(1.0 / self.seen as f64);
        let d = x - self.mean;
        self.mean += a * d;
        self.var = (1.0 - a) * (self.var + a * d * d);
    }

    pub fn is_consistent(&self) -> bool {
        self.mean.is_finite() && self.var.is_finite() && self.var >= 0.0
    }
}

/// One stream's event: open from the first flagged row until the score
/// falls back below the release threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    open: bool,
    /// Highest standing flagged in the open event.
    peak: f64,
}

/// What an episode makes of one standing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Step {
    /// The row starts an event or rises clearly above its peak.
    pub flagged: bool,
    /// An event is open after this row.
    pub open: bool,
    /// The open event's peak standing (0 when none).
    pub peak: f64,
}

impl Episode {
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Advances the episode by one row standing `z` deviations above the
    /// mean; `eligible` is false for scores at or below `min_score`.
    pub(crate) fn step(&mut self, z: f64, eligible: bool, config: &GraderConfig) -> Step {
        let mut flagged = false;
        if self.open {
            if !eligible || z < config.release {
                // Hysteresis: an event ends below the release threshold,
                // not merely below the one that opened it.
                *self = Episode::default();
            } else if z >= self.peak + config.repeat_rise {
                // A repeat is news only when it clearly outgrows the peak.
                flagged = true;
                self.peak = z;
            }
        } else if eligible && z >= config.lower {
            flagged = true;
            *self = Episode {
                open: true,
                peak: z,
            };
        }
        Step {
            flagged,
            open: self.open,
            peak: if self.open { self.peak } else { 0.0 },
        }
    }

    pub fn is_consistent(&self) -> bool {
        self.peak.is_finite()
    }
}
