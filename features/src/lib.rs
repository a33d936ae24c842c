//! # features
//!
//! The first stage of forewarn's pipeline and the types every other crate
//! speaks: telemetry [`Sample`]s, the DCGM [`Field`] table, the decoders for
//! every encoding of the telemetry contract, event-time helpers, and the
//! workload-aware feature stage ([`FeatureEngine`]).
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
//! - [`config`]: `FeatureConfig` (serde, documented defaults, `validate`).
//! - [`engine`]: `FeatureEngine`: samples → `FeatureRow`s + `FeatureEvent`s,
//!   per sample (`process`) or per batch (`process_batch`); serde for
//!   checkpoints.
//! - [`vector`]: the versioned feature layout: `Col`, `FEATURE_NAMES`,
//!   `FEATURE_SCHEMA_VERSION`, `FeatureRow`.
//! - [`state`]: per-GPU state: counters → rates and resets, arrival order
//!   and gaps, event-time smoothing.
//! - [`xid`]: XID classification (NVIDIA's Xid catalog) and job attribution.
//! - [`phase`]: workload phase (idle / light / training / inference).
//! - [`expected`]: per-SKU, per-phase RLS models of a healthy GPU; residuals.
//! - [`peers`]: cohorts and streaming median / MAD → peer z-scores.

pub mod admission;
pub mod config;
pub mod decode;
pub mod engine;
pub mod error;
pub mod expected;
pub mod field;
pub mod hash;
pub mod peers;
pub mod phase;
pub mod rng;
pub mod sample;
pub mod state;
pub mod time;
pub mod vector;
pub mod xid;

pub use config::{ConfigError, FeatureConfig};
pub use decode::{DecodeOutput, Encoding, decode, sniff};
pub use engine::{Disposition, EngineCounters, FeatureEngine, FeatureEvent, Rejected};
pub use error::DecodeError;
pub use field::{FIELD_COUNT, Field, FieldKind};
pub use phase::Phase;
pub use sample::{GpuId, Metrics, Sample, Topology};
pub use vector::{Col, FEATURE_COUNT, FEATURE_NAMES, FEATURE_SCHEMA_VERSION, FeatureRow};
pub use xid::{XidBlame, XidClass};
