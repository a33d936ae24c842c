//! Where training rows come from: one `--data` argument resolved into a
//! [`Dataset`] and read back as one fleet, in event-time order.
//!
//! An argument is one of:
//! - a single feature file (`forewarn features --out …`), read in file order;
//! - the service's export root (`forewarn-export/`, holding `features/`) or a
//!   table directory (`forewarn-export/features`): every finished
//!   `part-….parquet` file under its `date=…/hour=…` partitions (never the
//!   `.parquet.tmp` files being written), from every writer and shard.
//!
//! The files of one dataset are one fleet: GPU names are interned once for
//! all of them, so a GPU's history is stitched across hours, writers and
//! restarts. Rows of one hour partition are read from all its files into a
//! buffer and stably sorted by event time before they are handed on, so
//! every GPU's rows arrive in event-time order (late rows written to a later
//! file of an old partition included). Memory is one hour partition of
//! rows, whatever the number of days read. `--since` / `--until` pick the
//! partitions overlapping the range and then filter rows on their time.

use std::path::{Path, PathBuf};

use features::FEATURE_COUNT;

use super::reader::{Interner, RowRef, for_each_row};
use crate::error::DatasetError;
use crate::export::{ExportError, list_files};

/// One file of a dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    pub path: PathBuf,
    /// Start of the file's hour partition (exports only).
    pub hour_start_ms: Option<i64>,
}

/// The files of one `--data` argument, read as one fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    /// The argument as given (what reports and errors call it).
    pub name: String,
    pub files: Vec<DataFile>,
    /// The export root, when the argument is (or is under) one: where the
    /// `alerts` and `scores` tables are.
    pub export_root: Option<PathBuf>,
    /// Rows before this event time are skipped (epoch ms).
    pub since_ms: Option<i64>,
    /// Rows at or after this event time are skipped.
    pub until_ms: Option<i64>,
}

/// Why an argument is not a dataset.
fn not_data(path: &Path, message: impl Into<String>) -> DatasetError {
    DatasetError::Schema {
        path: path.display().to_string(),
        message: message.into(),
    }
}

fn export_err(e: ExportError) -> DatasetError {
    DatasetError::Schema {
        path: String::new(),
        message: e.to_string(),
    }
}

fn has_partitions(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten().any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("date="))
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
    })
}

impl Dataset {
    /// Resolves `path` (a feature file, an export root or a table
    /// directory) into its files overlapping `[since_ms, until_ms)`.
    pub fn open(
        path: &Path,
        since_ms: Option<i64>,
        until_ms: Option<i64>,
    ) -> Result<Dataset, DatasetError> {
        let meta = std::fs::metadata(path).map_err(|e| DatasetError::io(path.display(), e))?;
        let name = path.display().to_string();
        if let (Some(s), Some(u)) = (since_ms, until_ms)
            && s >= u
        {
            return Err(not_data(path, "--since must be before --until"));
        }
        if meta.is_file() {
            return Ok(Dataset {
                name,
                files: vec![DataFile {
                    path: path.to_path_buf(),
                    hour_start_ms: None,
                }],
                export_root: None,
                since_ms,
                until_ms,
            });
        }
        let (root, table) = if path.join("features").is_dir() {
            (path.to_path_buf(), "features".to_string())
        } else if has_partitions(path) {
            let table = path
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| not_data(path, "a table directory needs a name"))?
                .to_string();
            let root = path
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
            (root, table)
        } else {
            return Err(not_data(
                path,
                "neither a feature file, an export root (no features/ directory) \
                 nor a table directory (no date=YYYY-MM-DD partitions)",
            ));
        };
        if table != "features" {
            return Err(not_data(
                path,
                format!(
                    "this is the `{table}` table; train on the `features` table \
                     (or the export root)"
                ),
            ));
        }
        let files = list_files(
            &root,
            &table,
            since_ms.unwrap_or(i64::MIN),
            until_ms.unwrap_or(i64::MAX),
        )
        .map_err(export_err)?;
        if files.is_empty() {
            let range = match (since_ms, until_ms) {
                (None, None) => String::new(),
                (s, u) => format!(
                    " between {} and {}",
                    s.map_or("the start".into(), features::time::format_rfc3339_s),
                    u.map_or("the end".into(), features::time::format_rfc3339_s)
                ),
            };
            return Err(not_data(
                path,
                format!(
                    "no finished feature files{range} (files still being written, \
                     *.parquet.tmp, are not read; is the service exporting features?)"
                ),
            ));
        }
        Ok(Dataset {
            name,
            files: files
                .into_iter()
                .map(|f| DataFile {
                    path: f.path,
                    hour_start_ms: Some(f.hour_start_ms),
                })
                .collect(),
            export_root: Some(root),
            since_ms,
            until_ms,
        })
    }

    /// Whether `ts_ms` is inside the time range.
    pub fn contains(&self, ts_ms: i64) -> bool {
        self.since_ms.is_none_or(|s| ts_ms >= s) && self.until_ms.is_none_or(|u| ts_ms < u)
    }

    /// Calls `f` for every row in range; `ordered` sorts each hour
    /// partition's rows by event time first (needed by stateful model
    /// inputs, not by order-free scans). `file_done(i)` is called after the
    /// i-th file (or hour) is read. Returns the rows handed to `f`.
    pub fn for_each_row(
        &self,
        gpus: &mut Interner,
        hosts: &mut Interner,
        cols: Option<&[usize]>,
        ordered: bool,
        mut f: impl FnMut(&RowRef<'_>),
        mut file_done: impl FnMut(usize),
    ) -> Result<u64, DatasetError> {
        let mut n = 0u64;
        if !ordered || self.export_root.is_none() {
            for (i, file) in self.files.iter().enumerate() {
                for_each_row(&file.path, gpus, hosts, cols, |r| {
                    if self.contains(r.ts_ms) {
                        n += 1;
                        f(r);
                    }
                })?;
                file_done(i + 1);
            }
            return Ok(n);
        }
        let mut buf = HourBuffer::default();
        let mut i = 0;
        while i < self.files.len() {
            let hour = self.files[i].hour_start_ms;
            buf.clear();
            while i < self.files.len() && self.files[i].hour_start_ms == hour {
                for_each_row(&self.files[i].path, gpus, hosts, cols, |r| {
                    if self.contains(r.ts_ms) {
                        buf.push(r);
                    }
                })?;
                i += 1;
            }
            n += buf.emit(&mut f);
            file_done(i);
        }
        Ok(n)
    }
}

/// The rows of one hour partition, to be sorted by event time.
#[derive(Default)]
struct HourBuffer {
    ts: Vec<i64>,
    gpu: Vec<u32>,
    host: Vec<u32>,
    values: Vec<f32>,
    order: Vec<u32>,
}

impl HourBuffer {
    fn clear(&mut self) {
        self.ts.clear();
        self.gpu.clear();
        self.host.clear();
        self.values.clear();
    }

    fn push(&mut self, r: &RowRef<'_>) {
        self.ts.push(r.ts_ms);
        self.gpu.push(r.gpu);
        self.host.push(r.host);
        self.values.extend_from_slice(r.values);
    }

    /// Hands on the rows by event time (stable: a GPU's rows of equal time
    /// keep their file order).
    fn emit(&mut self, f: &mut impl FnMut(&RowRef<'_>)) -> u64 {
        self.order.clear();
        self.order.extend(0..self.ts.len() as u32);
        let ts = &self.ts;
        self.order.sort_by_key(|&i| ts[i as usize]);
        let mut values = [f32::NAN; FEATURE_COUNT];
        for &i in &self.order {
            let i = i as usize;
            values.copy_from_slice(&self.values[i * FEATURE_COUNT..(i + 1) * FEATURE_COUNT]);
            f(&RowRef {
                gpu: self.gpu[i],
                host: self.host[i],
                ts_ms: self.ts[i],
                values: &values,
            });
        }
        self.order.len() as u64
    }
}
