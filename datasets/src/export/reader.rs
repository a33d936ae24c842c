//! Finding exported files again: what `forewarn train` reads. Lists the
//! finished `.parquet` files of a table whose hour overlaps a time range
//! (never `.tmp` files, which are being written), and reads one back.
//! Partitions are by hour, so a listed file may hold rows just outside the
//! range: filter rows on their time column.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::ExportError;
use super::layout::{self, HOUR_MS};

/// One finished export file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportFile {
    pub path: PathBuf,
    /// Start of the file's hour partition, epoch ms UTC; its rows' event
    /// times are in `[hour_start_ms, hour_start_ms + 1 h)`.
    pub hour_start_ms: i64,
}

/// The finished files of `<root>/<table>` whose hour overlaps
/// `[from_ms, to_ms)`, in hour order, then by file name (sequence order per
/// writer). A missing table directory is an error naming it.
pub fn list_files(
    root: &Path,
    table: &str,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<ExportFile>, ExportError> {
    let dir = root.join(table);
    let parts = layout::partitions(&dir).map_err(|source| ExportError::Root {
        path: dir.display().to_string(),
        source,
    })?;
    let mut out = Vec::new();
    for (hour, part) in parts {
        let start = hour.saturating_mul(HOUR_MS);
        if start >= to_ms || start.saturating_add(HOUR_MS) <= from_ms {
            continue;
        }
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&part).map_err(|e| ExportError::io(&part, e))? {
            let entry = entry.map_err(|e| ExportError::io(&part, e))?;
            let name = entry.file_name();
            if let Some(name) = name.to_str()
                && layout::parse_file_name(name).is_some_and(|(_, _, done)| done)
            {
                names.push(name.to_string());
            }
        }
        names.sort();
        out.extend(names.into_iter().map(|n| ExportFile {
            path: part.join(n),
            hour_start_ms: start,
        }));
    }
    Ok(out)
}

/// Reads a whole export file (for tests and small tables; stream large
/// ones with `ParquetRecordBatchReaderBuilder`).
pub fn read_file(path: &Path) -> Result<Vec<RecordBatch>, ExportError> {
    let file = File::open(path).map_err(|e| ExportError::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| ExportError::parquet(path, e))?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ExportError::Batch {
            table: path.display().to_string(),
            source: e,
        })
}

/// A file's key-value metadata entry, e.g. the schema version.
pub fn metadata_value(path: &Path, key: &str) -> Result<Option<String>, ExportError> {
    let file = File::open(path).map_err(|e| ExportError::io(path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| ExportError::parquet(path, e))?;
    Ok(builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|e| e.key == key))
        .and_then(|e| e.value.clone()))
}
