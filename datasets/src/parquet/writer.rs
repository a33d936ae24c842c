//! Streaming telemetry → Parquet writer. Rows are buffered in Arrow builders
//! and handed to the Parquet encoder a batch at a time; row groups are capped
//! so readers can stream. Output bytes depend only on the rows written.

use std::io::Write;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, RecordBatch, StringBuilder, TimestampMillisecondBuilder, new_null_array,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use features::{FIELD_COUNT, Field, Sample};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
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
    /// Metric values staged column by column (sequential writes), turned
    /// into arrays in bulk at flush: a column no row reported becomes one
    /// null array, a column every row reported a vector with no null bitmap.
    columns: Vec<Vec<f64>>,
    presence: Vec<u64>,
    rows: usize,
    written: u64,
}

impl<W: Write + Send> TelemetryWriter<W> {
    pub fn new(sink: W, opts: &WriterOptions) -> Result<Self, DatasetError> {
        let mut props = WriterProperties::builder()
            .set_compression(opts.compression)
            .set_max_row_group_row_count(Some(opts.row_group_rows))
            .set_created_by(format!("forewarn {}", env!("CARGO_PKG_VERSION")))
            // Row-group (chunk) min/max are what readers prune on; per-page
            // statistics on 56 columns cost a fifth of the write time.
            .set_statistics_enabled(EnabledStatistics::Chunk);
        // Float columns rarely repeat exactly; dictionary pages would cost
        // time and then be abandoned. Strings (gpu, host, …) repeat a lot.
        // Per-metric statistics are rarely pruned on and cost ~5% of writing.
        for f in Field::ALL {
            let col = ColumnPath::from(f.name());
            props = props
                .set_column_dictionary_enabled(col.clone(), false)
                .set_column_statistics_enabled(col, EnabledStatistics::None);
        }
        let inner = ArrowWriter::try_new(sink, schema::telemetry(), Some(props.build()))?;
        Ok(TelemetryWriter {
            inner,
            ts: TimestampMillisecondBuilder::with_capacity(BATCH_ROWS).with_timezone("UTC"),
            gpu: StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 40),
            topo: std::array::from_fn(|_| {
                StringBuilder::with_capacity(BATCH_ROWS, BATCH_ROWS * 16)
            }),
            columns: (0..FIELD_COUNT)
                .map(|_| Vec::with_capacity(BATCH_ROWS))
                .collect(),
            presence: Vec::with_capacity(BATCH_ROWS),
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
        for (col, v) in self.columns.iter_mut().zip(s.metrics.raw_values()) {
            col.push(*v);
        }
        self.presence.push(s.metrics.presence());
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
        let any = self.presence.iter().fold(0u64, |a, p| a | p);
        let all = self.presence.iter().fold(u64::MAX, |a, p| a & p);
        for i in 0..FIELD_COUNT {
            let col: ArrayRef = if any >> i & 1 == 0 {
                new_null_array(&DataType::Float64, self.rows)
            } else {
                let vals = std::mem::replace(&mut self.columns[i], Vec::with_capacity(BATCH_ROWS));
                let nulls = (all >> i & 1 == 0)
                    .then(|| NullBuffer::from_iter(self.presence.iter().map(|p| p >> i & 1 == 1)));
                Arc::new(Float64Array::new(vals.into(), nulls))
            };
            cols.push(col);
        }
        for col in &mut self.columns {
            col.clear();
        }
        self.presence.clear();
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
