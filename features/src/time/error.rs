//! Why a timestamp or duration string was rejected: the one error of
//! `time` and its duration grammar (`time::duration`), a leaf both read.

/// Why a timestamp or duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// The text is not `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)`.
    #[error("invalid RFC 3339 timestamp {0:?}")]
    Timestamp(String),
    /// The text is not a duration of the grammar [`super::parse_duration`] accepts.
    #[error("invalid duration {0:?} (expected e.g. \"90s\", \"5m\", \"1h30m\", \"24h\", \"7d\")")]
    Duration(String),
}
