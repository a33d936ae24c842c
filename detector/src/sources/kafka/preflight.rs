//! The Kafka source's start-up check, run by `serve` before it creates
//! anything on disk: secrets resolved from the environment or files, the
//! TLS files readable and PEM, the SASL mechanism one this build has, and
//! the whole client configuration accepted by librdkafka (option names and
//! values, the TLS context built from the CA / certificate / key). A bad
//! option stops the service at once, naming it, instead of surfacing in
//! the source thread after the service has announced itself, or only at
//! shutdown.

use std::collections::BTreeMap;
use std::path::Path;

use rdkafka::client::{Client, ClientContext};
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaType;

use super::secrets::{self, SecretRef};
use super::settings::{KafkaSettings, client_config};

/// A start-up problem, named by its config key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct PreflightError {
    pub key: String,
    pub message: String,
}

fn fail(key: impl Into<String>, message: impl Into<String>) -> PreflightError {
    PreflightError {
        key: key.into(),
        message: message.into(),
    }
}

/// SASL mechanisms this build has (librdkafka's builtin ones over
/// OpenSSL; GSSAPI needs Cyrus SASL, which is not built in).
pub const MECHANISMS: [&str; 4] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// Checks the settings and resolves their secrets into the options, so the
/// consumer made later gets them. Errors name the config key
/// (`source.options.<option>`, `source.secrets`).
pub fn preflight(s: &mut KafkaSettings) -> Result<(), PreflightError> {
    resolve_secrets(&mut s.options, &std::mem::take(&mut s.secrets))?;
    check_options(&s.options, "source.options")?;
    check_client(&client_config(s), &s.options, "source.options")
}

/// Secrets into options; errors keyed `source.secrets.<option>`.
pub fn resolve_secrets(
    options: &mut BTreeMap<String, String>,
    given: &BTreeMap<String, SecretRef>,
) -> Result<(), PreflightError> {
    secrets::resolve_into(options, given).map_err(|m| fail("source.secrets", m))
}

/// What can be judged without librdkafka: the SASL mechanism and its
/// credentials, and the TLS files. `prefix` names the options in errors
/// (`source.options` for the config, `--option` for `replay`).
pub fn check_options(
    options: &BTreeMap<String, String>,
    prefix: &str,
) -> Result<(), PreflightError> {
    check_sasl(options, prefix)?;
    for (option, kind) in PEM_FILES {
        if let Some(path) = options.get(*option) {
            check_file(option, Path::new(path), *kind)
                .map_err(|m| fail(format!("{prefix}.{option}"), m))?;
        }
    }
    Ok(())
}

fn get<'a>(options: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    options.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

fn check_sasl(options: &BTreeMap<String, String>, prefix: &str) -> Result<(), PreflightError> {
    let protocol = get(options, "security.protocol").unwrap_or("plaintext");
    if !protocol.to_ascii_uppercase().starts_with("SASL") {
        return Ok(());
    }
    let (key, mechanism) = match (
        get(options, "sasl.mechanisms"),
        get(options, "sasl.mechanism"),
    ) {
        (Some(m), _) => ("sasl.mechanisms", m),
        (None, Some(m)) => ("sasl.mechanism", m),
        (None, None) => {
            return Err(fail(
                format!("{prefix}.sasl.mechanism"),
                format!(
                    "security.protocol = {protocol:?} needs a SASL mechanism: one of {} (librdkafka's default, GSSAPI/Kerberos, is not built in)",
                    MECHANISMS.join(", ")
                ),
            ));
        }
    };
    if !MECHANISMS.contains(&mechanism) {
        return Err(fail(
            format!("{prefix}.{key}"),
            format!(
                "{mechanism:?} is not available in this build: use one of {}",
                MECHANISMS.join(", ")
            ),
        ));
    }
    if mechanism != "OAUTHBEARER" {
        for needed in ["sasl.username", "sasl.password"] {
            if get(options, needed).is_none() {
                return Err(fail(
                    format!("{prefix}.{needed}"),
                    format!(
                        "SASL {mechanism} needs {needed} (the password from [source.secrets], e.g. \"sasl.password\" = {{ env = \"KAFKA_PASSWORD\" }})"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// What a TLS file must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    /// PEM certificates (or a directory of them; `probe` searches the
    /// system's usual places).
    Certificates,
    /// A PEM private key.
    PrivateKey,
    /// A PEM certificate revocation list.
    Crl,
    /// A binary file (PKCS#12 keystore): exists and is readable.
    Binary,
}

const PEM_FILES: &[(&str, FileKind)] = &[
    ("ssl.ca.location", FileKind::Certificates),
    ("ssl.certificate.location", FileKind::Certificates),
    ("ssl.key.location", FileKind::PrivateKey),
    ("ssl.crl.location", FileKind::Crl),
    ("ssl.keystore.location", FileKind::Binary),
];

fn check_file(option: &str, path: &Path, kind: FileKind) -> Result<(), String> {
    let shown = path.display();
    if option == "ssl.ca.location" && path.as_os_str() == "probe" {
        return Ok(());
    }
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if meta.is_dir() {
        if kind == FileKind::Certificates && option == "ssl.ca.location" {
            return std::fs::read_dir(path)
                .map(|_| ())
                .map_err(|e| format!("{shown}: cannot read the directory: {e}"));
        }
        return Err(format!("{shown} is a directory, not a file"));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: cannot read: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let (marker, what) = match kind {
        FileKind::Binary => return Ok(()),
        FileKind::Certificates => ("-----BEGIN CERTIFICATE-----", "a PEM certificate"),
        FileKind::PrivateKey => ("PRIVATE KEY-----", "a PEM private key"),
        FileKind::Crl => ("-----BEGIN X509 CRL-----", "a PEM CRL"),
    };
    if text.contains("-----BEGIN ") && text.contains(marker) {
        Ok(())
    } else {
        Err(format!(
            "{shown} does not look like {what} (no {marker:?} line; DER files must be converted with `openssl x509 -inform der -out file.pem`)"
        ))
    }
}

/// librdkafka's log while the trial client lives: nothing of it matters
/// beyond the error `Client::new` returns (it has no brokers to reach).
struct Quiet;

impl ClientContext for Quiet {
    fn log(&self, _: RDKafkaLogLevel, fac: &str, message: &str) {
        tracing::debug!(target: "librdkafka", "preflight: {fac} {message}");
    }
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!(target: "librdkafka", %error, reason, "preflight");
    }
}

/// Makes (and drops) a client from the configuration without brokers to
/// connect to: librdkafka checks every option's name and value and builds
/// the TLS context (CA, certificate, key, their password) and the SASL
/// mechanism. Its message names the option; secret values are scrubbed.
pub fn check_client(
    config: &rdkafka::ClientConfig,
    options: &BTreeMap<String, String>,
    prefix: &str,
) -> Result<(), PreflightError> {
    let mut config = config.clone();
    config.remove("bootstrap.servers");
    config.set_log_level(RDKafkaLogLevel::Emerg);
    let native = config
        .create_native_config()
        .map_err(|e| explain(&e, options, prefix))?;
    Client::new(&config, native, RDKafkaType::RD_KAFKA_CONSUMER, Quiet)
        .map(drop)
        .map_err(|e| explain(&e, options, prefix))
}

fn explain(e: &KafkaError, options: &BTreeMap<String, String>, prefix: &str) -> PreflightError {
    match e {
        KafkaError::ClientConfig(_, desc, key, value) => fail(
            format!("{prefix}.{key}"),
            format!(
                "librdkafka refuses {:?}: {}",
                secrets::shown(key, value),
                secrets::scrub(desc, options)
            ),
        ),
        other => {
            let text = secrets::scrub(&other.to_string(), options);
            // librdkafka starts its messages with the option at fault
            // ("ssl.ca.location failed: …") when it knows it.
            let key = options
                .keys()
                .filter(|k| text.contains(k.as_str()))
                .max_by_key(|k| k.len())
                .map_or_else(|| prefix.to_owned(), |k| format!("{prefix}.{k}"));
            fail(key, format!("librdkafka cannot start a client: {text}"))
        }
    }
}

#[cfg(test)]
#[path = "preflight_tests.rs"]
mod tests;
