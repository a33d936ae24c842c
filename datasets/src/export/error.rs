//! Errors of the Parquet exports, each naming the file or setting at fault.

use thiserror::Error;

/// What went wrong while exporting or listing exported files.
#[derive(Debug, Error)]
pub enum ExportError {
    /// The export root (or a table directory under it) cannot be created or
    /// read: a file in its place, no permission, a read-only disk.
    #[error("export root {path}: {source}")]
    Root {
        path: String,
        source: std::io::Error,
    },
    /// Creating, writing, syncing, renaming or removing one file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The Parquet encoder or decoder failed on one file.
    #[error("parquet error on {path}: {source}")]
    Parquet {
        path: String,
        source: ::parquet::errors::ParquetError,
    },
    /// Rows did not fit the table's schema (a programming error upstream,
    /// e.g. a score row with the wrong number of components).
    #[error("building a {table} batch: {source}")]
    Batch {
        table: String,
        source: arrow::error::ArrowError,
    },
    /// A setting is out of range; `field` names it.
    #[error("invalid export config: {field}: {message}")]
    Config {
        field: &'static str,
        message: String,
    },
    /// An alert event that is not in the alert contract's shape.
    #[error("alert event is not contract JSON: {0}")]
    AlertEvent(String),
}

impl ExportError {
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        ExportError::Io {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn parquet(path: &std::path::Path, source: ::parquet::errors::ParquetError) -> Self {
        ExportError::Parquet {
            path: path.display().to_string(),
            source,
        }
    }

    pub(crate) fn config(field: &'static str, message: impl Into<String>) -> Self {
        ExportError::Config {
            field,
            message: message.into(),
        }
    }
}
