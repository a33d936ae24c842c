//! Recurrences: a normal pattern that comes back (a counter's reset, a
//! daily batch job, a switch between known states) scores as high as
//! something new, because a forest of a few hundred points holds only a
//! few rows of it. The grader would flag it every time. This remembers the
//! forest input (the shingle, normalised) of each event the grade opens;
//! an event whose opening input lies within `recurrence` (mean absolute
//! distance per coordinate) of one opened in the last `recurrence_horizon`
//! rows is a recurrence and is not flagged, nor is the rest of it unless
//! its standing rises `repeat_rise` above its peak (the episode rule).
//!
//! Part of the thresholded grader (`grading/`); `rcf::ThresholdedForest`
//! applies it to a single stream's grades (`forewarn score`). The
//! pipeline's shard forest, one forest for many GPUs, leaves it off.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::config::GraderConfig;
use super::grade::Grade;

/// Opened events remembered at most (the oldest goes first).
pub const SHAPES: usize = 64;

/// One opened event: the row it opened at and its forest input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Shape {
    at: u64,
    input: Vec<f32>,
}

/// The shapes of recently opened events and whether the open one is a
/// recurrence (one stream's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recurrences {
    shapes: VecDeque<Shape>,
    /// The open event repeats a remembered one: it stays unflagged.
    quiet: bool,
}

/// Mean absolute distance of `a` and `b`, of equal non-zero lengths.
fn distance(a: &[f32], b: &[f32]) -> f64 {
    let sum: f64 = a.iter().zip(b).map(|(x, y)| f64::from((x - y).abs())).sum();
    sum / a.len() as f64
}

impl Recurrences {
    /// The grade `g` of the row at `at` (a row count that only grows),
    /// with recurrences taken out. `opened`: this row opened the event;
    /// `input` gives the row's forest input, asked for only then.
    pub fn filter(
        &mut self,
        g: Grade,
        opened: bool,
        at: u64,
        input: impl FnOnce() -> Vec<f32>,
        config: &GraderConfig,
    ) -> Grade {
        if config.recurrence <= 0.0 {
            return g;
        }
        if !g.in_event {
            self.quiet = false;
            return g;
        }
        if opened {
            let input = input();
            if input.is_empty() {
                // No shape to compare (cannot happen in a forest's use).
                self.quiet = false;
                return g;
            }
            let horizon = config.recurrence_horizon;
            self.shapes.retain(|s| at.saturating_sub(s.at) <= horizon);
            self.quiet = self.shapes.iter().any(|s| {
                s.input.len() == input.len() && distance(&s.input, &input) < config.recurrence
            });
            if self.shapes.len() == SHAPES {
                self.shapes.pop_front();
            }
            self.shapes.push_back(Shape { at, input });
        } else if self.quiet && g.is_anomaly {
            // A clear rise inside a recurrence is news after all.
            self.quiet = false;
        }
        if self.quiet {
            Grade {
                grade: 0.0,
                is_anomaly: false,
                event_grade: 0.0,
                ..g
            }
        } else {
            g
        }
    }

    /// At most [`SHAPES`] remembered inputs, each `dims` wide and finite,
    /// in the order they opened (snapshot restore).
    pub fn is_consistent(&self, dims: usize) -> bool {
        self.shapes.len() <= SHAPES
            && self
                .shapes
                .iter()
                .all(|s| s.input.len() == dims && s.input.iter().all(|v| v.is_finite()))
            && self
                .shapes
                .iter()
                .zip(self.shapes.iter().skip(1))
                .all(|(a, b)| a.at <= b.at)
    }

    pub fn heap_bytes(&self) -> usize {
        self.shapes.capacity() * std::mem::size_of::<Shape>()
            + self
                .shapes
                .iter()
                .map(|s| s.input.capacity() * 4)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flagged(grade: f64) -> Grade {
        Grade {
            grade,
            is_anomaly: true,
            event_grade: grade,
            in_event: true,
            threshold: 1.0,
            warming_up: false,
        }
    }

    fn held(event_grade: f64) -> Grade {
        Grade {
            grade: 0.0,
            is_anomaly: false,
            event_grade,
            in_event: true,
            threshold: 1.0,
            warming_up: false,
        }
    }

    fn calm() -> Grade {
        Grade {
            in_event: false,
            event_grade: 0.0,
            ..held(0.0)
        }
    }

    #[test]
    fn a_shape_that_comes_back_is_not_flagged_until_it_rises_or_is_forgotten() {
        let config = GraderConfig::default();
        let a = vec![1.0f32, -2.0, 3.0, 0.5];
        let near: Vec<f32> = a.iter().map(|v| v + 0.1).collect();
        let far: Vec<f32> = a.iter().map(|v| v + 2.0).collect();
        let mut r = Recurrences::default();
        let at = std::cell::Cell::new(1000u64);
        let step = |r: &mut Recurrences, g: Grade, opened: bool, shape: &[f32]| {
            at.set(at.get() + 1);
            r.filter(g, opened, at.get(), || shape.to_vec(), &config)
        };
        // The first time: news.
        assert_eq!(step(&mut r, flagged(0.8), true, &a), flagged(0.8));
        assert_eq!(step(&mut r, held(0.8), false, &a), held(0.8));
        assert_eq!(step(&mut r, calm(), false, &a), calm());
        // It comes back: the event is open but neither flagged nor graded.
        let back = step(&mut r, flagged(0.9), true, &near);
        assert!(!back.is_anomaly && back.grade == 0.0 && back.event_grade == 0.0);
        assert!(back.in_event, "{back:?}");
        assert_eq!(step(&mut r, held(0.9), false, &near).event_grade, 0.0);
        // A clear rise inside it is news after all, and stays graded.
        assert_eq!(step(&mut r, flagged(1.0), false, &near), flagged(1.0));
        assert_eq!(step(&mut r, held(1.0), false, &near), held(1.0));
        assert_eq!(step(&mut r, calm(), false, &near), calm());
        // Another shape is news.
        assert_eq!(step(&mut r, flagged(0.7), true, &far), flagged(0.7));
        assert_eq!(step(&mut r, calm(), false, &far), calm());
        // Past the horizon the first shape is forgotten.
        at.set(at.get() + config.recurrence_horizon + 1);
        assert_eq!(step(&mut r, flagged(0.8), true, &a), flagged(0.8));
        assert!(r.is_consistent(a.len()));
        assert!(!r.is_consistent(a.len() + 1));
    }

    #[test]
    fn off_changes_nothing_and_memory_is_bounded() {
        let off = GraderConfig {
            recurrence: 0.0,
            ..GraderConfig::default()
        };
        let mut r = Recurrences::default();
        for at in 0..10 {
            let g = r.filter(flagged(0.8), true, at, || vec![1.0], &off);
            assert_eq!(g, flagged(0.8));
        }
        let on = GraderConfig::default();
        for at in 0..(3 * SHAPES as u64) {
            r.filter(flagged(0.8), true, at, || vec![at as f32 * 10.0], &on);
        }
        assert_eq!(r.shapes.len(), SHAPES);
        assert!(r.heap_bytes() > 0);
    }
}
