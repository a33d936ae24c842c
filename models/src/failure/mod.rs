//! The supervised failure model: P(this GPU fails within the horizon | its
//! model input now), from a gradient-boosted classifier with Platt
//! calibration, plus the logistic baseline trained beside it, stored as one
//! artifact (`model.fwm`, JSON) with the feature-schema version, the input
//! columns and the training metadata. Loading checks them and refuses a
//! model built for other features.
//!
//! Trained offline (`forewarn train`), loaded by the pipeline when
//! configured; [`FailureModel::probability`] is the hot path (~100 trees,
//! array walks, no allocation).

pub mod budget;
mod common;
mod examples;
pub mod forust;
pub mod gbdt;
pub mod history;
pub mod input;
pub mod logistic;
pub mod metrics;
pub mod platt;
pub mod sampling;

use std::path::Path;

use features::FEATURE_SCHEMA_VERSION;
use serde::{Deserialize, Serialize};

pub use common::{FailureModelError, Primary};
pub use examples::Examples;
pub use gbdt::{Booster, Gbdt, GbdtParams};
pub use history::History;
pub use input::{INPUT_VERSION, INPUT_WIDTH, InputState, input_names};
pub use logistic::Logistic;
pub use platt::Platt;

/// The artifact's format tag and version.
pub const FORMAT: &str = "forewarn-failure-model";
pub const FORMAT_VERSION: u32 = 2;

/// How and on what the model was trained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TrainingMeta {
    pub created: String,
    pub data: Vec<String>,
    pub horizon_h: f64,
    pub seed: u64,
    pub train_rows: usize,
    pub train_positives: usize,
    pub calibration_rows: usize,
    pub validation_rows: usize,
    pub gpus: usize,
    pub failures: usize,
    pub booster: String,
    pub budget: f32,
    pub train_seconds: f64,
    /// Validation figures, by model.
    pub validation: Vec<(String, f64)>,
    /// Start of the held-out time (epoch ms): rows from here on never
    /// reached training, so `forewarn evaluate --challenger` compares on
    /// them. Absent in artifacts trained before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out_from_ms: Option<i64>,
}

/// A trained failure model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureModel {
    pub format: String,
    pub format_version: u32,
    pub feature_schema_version: u32,
    /// [`INPUT_VERSION`] of the build that trained it.
    pub input_version: u32,
    pub input_names: Vec<String>,
    pub meta: TrainingMeta,
    pub gbdt: Gbdt,
    pub gbdt_platt: Platt,
    pub logistic: Logistic,
    pub logistic_platt: Platt,
    /// The GBDT's operating point: it alarms when its calibrated
    /// probability reaches it ([`FailureModel::alarm_threshold`] is the
    /// primary's).
    pub threshold: f64,
    /// The baseline's operating point, chosen the same way.
    pub baseline_threshold: f64,
    /// The model whose probability and operating point alarm.
    #[serde(default)]
    pub primary: Primary,
}

impl FailureModel {
    pub fn new(
        gbdt: Gbdt,
        gbdt_platt: Platt,
        logistic: Logistic,
        logistic_platt: Platt,
        threshold: [f64; 2],
        meta: TrainingMeta,
    ) -> Self {
        FailureModel {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            feature_schema_version: FEATURE_SCHEMA_VERSION,
            input_version: INPUT_VERSION,
            input_names: input_names(),
            meta,
            gbdt,
            gbdt_platt,
            logistic,
            logistic_platt,
            threshold: threshold[0],
            baseline_threshold: threshold[1],
            primary: Primary::Gbdt,
        }
    }

    /// Calibrated P(failure within the horizon) of one input row, by the
    /// [`Primary`] model.
    #[inline]
    pub fn probability(&self, x: &[f32]) -> f64 {
        match self.primary {
            Primary::Gbdt => self.gbdt_probability(x),
            Primary::Logistic => self.baseline_probability(x),
        }
    }

    /// The primary model's operating point: alarm at or above it.
    pub fn alarm_threshold(&self) -> f64 {
        match self.primary {
            Primary::Gbdt => self.threshold,
            Primary::Logistic => self.baseline_threshold,
        }
    }

    /// The GBDT's calibrated probability, whichever model is primary.
    #[inline]
    pub fn gbdt_probability(&self, x: &[f32]) -> f64 {
        self.gbdt_platt.apply(self.gbdt.logit(x))
    }

    /// The baseline's calibrated probability.
    pub fn baseline_probability(&self, x: &[f32]) -> f64 {
        self.logistic_platt.apply(self.logistic.logit(x))
    }

    pub fn save(&self, path: &Path) -> Result<(), FailureModelError> {
        let io = |e| FailureModelError::Io {
            path: path.display().to_string(),
            source: e,
        };
        let text = serde_json::to_vec(self).map_err(|e| io(std::io::Error::other(e)))?;
        std::fs::write(path, text).map_err(io)
    }

    /// Loads and checks an artifact.
    pub fn load(path: &Path) -> Result<FailureModel, FailureModelError> {
        let p = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| FailureModelError::Io {
            path: p.clone(),
            source: e,
        })?;
        let format = |message: String| FailureModelError::Format {
            path: p.clone(),
            message,
        };
        // Check the header first, so that a mismatch says so rather than
        // failing on a field that moved.
        #[derive(Deserialize)]
        struct Header {
            format: String,
            format_version: u32,
            feature_schema_version: u32,
            #[serde(default)]
            input_version: u32,
        }
        let h: Header = serde_json::from_slice(&bytes).map_err(|e| format(e.to_string()))?;
        if h.format != FORMAT {
            return Err(format(format!("format {:?}", h.format)));
        }
        if h.format_version != FORMAT_VERSION && h.format_version != 1 {
            return Err(format(format!(
                "artifact format version {}, this build reads {FORMAT_VERSION}",
                h.format_version
            )));
        }
        if h.feature_schema_version != FEATURE_SCHEMA_VERSION {
            return Err(FailureModelError::SchemaMismatch {
                path: p,
                found: h.feature_schema_version,
                expected: FEATURE_SCHEMA_VERSION,
            });
        }
        if h.input_version != INPUT_VERSION {
            return Err(FailureModelError::InputMismatch {
                path: p,
                found: h.input_version.max(1),
                expected: INPUT_VERSION,
            });
        }
        let m: FailureModel = serde_json::from_slice(&bytes).map_err(|e| format(e.to_string()))?;
        if m.input_names != input_names() {
            return Err(format(
                "its input columns differ from this build's: retrain it".into(),
            ));
        }
        m.gbdt.validate(INPUT_WIDTH).map_err(format)?;
        if m.logistic.coef.len() != INPUT_WIDTH
            || m.logistic.mean.len() != INPUT_WIDTH
            || m.logistic.scale.len() != INPUT_WIDTH
        {
            return Err(format("baseline has the wrong width".into()));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests;
