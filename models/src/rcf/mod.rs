//! Streaming random cut forest (Guha, Mishra, Roy, Schrijvers, "Robust Random
//! Cut Forest Based Anomaly Detection on Streams", ICML 2016), the unsupervised
//! anomaly scorer of the models stage.
//!
//! Rows of telemetry go in (`Forest::score_and_update`); a score of about 1
//! means ordinary, higher is stranger, and `DiVector` says which metric is too
//! high or too low. `ThresholdedForest` adds calibration (grade and flag) and a
//! snapshot of the whole state.
//!
//! # Layout
//! - `config.rs`: builder, defaults, `validate()`.
//! - `forest.rs`: the forest; `forest/batch.rs`: batches over parallel tree groups;
//!   `shingle.rs`: rows to points, missing values.
//! - `tree.rs`: compact tree with its leaves in order, insert/delete;
//!   `masses.rs`: leaf multiplicities; `box_cache.rs`: cached boxes, kept in `lines.rs`'s
//!   cache-line aligned storage; `boxes.rs`: box arithmetic; `traversal.rs`:
//!   paths, lockstep descent, score formula; `lookup.rs`: its point and
//!   node-table reads;
//!   `climb.rs`: the climb that scores and plans insertion; `geo.rs`: its
//!   point and running box (SIMD for 2, 3, 4, 6, 8, 12, 16, 32 dims);
//!   `kernel.rs`: the score-only climb and leaf scan on SIMD points;
//!   `isa.rs`: the scoring loop and its variants per instruction set, chosen at run time;
//!   `avx8.rs`: its x86-64-v3 climb at 8 dimensions;
//!   `invariants.rs`: self-checks.
//! - `sampler.rs`: time-decayed reservoir; `point_store.rs`: shared points.
//! - `attribution.rs`: `DiVector`; `thresholded.rs`: forest + calibration.
//! - `snapshot.rs`: the snapshot format version.
//! - `error.rs`: `RcfError`.

mod attribution;
#[cfg(target_arch = "x86_64")]
mod avx8;
#[macro_use]
mod boxes;
mod box_cache;
mod climb;
mod config;
mod error;
mod forest;
mod geo;
mod invariants;
mod isa;
mod kernel;
mod lines;
mod lookup;
mod masses;
mod point_store;
mod sampler;
mod shingle;
mod snapshot;
mod thresholded;
mod traversal;
mod tree;

pub use attribution::{DiVector, Direction};
pub use config::{ForestBuilder, ForestConfig};
pub use error::RcfError;
pub use forest::Forest;
pub use shingle::VALUE_LIMIT;
pub use thresholded::{Explanation, ThresholdedForest, Verdict, reason_label};
pub use tree::MAX_SAMPLE_SIZE;

#[cfg(test)]
mod reference;
#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;
