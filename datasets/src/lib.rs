//! # datasets
//!
//! Data at rest for forewarn: what the pipeline is tested, trained and
//! judged on, and what the service leaves behind. Beside `features` (whose
//! types it writes and reads) and below `detector` (whose commands and
//! export threads call it); synchronous, no network.
//!
//! Layout:
//! - [`simulator`]: the seeded fleet simulator: topology, jobs, physics,
//!   failure modes with ground-truth labels, benign events, dirty data.
//! - [`scenarios`]: the named, seeded simulator runs of the scenario suite
//!   (`forewarn evaluate --scenario`) and what each should produce.
//! - [`schema`]: the versioned Arrow schemas of telemetry and labels.
//! - [`parquet`]: telemetry as Parquet: a deterministic writer and a
//!   streaming reader.
//! - [`export`]: the service's Parquet exports (feature rows, risk scores,
//!   alert events), partitioned by event date and hour, and their readers.
//! - [`labels`]: failure labels, as the contract's `gpu,ts,kind` CSV or the
//!   simulator's Parquet.
//! - [`training`]: the failure model's training, calibration and validation
//!   sets from feature exports and labels.
//! - [`error`]: [`DatasetError`], naming the file, row or column.
//!
//! Readers are streaming: a row group at a time, so memory is bounded
//! whatever the file size. Writers are deterministic: the same rows give the
//! same bytes.

pub mod error;
pub mod export;
pub mod labels;
pub mod parquet;
pub mod scenarios;
pub mod schema;
pub mod simulator;
pub mod training;

pub use error::DatasetError;
pub use labels::Label;
