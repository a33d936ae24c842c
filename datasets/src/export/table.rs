//! The [`ExportTable`] trait: what the [`PartitionedWriter`] needs to know
//! about one exported table (its directory name, schema, Parquet settings,
//! a row's event time and GPU, and how rows become an Arrow batch), plus the
//! writer settings the tables share.
//!
//! [`PartitionedWriter`]: super::PartitionedWriter

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesBuilder};
use parquet::schema::types::ColumnPath;

use super::ExportError;

/// Key-value metadata key of the table name (`features`, `scores`, `alerts`).
pub const TABLE_KEY: &str = "forewarn.table";

/// One exported table. Implementations are cheap to query: the writer asks
/// for the event time and GPU of every row.
pub trait ExportTable: Send {
    /// One row, as the pipeline holds it. Cloned only when the row is kept
    /// (after sampling), then buffered until a row group is written.
    type Row: Clone + Send;

    /// Directory name under the export root, e.g. `features`.
    fn name(&self) -> &str;

    /// The Arrow schema of every file of the table.
    fn schema(&self) -> SchemaRef;

    /// Parquet settings, including the schema version as key-value metadata.
    fn properties(&self) -> WriterProperties;

    /// Event time of the row, epoch ms UTC: it picks the partition.
    fn event_ms(row: &Self::Row) -> i64;

    /// The GPU a row is about, for per-GPU sampling; `None` keeps the row
    /// whatever the sampling.
    fn gpu(row: &Self::Row) -> Option<&str>;

    /// Rows → one record batch of [`ExportTable::schema`].
    fn to_batch(&self, rows: &[Self::Row]) -> Result<RecordBatch, ExportError>;
}

/// Writer settings shared by the tables: zstd level 1 (what `forewarn
/// features` always used), chunk-level statistics only (readers prune on
/// row-group min/max; per-page statistics cost time), no dictionary or
/// statistics on the listed float columns (values rarely repeat exactly;
/// the same choice as the telemetry writer).
pub(crate) fn base_properties<'a>(
    metadata: Vec<KeyValue>,
    float_columns: impl IntoIterator<Item = &'a str>,
) -> WriterPropertiesBuilder {
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_key_value_metadata(Some(metadata));
    for name in float_columns {
        let col = ColumnPath::from(name);
        props = props
            .set_column_dictionary_enabled(col.clone(), false)
            .set_column_statistics_enabled(col, EnabledStatistics::None);
    }
    props
}
