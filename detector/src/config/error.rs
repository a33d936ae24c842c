//! The one error type of configuration: every problem names its key path
//! (`source.brokers`, `features.silence`), so the operator knows what to fix.

/// A config problem, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

pub(super) fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}
