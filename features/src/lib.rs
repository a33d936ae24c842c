//! # features
//!
//! The first stage of forewarn's pipeline and the types every other crate
//! speaks: telemetry [`Sample`]s, the DCGM [`Field`] table, the decoders for
//! every encoding of the telemetry contract, event-time helpers, and (in
//! later modules) per-GPU state and workload-aware features.
//!
//! Pure and synchronous: no I/O, no async, no clocks. Event time comes from
//! the data, so a backtest and the live service compute the same thing.
//!
//! Layout:
//! - [`field`]: the DCGM fields, their names, aliases and kinds.
//! - [`sample`]: `Sample`, `Metrics` (missing = absent), `Topology`.
//! - [`decode`]: sniffing and the four decoders.
//! - [`time`]: RFC 3339 / epoch-ms parsing and formatting.
//! - [`error`]: `DecodeError` with a stable reason label per variant.

pub mod decode;
pub mod error;
pub mod field;
pub mod sample;
pub mod time;

pub use decode::{DecodeOutput, Encoding, decode, sniff};
pub use error::DecodeError;
pub use field::{FIELD_COUNT, Field, FieldKind};
pub use sample::{GpuId, Metrics, Sample, Topology};
