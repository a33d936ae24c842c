//! Kafka client secrets: librdkafka options whose values come from an
//! environment variable or a file (`[source.secrets]`, `replay
//! --option-env / --option-file`), resolved once when the command starts,
//! and the redaction every printed form of the client options goes
//! through. A password must never need to sit in the config file, and must
//! never reach a log line, an error message or `Debug` output, whichever
//! way it was given.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// Where one secret option's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum SecretRef {
    /// `{ env = "KAFKA_PASSWORD" }`: an environment variable.
    Env { env: String },
    /// `{ file = "/run/secrets/kafka" }`: a file (surrounding whitespace,
    /// such as the trailing newline of `echo … > file`, is trimmed).
    File { file: PathBuf },
}

impl SecretRef {
    /// Where the value comes from, for messages (never the value).
    pub fn describe(&self) -> String {
        match self {
            SecretRef::Env { env } => format!("environment variable {env}"),
            SecretRef::File { file } => format!("file {}", file.display()),
        }
    }

    /// The value: present, non-empty, trimmed. The error names the option
    /// and where its value should have come from.
    pub fn resolve(&self, option: &str) -> Result<String, String> {
        let raw = match self {
            SecretRef::Env { env } => std::env::var(env).map_err(|e| match e {
                std::env::VarError::NotPresent => {
                    format!("{option}: environment variable {env} is not set")
                }
                std::env::VarError::NotUnicode(_) => {
                    format!("{option}: environment variable {env} is not valid UTF-8")
                }
            })?,
            SecretRef::File { file } => std::fs::read_to_string(file).map_err(|e| {
                format!("{option}: cannot read secret file {}: {e}", file.display())
            })?,
        };
        let value = raw.trim();
        if value.is_empty() {
            return Err(format!("{option}: {} is empty", self.describe()));
        }
        Ok(value.to_owned())
    }
}

/// Resolves every secret into `options`. An option given both inline and
/// as a secret is refused (which one wins would be a guess).
pub fn resolve_into(
    options: &mut BTreeMap<String, String>,
    secrets: &BTreeMap<String, SecretRef>,
) -> Result<(), String> {
    for (option, r) in secrets {
        if options.contains_key(option) {
            return Err(format!(
                "{option} is given both in options and as a secret; keep one"
            ));
        }
        let value = r.resolve(option)?;
        options.insert(option.clone(), value);
    }
    Ok(())
}

/// Whether an option's value is a secret: librdkafka's own sensitive
/// properties (passwords, private keys given inline, OAuth client
/// secrets, JAAS-like configs), matched by name so that options added by
/// later librdkafka versions that follow its naming are covered too.
pub fn is_sensitive(option: &str) -> bool {
    let o = option.to_ascii_lowercase();
    o.contains("password")
        || o.contains("secret")
        || o == "ssl.key.pem"
        || o == "ssl_key"
        || o == "sasl.oauthbearer.config"
        || o == "sasl.oauthbearer.assertion.private.key.pem"
        || o == "sasl.oauthbearer.assertion.private.key.passphrase"
}

/// What is printed in place of a secret value.
pub const REDACTED: &str = "[redacted]";

/// An option's value as it may be printed.
pub fn shown<'a>(option: &str, value: &'a str) -> &'a str {
    if is_sensitive(option) {
        REDACTED
    } else {
        value
    }
}

/// The options with every secret value replaced, for `Debug` and logs.
pub fn redacted(options: &BTreeMap<String, String>) -> BTreeMap<&str, &str> {
    options
        .iter()
        .map(|(k, v)| (k.as_str(), shown(k, v)))
        .collect()
}

/// Replaces every secret value that occurs in `text` (an error message of
/// librdkafka or rdkafka, which may quote the value it refused).
pub fn scrub(text: &str, options: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    for (k, v) in options {
        if is_sensitive(k) && !v.is_empty() {
            out = out.replace(v.as_str(), REDACTED);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_come_from_files_trimmed_and_missing_ones_are_named() {
        let dir = std::env::temp_dir().join(format!("fw-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("pw");
        std::fs::write(&f, "s3cret\n").expect("write");
        let r = SecretRef::File { file: f.clone() };
        assert_eq!(r.resolve("sasl.password").as_deref(), Ok("s3cret"));
        let missing = SecretRef::File {
            file: dir.join("nope"),
        };
        let e = missing.resolve("sasl.password").expect_err("missing");
        assert!(e.contains("sasl.password") && e.contains("nope"), "{e}");
        std::fs::write(&f, " \n").expect("write");
        let e = r.resolve("sasl.password").expect_err("empty");
        assert!(e.contains("is empty"), "{e}");
        let e = SecretRef::Env {
            env: "FOREWARN_TEST_NO_SUCH_VARIABLE".into(),
        }
        .resolve("ssl.key.password")
        .expect_err("unset");
        assert!(
            e.contains("ssl.key.password") && e.contains("FOREWARN_TEST_NO_SUCH_VARIABLE"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_option_given_twice_is_refused() {
        let mut options = BTreeMap::from([("sasl.password".to_string(), "x".to_string())]);
        let secrets = BTreeMap::from([(
            "sasl.password".to_string(),
            SecretRef::Env { env: "X".into() },
        )]);
        let e = resolve_into(&mut options, &secrets).expect_err("twice");
        assert!(e.contains("both"), "{e}");
    }

    #[test]
    fn every_secret_is_redacted_and_nothing_else() {
        for k in [
            "sasl.password",
            "ssl.key.password",
            "ssl.keystore.password",
            "sasl.oauthbearer.client.secret",
            "ssl.key.pem",
            "sasl.oauthbearer.config",
        ] {
            assert!(is_sensitive(k), "{k}");
            assert_eq!(shown(k, "hunter2"), REDACTED);
        }
        for k in ["sasl.username", "security.protocol", "ssl.ca.location"] {
            assert!(!is_sensitive(k), "{k}");
            assert_eq!(shown(k, "v"), "v");
        }
        let options = BTreeMap::from([
            ("sasl.password".to_string(), "hunter2".to_string()),
            ("sasl.username".to_string(), "ops".to_string()),
        ]);
        assert_eq!(
            scrub("Invalid value \"hunter2\" for sasl.password", &options),
            "Invalid value \"[redacted]\" for sasl.password"
        );
        let shown = format!("{:?}", redacted(&options));
        assert!(
            !shown.contains("hunter2") && shown.contains("ops"),
            "{shown}"
        );
    }
}
