//! Streaming Parquet → telemetry reader: yields samples a record batch at a
//! time. Columns are matched by name, so files with fewer metric columns
//! (older schema versions, other writers) still read; a missing `ts` or `gpu`
//! column is a schema error naming the file.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, Float64Array, RecordBatch, StringArray, TimestampMillisecondArray};
use features::{Field, Sample};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use crate::error::DatasetError;
use crate::schema::TOPOLOGY_COLUMNS;

/// Rows per decoded batch.
const READ_BATCH_ROWS: usize = 8 * 1024;

/// Reads [`Sample`]s from a telemetry Parquet file.
pub struct TelemetryReader {
    path: String,
    batches: ParquetRecordBatchReader,
    rows: u64,
    interned: HashMap<Box<str>, Arc<str>>,
}

impl TelemetryReader {
    pub fn open(path: &Path) -> Result<Self, DatasetError> {
        let f = File::open(path).map_err(|e| DatasetError::io(path.display(), e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(f)?;
        let rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
        let batches = builder.with_batch_size(READ_BATCH_ROWS).build()?;
        Ok(TelemetryReader {
            path: path.display().to_string(),
            batches,
            rows,
            interned: HashMap::new(),
        })
    }

    /// Rows in the file (from its footer), for progress bars.
    pub fn total_rows(&self) -> u64 {
        self.rows
    }

    /// The next batch of samples, or `None` at the end of the file.
    pub fn next_batch(&mut self, out: &mut Vec<Sample>) -> Result<Option<usize>, DatasetError> {
        let Some(batch) = self.batches.next() else {
            return Ok(None);
        };
        let batch = batch?;
        self.convert(&batch, out)?;
        Ok(Some(batch.num_rows()))
    }

    fn intern(map: &mut HashMap<Box<str>, Arc<str>>, s: &str) -> Arc<str> {
        if let Some(a) = map.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        map.insert(s.into(), a.clone());
        a
    }

    fn convert(&mut self, batch: &RecordBatch, out: &mut Vec<Sample>) -> Result<(), DatasetError> {
        let mismatch = |message: String| DatasetError::Schema {
            path: self.path.clone(),
            message,
        };
        let ts = batch
            .column_by_name("ts")
            .and_then(|c| c.as_any().downcast_ref::<TimestampMillisecondArray>())
            .ok_or_else(|| mismatch("no `ts` timestamp(ms) column".into()))?;
        let gpu = batch
            .column_by_name("gpu")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| mismatch("no `gpu` string column".into()))?;
        let topo: Vec<Option<&StringArray>> = TOPOLOGY_COLUMNS
            .iter()
            .map(|c| {
                batch
                    .column_by_name(c)
                    .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            })
            .collect();
        let metrics: Vec<(Field, &Float64Array)> = Field::ALL
            .iter()
            .filter_map(|f| {
                let col = batch.column_by_name(f.name())?;
                Some((*f, col.as_any().downcast_ref::<Float64Array>()?))
            })
            .collect();
        out.reserve(batch.num_rows());
        for i in 0..batch.num_rows() {
            if ts.is_null(i) || gpu.is_null(i) {
                return Err(mismatch(format!("row {i}: null ts or gpu")));
            }
            let mut s = Sample::new(Self::intern(&mut self.interned, gpu.value(i)), ts.value(i));
            let mut text = |j: usize| {
                topo[j]
                    .filter(|a| !a.is_null(i))
                    .map(|a| Self::intern(&mut self.interned, a.value(i)))
            };
            s.topo.host = text(0);
            s.topo.rack = text(1);
            s.topo.cluster = text(2);
            s.topo.model = text(3);
            s.topo.job = text(4);
            for (f, col) in &metrics {
                if !col.is_null(i) {
                    s.metrics.set(*f, col.value(i));
                }
            }
            out.push(s);
        }
        Ok(())
    }
}
