//! Streaming reader of the feature export (`forewarn features`): one record
//! batch at a time, GPU names interned to dense indices, every row handed to
//! a callback as (GPU index, host index, ts, values). Checks the file's
//! feature-schema version first.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use arrow::array::{Array, Float32Array, Int64Array, StringArray};
use features::{FEATURE_COUNT, FEATURE_NAMES, FEATURE_SCHEMA_VERSION};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::DatasetError;

/// The metadata key the feature export stores its schema version under.
pub const SCHEMA_VERSION_KEY: &str = "forewarn.feature_schema_version";

/// Dense indices for GPU and host names.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    pub names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Interner {
    pub fn get_or_insert(&mut self, name: &str) -> u32 {
        if let Some(i) = self.index.get(name) {
            return *i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }

    pub fn get(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// One row as the callback sees it.
pub struct RowRef<'a> {
    pub gpu: u32,
    pub host: u32,
    pub ts_ms: i64,
    /// All feature columns, NaN = missing.
    pub values: &'a [f32; FEATURE_COUNT],
}

/// Reads `path`, calling `f` for every row in file order. `cols` limits the
/// feature columns read (others are NaN); `None` reads all.
pub fn for_each_row(
    path: &Path,
    gpus: &mut Interner,
    hosts: &mut Interner,
    cols: Option<&[usize]>,
    mut f: impl FnMut(&RowRef<'_>),
) -> Result<u64, DatasetError> {
    let schema_err = |message: String| DatasetError::Schema {
        path: path.display().to_string(),
        message,
    };
    let file = File::open(path).map_err(|e| DatasetError::io(path.display(), e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
    let version = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == SCHEMA_VERSION_KEY))
        .and_then(|k| k.value.clone());
    match version.as_deref().map(str::parse::<u32>) {
        Some(Ok(v)) if v == FEATURE_SCHEMA_VERSION => {}
        Some(Ok(v)) => {
            return Err(schema_err(format!(
                "feature schema version {v}, this build reads version \
                 {FEATURE_SCHEMA_VERSION}: written by another forewarn release; \
                 train on exports written since the upgrade (--since) or re-export \
                 the telemetry with `forewarn features`"
            )));
        }
        _ => {
            return Err(schema_err(
                "no feature schema version: not a `forewarn features` export".into(),
            ));
        }
    }
    let arrow_schema = builder.schema().clone();
    let idx = |name: &str| {
        arrow_schema
            .index_of(name)
            .map_err(|_| schema_err(format!("missing column {name}")))
    };
    let wanted: Vec<usize> = match cols {
        Some(c) => c.to_vec(),
        None => (0..FEATURE_COUNT).collect(),
    };
    let mut roots = vec![idx("ts_ms")?, idx("gpu")?, idx("host")?];
    for &c in &wanted {
        let name = FEATURE_NAMES
            .get(c)
            .ok_or_else(|| schema_err(format!("no feature column {c}")))?;
        roots.push(idx(name)?);
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(65_536)
        .build()?;
    let mut values = [f32::NAN; FEATURE_COUNT];
    let mut n = 0u64;
    for batch in reader {
        let batch = batch?;
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| schema_err(format!("missing column {name}")))
        };
        let ts = col("ts_ms")?
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or_else(|| schema_err("ts_ms is not Int64".into()))?;
        let gpu = col("gpu")?
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| schema_err("gpu is not Utf8".into()))?;
        let host = col("host")?
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or_else(|| schema_err("host is not Utf8".into()))?;
        let mut fcols: Vec<(usize, &Float32Array)> = Vec::with_capacity(wanted.len());
        for &c in &wanted {
            let a = col(FEATURE_NAMES[c])?
                .as_any()
                .downcast_ref::<Float32Array>()
                .ok_or_else(|| schema_err(format!("{} is not Float32", FEATURE_NAMES[c])))?;
            fcols.push((c, a));
        }
        // Consecutive rows mostly alternate GPUs; cache the last lookup.
        let mut last: Option<(usize, u32, u32)> = None;
        for i in 0..batch.num_rows() {
            let g = gpu.value(i);
            let (gi, hi) = match last {
                Some((li, gi, hi)) if gpu.value(li) == g => (gi, hi),
                _ => {
                    let gi = gpus.get_or_insert(g);
                    let hi = if host.is_null(i) {
                        hosts.get_or_insert("")
                    } else {
                        hosts.get_or_insert(host.value(i))
                    };
                    (gi, hi)
                }
            };
            last = Some((i, gi, hi));
            for (c, a) in &fcols {
                values[*c] = if a.is_null(i) { f32::NAN } else { a.value(i) };
            }
            f(&RowRef {
                gpu: gi,
                host: hi,
                ts_ms: ts.value(i),
                values: &values,
            });
            n += 1;
        }
    }
    Ok(n)
}
