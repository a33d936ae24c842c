//! The detector's snapshot as decoded (`ThresholdedRepr`) and the checks a
//! restored `ThresholdedForest` passes before it runs: every piece of state
//! must fit the forest it was saved with.
//!
//! Part of `rcf::thresholded`, which builds the detector from the checked
//! [`Parts`]; this module does not know the detector.

use serde::Deserialize;

use crate::grading::{Grader, GraderConfig, InputNormalizer, KnownStates, Recurrences, StuckRuns};
use crate::rcf::{Forest, RcfError};

/// A snapshot as decoded: a snapshot of the quantile calibration that came
/// before the grader has neither `normalizer` nor `grader`.
#[derive(Deserialize)]
pub(crate) struct ThresholdedRepr {
    pub(crate) forest: Forest,
    #[serde(default)]
    normalizer: Option<InputNormalizer>,
    #[serde(default)]
    grader: Option<Grader>,
    #[serde(default)]
    last: Vec<Option<f64>>,
    #[serde(default)]
    recurrences: Recurrences,
    #[serde(default)]
    known: KnownStates,
    #[serde(default)]
    stuck: StuckRuns,
}

impl ThresholdedRepr {
    /// Whether this is a snapshot of the grader (not of the older quantile
    /// calibration, whose forest learnt unnormalised rows).
    pub(crate) fn is_current(&self) -> bool {
        self.normalizer.is_some() && self.grader.is_some()
    }
}

/// A snapshot's pieces, each checked against the forest.
pub(super) struct Parts {
    pub(super) forest: Forest,
    pub(super) normalizer: InputNormalizer,
    pub(super) grader: Grader,
    pub(super) last: Vec<Option<f64>>,
    pub(super) recurrences: Recurrences,
    pub(super) known: KnownStates,
    pub(super) stuck: StuckRuns,
}

impl ThresholdedRepr {
    /// The pieces, once every one fits the forest it was saved with.
    pub(super) fn into_parts(self) -> Result<Parts, RcfError> {
        let Self {
            forest,
            normalizer,
            grader,
            last,
            recurrences,
            known,
            stuck,
        } = self;
        let (Some(normalizer), Some(grader)) = (normalizer, grader) else {
            return Err(RcfError::CorruptSnapshot {
                reason: "a snapshot of the quantile calibration, from before the thresholded grader: rebuild it (the forest starts cold)",
            });
        };
        if !grader.is_consistent() {
            return Err(RcfError::CorruptSnapshot {
                reason: "grader state is invalid",
            });
        }
        if !normalizer.is_consistent() || normalizer.dims() != forest.config().input_dimensions {
            return Err(RcfError::CorruptSnapshot {
                reason: "input normalizer does not match the forest",
            });
        }
        let dims = forest.config().input_dimensions;
        let metrics = metrics_of(grader.config(), dims);
        let last_ok = if grader.config().differences {
            dims.is_multiple_of(2)
                && last.len() == metrics
                && last.iter().flatten().all(|x| x.is_finite())
        } else {
            last.is_empty()
        };
        if !last_ok {
            return Err(RcfError::CorruptSnapshot {
                reason: "the last values do not match the forest's inputs",
            });
        }
        check_shapes(grader.config(), &recurrences, &forest)?;
        if !known.is_consistent(forest.config().shingle_size) {
            return Err(RcfError::CorruptSnapshot {
                reason: "the known states hold more rows than a shingle",
            });
        }
        if !stuck.is_consistent(metrics) {
            return Err(RcfError::CorruptSnapshot {
                reason: "the stuck values' runs do not match the metrics",
            });
        }
        Ok(Parts {
            forest,
            normalizer,
            grader,
            last,
            recurrences,
            known,
            stuck,
        })
    }
}

/// With a memory of recurrences (`config.recurrence` > 0), the remembered
/// events must fit `forest`'s points (snapshot restore, `regrade`).
pub(super) fn check_shapes(
    config: &GraderConfig,
    recurrences: &Recurrences,
    forest: &Forest,
) -> Result<(), RcfError> {
    if config.recurrence > 0.0 && !recurrences.is_consistent(forest.config().dimensions()) {
        return Err(RcfError::CorruptSnapshot {
            reason: "the remembered events do not match the forest's inputs",
        });
    }
    Ok(())
}

/// Metrics per row for a forest of `dims` inputs.
pub(super) fn metrics_of(config: &GraderConfig, dims: usize) -> usize {
    if config.differences { dims / 2 } else { dims }
}
