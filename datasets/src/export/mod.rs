//! Parquet exports: the service continuously writes feature rows, risk
//! scores and alert events as Parquet, partitioned by event date and hour,
//! for `forewarn train` and offline analysis (`docs/exports.md`).
//!
//! - [`ExportTable`]: a table's name, schema, settings and row → batch
//!   conversion; implemented by [`FeatureTable`], [`ScoreTable`] and
//!   [`AlertTable`].
//! - [`PartitionedWriter`]: rows → `<root>/<table>/date=…/hour=…/part-….parquet`,
//!   atomic (`.tmp` then rename), bounded memory, rolled on the hour plus a
//!   lateness grace, caps, flush and close.
//! - [`FeatureFileWriter`]: feature rows into a single file (`forewarn
//!   features`), the same schema and settings.
//! - [`list_files`] / [`read_file`]: finding and reading finished files.
//!
//! Synchronous like the rest of the crate: the detector calls it from the
//! threads that own the rows (shard or alert threads), one writer each.

mod alerts;
mod error;
mod features;
pub mod layout;
mod reader;
mod scores;
mod table;
mod writer;

pub use alerts::{ALERT_LABEL_COLUMNS, ALERTS_SCHEMA_VERSION, AlertRow, AlertTable};
pub use error::ExportError;
pub use features::{
    FEATURE_TOPOLOGY_COLUMNS, FEATURE_VERSION_KEY, FeatureFileWriter, FeatureTable, feature_batch,
    feature_properties, feature_schema,
};
pub use reader::{ExportFile, list_files, metadata_value, read_file};
pub use scores::{COMPONENT_PREFIX, COMPONENTS_KEY, SCORES_SCHEMA_VERSION, ScoreRow, ScoreTable};
pub use table::{ExportTable, TABLE_KEY};
pub use writer::{ExportConfig, ExportStats, PartitionedWriter};
