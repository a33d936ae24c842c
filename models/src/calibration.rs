//! Streaming calibration of anomaly scores: turns a raw score into a grade in
//! [0, 1] and an anomaly flag, per stream, causally.
//!
//! Sits after a scorer (the random cut forest) in the models stage. Raw scores
//! are not comparable across streams (a noisy fan-speed series scores higher
//! than a flat temperature), so each stream gets its own threshold: the
//! `1 - false_positive_rate` quantile of its recent scores, kept exactly in a
//! sliding window. If scores were exchangeable, a new score exceeds that
//! quantile with probability about `false_positive_rate`, which is the flag
//! rate on clean data. Flagged scores enter the window clipped at its maximum,
//! so an anomaly's size does not raise the bar for the next one, while the window keeps
//! moving and the threshold follows slow changes. Nothing is flagged during
//! warm-up.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Invalid calibration parameters.
#[derive(Debug, Error, PartialEq)]
pub enum CalibrationError {
    #[error("invalid {field}: {reason} (got {value})")]
    InvalidParameter {
        field: &'static str,
        reason: &'static str,
        value: String,
    },
}

/// Parameters of a [`Thresholder`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThresholderConfig {
    /// Target fraction of clean points flagged. Default 0.005: one false flag
    /// per 200 points of a stationary stream.
    pub false_positive_rate: f64,
    /// Recent scores the quantile is taken over. Default 2048, so that at the
    /// default rate about ten scores lie above the threshold.
    pub window: usize,
    /// Scores seen before anything can be flagged. Default 256.
    pub warmup: usize,
    /// Scores at or below this are never flagged, whatever the quantile says.
    /// Default 0 (off): the quantile alone sets the flag rate.
    pub min_score: f64,
}

impl Default for ThresholderConfig {
    fn default() -> Self {
        Self {
            false_positive_rate: 0.005,
            window: 2048,
            warmup: 256,
            min_score: 0.0,
        }
    }
}

impl ThresholderConfig {
    pub fn validate(&self) -> Result<(), CalibrationError> {
        let bad = |field, reason, value: String| {
            Err(CalibrationError::InvalidParameter {
                field,
                reason,
                value,
            })
        };
        let fpr = self.false_positive_rate;
        if !(fpr > 0.0 && fpr < 0.5) {
            return bad(
                "false_positive_rate",
                "must be in (0, 0.5)",
                fpr.to_string(),
            );
        }
        if self.window < 16 {
            return bad("window", "must be at least 16", self.window.to_string());
        }
        if self.warmup > self.window {
            return bad("warmup", "must not exceed window", self.warmup.to_string());
        }
        if !self.min_score.is_finite() {
            return bad("min_score", "must be finite", self.min_score.to_string());
        }
        Ok(())
    }
}

/// The calibrated view of one score.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    /// 0 for ordinary points; in (0, 1] for flagged ones, 0.5 when the score
    /// exceeds the threshold by as much as the threshold exceeds the median.
    pub grade: f64,
    pub is_anomaly: bool,
    /// Threshold the score was compared with (0 during warm-up).
    pub threshold: f64,
}

/// Per-stream streaming thresholder; see the module docs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Thresholder {
    config: ThresholderConfig,
    /// Window contents in arrival order.
    recent: VecDeque<f64>,
    /// The same values, sorted, for exact quantiles.
    sorted: Vec<f64>,
    seen: u64,
}

impl Thresholder {
    pub fn new(config: ThresholderConfig) -> Result<Self, CalibrationError> {
        config.validate()?;
        Ok(Self {
            recent: VecDeque::with_capacity(config.window),
            sorted: Vec::with_capacity(config.window),
            seen: 0,
            config,
        })
    }

    pub fn config(&self) -> &ThresholderConfig {
        &self.config
    }

    /// Current threshold, or `None` during warm-up.
    pub fn threshold(&self) -> Option<f64> {
        if self.seen < self.config.warmup as u64 || self.sorted.is_empty() {
            return None;
        }
        let n = self.sorted.len();
        // Conformal rank: a new exchangeable score exceeds the k-th smallest of
        // n with probability (n - k) / (n + 1) <= false_positive_rate.
        let rank = ((1.0 - self.config.false_positive_rate) * (n + 1) as f64).ceil() as usize;
        let k = rank.saturating_sub(1).min(n - 1);
        Some(self.sorted[k].max(self.config.min_score))
    }

    /// Grades `score` against the scores before it, then adds it to the window.
    /// Non-finite scores are graded 0 and ignored.
    pub fn process(&mut self, score: f64) -> Grade {
        if !score.is_finite() {
            return Grade {
                grade: 0.0,
                is_anomaly: false,
                threshold: 0.0,
            };
        }
        let mut grade = Grade {
            grade: 0.0,
            is_anomaly: false,
            threshold: 0.0,
        };
        let mut stored = score;
        if let Some(thr) = self.threshold() {
            grade.threshold = thr;
            if score > thr {
                let median = self.sorted[self.sorted.len() / 2];
                let spread = (thr - median).max(1e-3 * thr.abs()).max(1e-9);
                grade.grade = (score - thr) / (score - thr + spread);
                grade.is_anomaly = true;
                // Clip to the window's maximum: the rank above the threshold (all
                // a quantile sees) is kept, so the flag rate stays unbiased,
                // while a burst of anomalies can lift the threshold at most to
                // the largest ordinary score, not to the anomalies' level.
                let max = self.sorted.last().copied().unwrap_or(thr);
                stored = score.min(max);
            }
        }
        self.push(stored);
        self.seen += 1;
        grade
    }

    fn push(&mut self, x: f64) {
        if self.recent.len() == self.config.window
            && let Some(old) = self.recent.pop_front()
        {
            let i = self.sorted.partition_point(|v| *v < old);
            debug_assert!(self.sorted.get(i) == Some(&old));
            self.sorted.remove(i);
        }
        self.recent.push_back(x);
        let i = self.sorted.partition_point(|v| *v < x);
        self.sorted.insert(i, x);
    }

    pub fn heap_bytes(&self) -> usize {
        (self.recent.capacity() + self.sorted.capacity()) * 8
    }

    /// Window and sorted copy agree (snapshot restore).
    pub fn is_consistent(&self) -> bool {
        let mut a: Vec<f64> = self.recent.iter().copied().collect();
        a.sort_by(f64::total_cmp);
        a == self.sorted
            && self.recent.len() <= self.config.window
            && self.config.validate().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Xoshiro256PlusPlus;

    #[test]
    fn flag_rate_matches_target_on_iid_scores() {
        let mut t = Thresholder::new(ThresholderConfig::default()).expect("valid");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut flags = 0;
        let n = 200_000;
        for i in 0..n {
            let s = 1.0 + rng.next_gaussian().abs() * 0.3;
            let g = t.process(s);
            if i < 256 {
                assert!(!g.is_anomaly);
            }
            flags += usize::from(g.is_anomaly);
        }
        let rate = flags as f64 / n as f64;
        assert!(rate > 0.0025 && rate < 0.01, "flag rate {rate}");
        assert!(t.is_consistent());
    }

    #[test]
    fn spikes_get_high_grades_and_do_not_raise_the_bar() {
        let mut t = Thresholder::new(ThresholderConfig::default()).expect("valid");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
        for _ in 0..1000 {
            t.process(1.0 + 0.1 * rng.next_f64());
        }
        let before = t.threshold().expect("warmed up");
        for i in 0..50 {
            let g = t.process(5.0);
            assert!(g.is_anomaly, "spike {i}: {g:?}");
            assert!(g.grade > 0.9, "spike {i}: {g:?}");
        }
        // Spikes enter the window clipped just above the threshold, so fifty of
        // them barely move it.
        let after = t.threshold().expect("warmed up");
        assert!(after < before + 0.01, "threshold {before} -> {after}");
    }

    #[test]
    fn validate_names_fields() {
        let c = ThresholderConfig {
            false_positive_rate: 0.0,
            ..Default::default()
        };
        assert!(matches!(
            c.validate(),
            Err(CalibrationError::InvalidParameter {
                field: "false_positive_rate",
                ..
            })
        ));
    }
}
