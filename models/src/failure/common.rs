//! What the failure model's parts share: which model raises alarms and the
//! one error type. A leaf of `failure/`, so that the models (`gbdt`,
//! `logistic`), the sampling of sets and the artifact need not reach back
//! into their parent.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Which of the artifact's two models raises alarms: `train` keeps the one
/// that did better on its validation split (artifacts from before the
/// choice have none recorded and use the GBDT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Primary {
    #[default]
    Gbdt,
    Logistic,
}

impl Primary {
    pub const fn as_str(self) -> &'static str {
        match self {
            Primary::Gbdt => "gbdt",
            Primary::Logistic => "logistic",
        }
    }
}

#[derive(Debug, Error)]
pub enum FailureModelError {
    #[error("training failed: {0}")]
    Training(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a forewarn model: {message}")]
    Format { path: String, message: String },
    #[error(
        "{path} was trained on feature schema version {found}, this build computes version \
         {expected}: retrain it with `forewarn train` on a fresh `forewarn features` export"
    )]
    SchemaMismatch {
        path: String,
        found: u32,
        expected: u32,
    },
    #[error(
        "{path} was trained on model input version {found}, this build computes version \
         {expected}: retrain it with `forewarn train`"
    )]
    InputMismatch {
        path: String,
        found: u32,
        expected: u32,
    },
}
