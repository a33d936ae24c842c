//! Streaming random cut forest (Guha, Mishra, Roy, Schrijvers, "Robust Random
//! Cut Forest Based Anomaly Detection on Streams", ICML 2016), the unsupervised
//! anomaly scorer of the models stage.
//!
//! Rows of telemetry go in (`Forest::score_and_update`); a score of about 1
//! means ordinary, higher is stranger, and `DiVector` says which metric is too
//! high or too low. `ThresholdedForest` adds input normalisation and the
//! thresholded grader (`crate::grading`) and a snapshot of the whole state.
//!
//! # Layout
//! - `config.rs`: builder, defaults, `validate()`; `error.rs`: `RcfError`.
//! - `forest.rs`: the forest; `forest/batch.rs`: batches over parallel tree
//!   groups; `shingle.rs`: rows to points, missing values.
//! - `tree/`: the compact tree with its leaves in order, insert/delete
//!   (`mod.rs`); `masses.rs`: leaf multiplicities; `box_cache.rs`: cached
//!   boxes, kept in `lines.rs`'s cache-line aligned storage;
//!   `invariants.rs`: self-checks.
//! - `score/`: the fast scoring paths: `traversal.rs` (paths, lockstep
//!   descent, score formula) and `lookup.rs` (its table reads); `climb.rs`
//!   (the climb that scores and plans insertion) and `geo.rs` (its SIMD
//!   point and running box); `kernel.rs` (score-only climb and leaf scan);
//!   `isa.rs` (the scoring and learning loops and their
//!   per-instruction-set variants, with the one list of target features)
//!   and `avx8.rs` (the x86-64-v3 climb at 8 dimensions).
//! - `store/`: `point_store.rs` (shared points) and `sampler.rs`
//!   (time-decayed reservoir).
//! - `boxes.rs`: box arithmetic; `attribution.rs`: `DiVector`;
//!   `thresholded.rs`: forest + grader; `snapshot.rs`: the snapshot
//!   format version.
//! - `reference/` (tests only): the plain recursive scorer from the paper
//!   that every fast path is checked against, bit for bit.

mod attribution;
#[macro_use]
mod boxes;
mod config;
mod error;
mod forest;
mod score;
mod shingle;
mod snapshot;
mod store;
mod thresholded;
mod tree;

// The moved modules keep their old paths (`super::traversal`, …) for
// the files that stay at this level.
use score::{climb, geo, isa, kernel, lookup, traversal};
use store::{point_store, sampler};
use tree::{lines, masses};

pub use attribution::{DiVector, Direction};
pub use config::{ForestBuilder, ForestConfig};
pub use error::RcfError;
pub use forest::Forest;
pub use shingle::VALUE_LIMIT;
pub(crate) use thresholded::ThresholdedRepr;
pub use thresholded::{Explanation, ThresholdedForest, Verdict, reason_label};
pub use tree::MAX_SAMPLE_SIZE;

#[cfg(test)]
mod known_tests;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod stuck_tests;
#[cfg(test)]
mod tests;
