//! The feature-row table: one row per accepted sample as the feature stage
//! ([`features::FeatureEngine`]) produced it. The one implementation behind
//! both `forewarn features` (one file, [`FeatureFileWriter`]) and the
//! service's continuous export ([`FeatureTable`] in a
//! [`PartitionedWriter`](super::PartitionedWriter)).
//!
//! Columns: `ts_ms` (Int64, epoch ms UTC), `gpu`, the topology columns
//! `host`, `rack`, `cluster`, `model`, `job`, `phase_label`, then one
//! `Float32` column per [`FEATURE_NAMES`] entry (NaN = missing, never null).
//! The feature schema version is the key-value metadata
//! [`FEATURE_VERSION_KEY`].

use std::io::Write;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float32Array, Int64Array, StringBuilder};
use arrow::datatypes::{DataType, Field as ArrowField, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use features::{FEATURE_NAMES, FEATURE_SCHEMA_VERSION, FeatureRow};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::ExportError;
use super::table::{ExportTable, base_properties};

/// Key-value metadata key holding [`FEATURE_SCHEMA_VERSION`].
pub const FEATURE_VERSION_KEY: &str = "forewarn.feature_schema_version";
/// String columns after `ts_ms` and `gpu`.
pub const FEATURE_TOPOLOGY_COLUMNS: [&str; 6] =
    ["host", "rack", "cluster", "model", "job", "phase_label"];

/// The Arrow schema of feature rows.
pub fn feature_schema() -> SchemaRef {
    let mut fields = vec![
        ArrowField::new("ts_ms", DataType::Int64, false),
        ArrowField::new("gpu", DataType::Utf8, false),
    ];
    for name in FEATURE_TOPOLOGY_COLUMNS {
        fields.push(ArrowField::new(name, DataType::Utf8, true));
    }
    for name in FEATURE_NAMES {
        fields.push(ArrowField::new(name, DataType::Float32, true));
    }
    Arc::new(Schema::new(fields))
}

/// Parquet settings of feature files: the schema version in key-value
/// metadata, zstd, no dictionary or statistics on the feature columns.
pub fn feature_properties() -> WriterProperties {
    base_properties(
        vec![KeyValue::new(
            FEATURE_VERSION_KEY.to_string(),
            FEATURE_SCHEMA_VERSION.to_string(),
        )],
        FEATURE_NAMES,
    )
    .build()
}

/// Rows → one record batch of `schema` (which must be [`feature_schema`]).
pub fn feature_batch(schema: &SchemaRef, rows: &[FeatureRow]) -> Result<RecordBatch, ExportError> {
    let n = rows.len();
    let ts: Int64Array = rows.iter().map(|r| r.ts_ms).collect::<Vec<_>>().into();
    let mut gpu = StringBuilder::with_capacity(n, n * 40);
    let mut topo: [StringBuilder; 6] =
        std::array::from_fn(|_| StringBuilder::with_capacity(n, n * 12));
    for r in rows {
        gpu.append_value(&*r.gpu);
        let t = &r.topo;
        for (b, v) in topo
            .iter_mut()
            .zip([&t.host, &t.rack, &t.cluster, &t.model, &t.job])
        {
            b.append_option(v.as_deref());
        }
        topo[5].append_value(r.phase.label());
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(8 + FEATURE_NAMES.len());
    columns.push(Arc::new(ts));
    columns.push(Arc::new(gpu.finish()));
    columns.extend(topo.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    for i in 0..FEATURE_NAMES.len() {
        let col: Vec<f32> = rows.iter().map(|r| r.values[i]).collect();
        columns.push(Arc::new(Float32Array::from(col)));
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(|source| ExportError::Batch {
        table: "features".to_string(),
        source,
    })
}

/// The feature table for a [`PartitionedWriter`](super::PartitionedWriter).
#[derive(Debug, Clone)]
pub struct FeatureTable {
    schema: SchemaRef,
}

impl FeatureTable {
    pub fn new() -> Self {
        FeatureTable {
            schema: feature_schema(),
        }
    }
}

impl Default for FeatureTable {
    fn default() -> Self {
        FeatureTable::new()
    }
}

impl ExportTable for FeatureTable {
    type Row = FeatureRow;

    fn name(&self) -> &str {
        "features"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn properties(&self) -> WriterProperties {
        feature_properties()
    }

    fn event_ms(row: &FeatureRow) -> i64 {
        row.ts_ms
    }

    fn gpu(row: &FeatureRow) -> Option<&str> {
        Some(&row.gpu)
    }

    fn to_batch(&self, rows: &[FeatureRow]) -> Result<RecordBatch, ExportError> {
        feature_batch(&self.schema, rows)
    }
}

/// Feature rows into one Parquet file (or any sink): what `forewarn
/// features` writes. Each [`write_rows`](Self::write_rows) call becomes one
/// record batch; the encoder cuts row groups at its default size.
pub struct FeatureFileWriter<W: Write + Send> {
    writer: ArrowWriter<W>,
    schema: SchemaRef,
    /// What errors call the sink.
    name: String,
    rows: u64,
}

impl<W: Write + Send> FeatureFileWriter<W> {
    /// `name` is what errors call the sink (usually its path).
    pub fn new(sink: W, name: &str) -> Result<Self, ExportError> {
        let schema = feature_schema();
        let writer = ArrowWriter::try_new(sink, schema.clone(), Some(feature_properties()))
            .map_err(|e| ExportError::parquet(std::path::Path::new(name), e))?;
        Ok(FeatureFileWriter {
            writer,
            schema,
            name: name.to_string(),
            rows: 0,
        })
    }

    /// Appends rows (nothing to do for none).
    pub fn write_rows(&mut self, rows: &[FeatureRow]) -> Result<(), ExportError> {
        if rows.is_empty() {
            return Ok(());
        }
        let batch = feature_batch(&self.schema, rows)?;
        self.writer
            .write(&batch)
            .map_err(|e| ExportError::parquet(std::path::Path::new(&self.name), e))?;
        self.rows += rows.len() as u64;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the footer and returns the sink.
    pub fn finish(self) -> Result<W, ExportError> {
        self.writer
            .into_inner()
            .map_err(|e| ExportError::parquet(std::path::Path::new(&self.name), e))
    }
}
