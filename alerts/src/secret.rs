//! Secrets (PagerDuty routing keys, Slack webhook URLs, webhook URLs): read
//! from an environment variable or a file at startup, held in [`Secret`],
//! whose `Debug` / `Display` print `<redacted>`. Errors name the variable
//! or file, never the value; sinks pass receivers' answers through
//! [`Secret::redact`] before they reach a log or a dead-letter file.

use std::fmt;
use std::path::PathBuf;

/// Where a secret comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// Environment variable name.
    Env(String),
    /// File path (trailing whitespace trimmed), e.g. a mounted k8s secret.
    File(PathBuf),
    /// Inline value; config validation allows it only for non-secret URLs.
    Value(String),
}

/// Why a secret could not be read (without its value).
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The variable is unset, empty or not UTF-8.
    #[error("environment variable {0} is not set (or empty)")]
    MissingEnv(String),
    /// The file could not be read.
    #[error("cannot read secret file {path}: {source}")]
    File {
        /// Path of the file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is empty.
    #[error("secret file {0} is empty")]
    EmptyFile(PathBuf),
}

/// A secret value that never prints itself.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value (tests, or callers with their own secret store).
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for building a request.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the secret replaced.
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "<redacted>")
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl SecretSource {
    /// Reads the secret (startup IO).
    pub fn load(&self) -> Result<Secret, SecretError> {
        match self {
            SecretSource::Env(var) => match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => Ok(Secret(v.trim().to_owned())),
                _ => Err(SecretError::MissingEnv(var.clone())),
            },
            SecretSource::Value(v) => Ok(Secret(v.clone())),
            SecretSource::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| SecretError::File {
                    path: path.clone(),
                    source,
                })?;
                let v = text.trim();
                if v.is_empty() {
                    Err(SecretError::EmptyFile(path.clone()))
                } else {
                    Ok(Secret(v.to_owned()))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("R0UT1NGKEY");
        assert_eq!(format!("{s} {s:?}"), "<redacted> Secret(<redacted>)");
        assert_eq!(s.redact("bad key R0UT1NGKEY!"), "bad key <redacted>!");
        let err = SecretSource::Env("FOREWARN_TEST_SURELY_UNSET_VAR".into())
            .load()
            .map(|_| ());
        assert!(err.is_err_and(|e| e.to_string().contains("FOREWARN_TEST_SURELY_UNSET_VAR")));
    }
}
