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
//! 4. **Recurrences** ([`Recurrences`], single streams only): an event that
//!    opens on the same forest input as one opened in the last
//!    `recurrence_horizon` rows (within `recurrence`) is a normal pattern
//!    coming back — a reset, a daily job, a switch between known states —
//!    and is not flagged.
//!
//! 5. **Known states** ([`KnownStates`], single streams only): a row whose
//!    raw input over the shingle is exactly one seen in the last
//!    `known_horizon` rows is not flagged: seen on a normal row, it ends an
//!    open event (the forest's surprise at it is the input normaliser
//!    having moved); seen in an earlier event, it opens none.
//!
//! 6. **Stuck values** ([`StuckRuns`], single streams only): a metric
//!    that repeats its last value for `stuck_run` rows and `stuck_factor`
//!    times its longest earlier run (once it has ended [`MIN_ENDED_RUNS`]
//!    runs) opens an event at grade 1, held while the value holds: a
//!    frozen sensor reports ordinary values, only the run is new.
//!
//! Until `warmup` scores have been learnt nothing is graded and the grade
//! says so (`warming_up`). Everything is arithmetic on the inputs in order:
//! same rows, same grades.

mod config;
mod grade;
mod known;
mod normalize;
mod recurrence;
mod state;
mod stuck;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use crate::calibration::CalibrationError;
pub use config::GraderConfig;
pub use grade::Grade;
pub use known::KnownStates;
pub use normalize::{InputNormalizer, NORMALIZED_LIMIT};
pub use recurrence::{Recurrences, SHAPES};
pub use state::{Episode, ScoreStats};
pub use stuck::{MIN_ENDED_RUNS, Stuck, StuckRuns};

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

    /// Grades by `config` from now on, keeping the score statistics and
    /// the open event.
    pub fn reconfigure(&mut self, config: GraderConfig) -> Result<(), CalibrationError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    pub fn stats(&self) -> &ScoreStats {
        &self.stats
    }

    /// This grader's own stream has an event open.
    pub fn in_event(&self) -> bool {
        self.episode.is_open()
    }

    /// Ends this grader's own stream's open event, if any.
    pub fn close_event(&mut self) {
        self.episode = Episode::default();
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
