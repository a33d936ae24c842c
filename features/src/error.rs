//! Decode errors: each says which record, field or line was bad and why, and
//! maps to a short, stable reason label for the `/metrics` counter and the
//! dead-letter record.

use thiserror::Error;

/// Why one message, line or record could not become a [`crate::Sample`].
#[derive(Debug, Clone, PartialEq, Error)]
pub enum DecodeError {
    #[error("invalid JSON at line {line} column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("record {index}: missing required field `gpu`")]
    MissingGpu { index: usize },
    #[error("record {index}: field `{field}`: {message}")]
    BadField {
        index: usize,
        field: String,
        message: String,
    },
    #[error("record {index}: metric `{field}` has value {value}, outside [{min}, {max}]")]
    AbsurdValue {
        index: usize,
        field: &'static str,
        value: f64,
        min: f64,
        max: f64,
    },
    #[error("record {index}: metric `{field}` is not finite")]
    NotFinite { index: usize, field: String },
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("input is not UTF-8 text")]
    NotUtf8,
    #[error(
        "unrecognised encoding: not native JSON, dcgm-exporter text, adapter JSON or nvidia-smi CSV"
    )]
    UnknownEncoding,
    #[error("empty message")]
    Empty,
    #[error("GPU {gpu:?}: {field} is {len} bytes (or entries), over the limit of {max}")]
    TooLong {
        gpu: String,
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("{len} bytes, over the limit of {max} for one message or line")]
    TooLarge { len: usize, max: usize },
    /// A recognised format forewarn does not decode (`nvidia-smi -q`
    /// output); `instead` says what to give it.
    #[error("this is {format}, which forewarn does not decode: {instead}")]
    Unsupported {
        format: &'static str,
        instead: &'static str,
    },
}

impl DecodeError {
    /// A stable, low-cardinality label for metrics and dead letters.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::Json { .. } => "invalid_json",
            DecodeError::MissingGpu { .. } => "missing_gpu",
            DecodeError::BadField { .. } => "bad_field",
            DecodeError::AbsurdValue { .. } => "absurd_value",
            DecodeError::NotFinite { .. } => "not_finite",
            DecodeError::Line { .. } => "bad_line",
            DecodeError::NotUtf8 => "not_utf8",
            DecodeError::UnknownEncoding => "unknown_encoding",
            DecodeError::Empty => "empty",
            DecodeError::TooLong { .. } => "too_long",
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::Unsupported { .. } => "unsupported_format",
        }
    }
}

impl From<serde_json::Error> for DecodeError {
    fn from(e: serde_json::Error) -> Self {
        DecodeError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        }
    }
}
