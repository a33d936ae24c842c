//! # evaluation
//!
//! How good forewarn's verdicts are, as library code: the scenario suite's
//! alert events scored against the simulator's ground truth, the
//! acceptance targets checked, and the reports (stdout table, Markdown,
//! `summary.json`, PNG plots) written. `forewarn evaluate` is the command
//! glue around it; keeping this out of the binary keeps `plotters` out of
//! the service.
//!
//! - [`score`]: one scenario's alerts against its [`score::Truth`].
//! - [`summary`]: scenario scores → targets and the verdict ([`summary::Report`]).
//! - [`model_report`]: the failure model's report on feature exports.
//! - [`plots`]: PNG plots (precision-recall, lead time, recall per kind).
//! - [`reference`]: the hindsight CUSUM reference: how early a plain
//!   per-GPU change detector could warn on a simulated run (binary
//!   `reference`).
//! - [`streams`]: the stream benchmark of the anomaly grade: a labelled
//!   corpus of our own, window scoring, one global threshold per profile
//!   (binary `streams`).

pub mod model_report;
pub mod plots;
pub mod reference;
pub mod score;
pub mod streams;
pub mod summary;

use std::path::PathBuf;

use thiserror::Error;

/// Why a report could not be written.
#[derive(Debug, Error)]
pub enum EvalError {
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("encoding the summary: {0}")]
    Json(#[from] serde_json::Error),
    #[error("plotting {path}: {message}")]
    Plot { path: PathBuf, message: String },
}

/// One scenario's run: what it was, what it cost, how it scored.
pub struct Outcome {
    pub run: datasets::scenarios::ScenarioRun,
    pub truth: score::Truth,
    pub score: score::ScenarioScore,
    pub samples: u64,
    pub undecodable: u64,
    pub rejected: u64,
    pub wall_s: f64,
}
