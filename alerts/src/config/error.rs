//! The config's one error, naming the key behind a problem: a leaf that
//! the config, its sections (`config::correlation`) and the silences read.

/// A config problem, naming the key behind it (`lifecycle.kinds.xid.for`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid config at `{key}`: {problem}")]
pub struct ConfigError {
    /// Dotted path of the offending key.
    pub key: String,
    /// What is wrong with it.
    pub problem: String,
}

impl ConfigError {
    /// A problem at `key`.
    pub fn new(key: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            problem: problem.into(),
        }
    }
}
