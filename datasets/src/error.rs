//! Errors of dataset readers and writers, naming the file, row or column.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum DatasetError {
    #[error("i/o error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("parquet: {0}")]
    Parquet(#[from] ::parquet::errors::ParquetError),
    #[error("arrow: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    #[error("{path}: schema mismatch: {message}")]
    Schema { path: String, message: String },
    #[error("{path} line {line}: {message}")]
    Csv {
        path: String,
        line: usize,
        message: String,
    },
}

impl DatasetError {
    pub(crate) fn io(path: impl std::fmt::Display, source: std::io::Error) -> Self {
        DatasetError::Io {
            path: path.to_string(),
            source,
        }
    }
}
