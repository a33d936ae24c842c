//! Models stage of forewarn: turns per-GPU feature rows into anomaly scores,
//! failure probabilities and memory-error forecasts.
//!
//! - `rcf`: streaming random cut forest with attribution and snapshots.
//! - `grading`: the thresholded grader: input normalisation, score
//!   statistics, events with hysteresis: grades that mean the same on every
//!   stream.
//! - `calibration`: the earlier per-stream quantile thresholds (kept as a
//!   baseline for the stream corpus of `evaluation`).
//! - `failure`: the supervised failure model (gradient-boosted, calibrated,
//!   with its logistic baseline) and its artifact.
//! - `trend`: memory-error trend forecasts (ETA to the HBM's error budgets).
//! - `assess`: risk fusion: hard-failure rules, degradation signals, the
//!   forest's grade and the failure model's probability → one assessment
//!   per GPU and row.
//! - `rng`: seeded generators; every model is deterministic given its seed.
//! - `stats`: small statistics (the median) the detector and the reports share.
//!
//! Everything here is synchronous and owns its state; the detector crate
//! decides where models run and turns their verdicts into alerts.

pub mod assess;
pub mod calibration;
pub mod failure;
pub mod grading;
pub mod rcf;
pub mod stats;
pub mod trend;
/// Seeded generators (shared with the simulator; they live in `features`).
pub use features::rng;
