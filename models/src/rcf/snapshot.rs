//! The forest's snapshot format version, and the check that refuses
//! snapshots of another version.
//!
//! Part of the forest in `rcf/`. A snapshot is the serde form of `Forest`
//! (JSON through `Forest::to_json`, CBOR inside the detector's checkpoints)
//! with a `version` field. Version 1 had no such field; it covered both the
//! current tree layout and older ones, which an earlier build converted on
//! load. This build reads version 2 only: converting old layouts kept dead
//! code alive, and a checkpoint is cheap to rebuild (delete it and the
//! forest starts cold), so an old one is refused with an error that says so.

use serde::Deserialize;

use super::RcfError;
use super::config::ForestConfig;
use super::forest::{Forest, Group};
use super::shingle::Shingler;

/// The snapshot version this build writes and reads.
pub(super) const SNAPSHOT_VERSION: u32 = 2;

/// The version of a snapshot without a `version` field.
fn unversioned() -> u32 {
    1
}

/// Only the version of a forest snapshot; every other field is skipped.
#[derive(Deserialize)]
struct Version {
    #[serde(default = "unversioned")]
    version: u32,
}

/// Refuses a version this build does not read.
pub(super) fn check_version(found: u32) -> Result<(), RcfError> {
    if found == SNAPSHOT_VERSION {
        Ok(())
    } else {
        Err(RcfError::SnapshotVersion {
            found,
            reads: SNAPSHOT_VERSION,
        })
    }
}

/// Checks the version of the JSON forest snapshot `json` before it is
/// decoded, so that an old snapshot gets the version error rather than
/// whichever field of its layout fails to decode first.
pub(super) fn check_json_version(json: &str) -> Result<(), RcfError> {
    check_version(serde_json::from_str::<Version>(json)?.version)
}

/// `check_json_version` for a snapshot nesting the forest under `forest`
/// (`ThresholdedForest`).
pub(super) fn check_nested_json_version(json: &str) -> Result<(), RcfError> {
    #[derive(Deserialize)]
    struct Nested {
        forest: Version,
    }
    check_version(serde_json::from_str::<Nested>(json)?.forest.version)
}

/// A forest snapshot as decoded, before its version is checked (for
/// decoders other than `Forest::from_json`, such as the checkpoints' CBOR).
#[derive(Deserialize)]
pub(super) struct ForestRepr {
    #[serde(default = "unversioned")]
    version: u32,
    config: ForestConfig,
    groups: Vec<Group>,
    shingle: Shingler,
    stored: u64,
}

impl TryFrom<ForestRepr> for Forest {
    type Error = RcfError;

    fn try_from(r: ForestRepr) -> Result<Self, RcfError> {
        check_version(r.version)?;
        // Every decoder checks, not only `from_json`: the checkpoints' CBOR
        // comes here too, and a forest restored unchecked panics later.
        let forest = Forest::restored(r.config, r.groups, r.shingle, r.stored);
        forest.check_consistency()?;
        Ok(forest)
    }
}
