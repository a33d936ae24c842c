//! Streaming telemetry → Parquet writer. Rows are buffered in Arrow builders
//! and handed to the Parquet encoder a batch at a time; row groups are capped
//! so readers can stream. Output bytes depend only on the rows written.

use std::io::Write;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Builder, RecordBatch, StringBuilder, TimestampMillisecondBuilder,
};
use features::{FIELD_COUNT, Field, Sample};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::error::DatasetError;
use crate::schema;

/// Rows per Arrow batch handed to the encoder: large enough to amortise the
/// per-batch cost, small enough (~30 MB of builders) to bound memory.
const BATCH_ROWS: usize = 64 * 1024;

/// Writer settings.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// Rows per row group: what a streaming reader holds at most.
    pub row_group_rows: usize,
    /// Snappy by default: fast to write, ~4x smaller than plain.
    pub compression: Compression,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            row_group_rows: 256 * 1024,
            compression: Compression::SNAPPY,
        }
    }
}

/// Writes [`Sample`]s as rows of [`schema::telemetry`].
pub struct TelemetryWriter<W: Write + Send> {
    inner: ArrowWriter<W>,
    ts: TimestampMillisecondBuilder,
    gpu: StringBuilder,
    topo: [StringBuilder; 5],
    metrics: Vec<Float64Builder>,
    rows: usize,
    written: u64,
}

impl<W: Write + Send> TelemetryWriter<W> {
    pub fn new(sink: W, opts: &WriterOptions) -> Result<Self, DatasetError> {
        let mut props = WriterProperties::builder()
            .set_compression(opts.compression)
            .set_max_row_group_row_count(Some(opts.row_group_rows))
            .set_created_by(format!("forewarn {}", env!("CARGO_PKG_VERSION")));
        // Float columns rarely repeat exactly; dictionary pages would cost
        // time and then be abandoned. Strings (gpu, host, …) repeat a lot.
        for f in Field::ALL {
            props = props.set_column_dictionary_enabled(ColumnPath::from(f.name()), false);
        }
        let inner = ArrowWriter::try_new(sink, schema::telemetry(), Some(props.build()))?;
        Ok(TelemetryWriter {
            inner,
            ts: TimestampMillisecondBuilder::with_capacity(BATCH_ROWS).with_timezone("UTC"),
            gpu: StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 40),
            topo: std::array::from_fn(|_| {
                StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 16)
            }),
            metrics: (0..FIELD_COUNT)
                .map(|_| Float64Builder::with_capacity(BATCH_ROWS))
                .collect(),
            rows: 0,
            written: 0,
        })
    }

    /// Appends one sample (unknown `extra` metrics are not part of the schema).
    pub fn push(&mut self, s: &Sample) -> Result<(), DatasetError> {
        self.ts.append_value(s.ts_ms);
        self.gpu.append_value(&*s.gpu);
        let t = &s.topo;
        for (b, v) in self
            .topo
            .iter_mut()
            .zip([&t.host, &t.rack, &t.cluster, &t.model, &t.job])
        {
            b.append_option(v.as_deref());
        }
        let presence = s.metrics.presence();
        for (i, b) in self.metrics.iter_mut().enumerate() {
            if presence >> i & 1 == 1 {
                // Field::ALL is dense: index i is a valid field.
                b.append_option(Field::from_index(i).and_then(|f| s.metrics.get(f)));
            } else {
                b.append_null();
            }
        }
        self.rows += 1;
        if self.rows == BATCH_ROWS {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> Result<(), DatasetError> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(7 + FIELD_COUNT);
        cols.push(Arc::new(self.ts.finish()));
        cols.push(Arc::new(self.gpu.finish()));
        cols.extend(
            self.topo
                .iter_mut()
                .map(|b| Arc::new(b.finish()) as ArrayRef),
        );
        cols.extend(
            self.metrics
                .iter_mut()
                .map(|b| Arc::new(b.finish()) as ArrayRef),
        );
        let batch = RecordBatch::try_new(schema::telemetry(), cols)?;
        self.inner.write(&batch)?;
        self.written += self.rows as u64;
        self.rows = 0;
        Ok(())
    }

    /// Rows accepted so far.
    pub fn rows(&self) -> u64 {
        self.written + self.rows as u64
    }

    /// Flushes everything and returns the sink.
    pub fn finish(mut self) -> Result<W, DatasetError> {
        self.flush_batch()?;
        Ok(self.inner.into_inner()?)
    }
}
