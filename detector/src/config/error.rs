//! The one error type of configuration: every problem names its key path
//! (`source.brokers`, `alerts.receivers[1].url`) and, when the file has that
//! key, its line and column, so the operator knows what to fix and where.

use std::fmt;

/// A config problem, naming the key and where the file has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub message: String,
    /// 1-based line and column of the key in the file (none: not in the
    /// file, e.g. a required key that is missing, or no file).
    pub at: Option<(usize, usize)>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((line, column)) => write!(
                f,
                "{} (line {line}, column {column}): {}",
                self.key, self.message
            ),
            None => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// This error placed in `text` (the key's line and column, or its
    /// nearest enclosing key's).
    pub fn locate(mut self, located: &super::locate::Located<'_>) -> Self {
        if self.at.is_none() {
            self.at = located.position(&self.key);
        }
        self
    }
}

pub(super) fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
        at: None,
    }
}
