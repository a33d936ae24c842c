//! The grader's output for one score: the grade, the event it belongs to
//! and whether the grader is still warming up.
//!
//! Part of the thresholded grader (`grading/`), a leaf: the rules in
//! `mod.rs` produce it and the recurrence filter (`recurrence`) rewrites it.

use serde::{Deserialize, Serialize};

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
