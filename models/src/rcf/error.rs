//! Errors of the random cut forest: configuration problems found by
//! `ForestBuilder::validate`, inputs of the wrong shape, and snapshots that cannot
//! be read back. Scoring itself never fails; bad values are imputed instead.

use thiserror::Error;

/// Everything that can go wrong when building, feeding or restoring a forest.
#[derive(Debug, Error)]
pub enum RcfError {
    /// A builder field is out of range; `field` is the builder method's name.
    #[error("invalid {field}: {reason} (got {value})")]
    InvalidParameter {
        field: &'static str,
        reason: &'static str,
        value: String,
    },
    /// An input row did not have the configured number of values.
    #[error("input has {got} values, expected {expected}")]
    DimensionMismatch { expected: usize, got: usize },
    /// A snapshot could not be encoded or decoded.
    #[error("snapshot encoding failed")]
    Snapshot(#[from] serde_json::Error),
    /// Calibration parameters are invalid.
    #[error(transparent)]
    Calibration(#[from] crate::calibration::CalibrationError),
    /// A snapshot (or a checkpoint holding one) of another format version.
    #[error(
        "checkpoint written by {} forewarn (forest snapshot v{found}); this build reads v{reads}: delete the checkpoint to start cold",
        age(.found, .reads)
    )]
    SnapshotVersion { found: u32, reads: u32 },
    /// A snapshot decoded but its contents contradict each other.
    #[error("snapshot is inconsistent: {reason}")]
    CorruptSnapshot { reason: &'static str },
}

/// "an older" or "a newer" build, for a snapshot of version `found` read by
/// a build that reads `reads`.
fn age(found: &u32, reads: &u32) -> &'static str {
    if found < reads { "an older" } else { "a newer" }
}

impl RcfError {
    pub(crate) fn invalid(field: &'static str, reason: &'static str, value: impl ToString) -> Self {
        RcfError::InvalidParameter {
            field,
            reason,
            value: value.to_string(),
        }
    }
}
