//! # datasets
//!
//! Data at rest for forewarn: the seeded fleet simulator with ground-truth
//! labels ([`simulator`]), the Arrow / Parquet schemas, streaming writers and
//! readers of telemetry ([`parquet`]), and failure labels ([`labels`]).
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
