//! `[api]`: the REST API's table of `forewarn.toml` — where it listens,
//! who may read and change, and the guard rails that keep slow or too many
//! clients from holding it (timeouts, caps on connections and on requests
//! in flight, optional TLS). Validation checks shapes only (no I/O); the
//! TLS files are read when the server starts (`crate::api::server`), and a
//! bad one is named there.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::duration::ConfigDuration;
use super::error::{ConfigError, err};
use crate::api::server::{ServerSettings, TlsFiles};

/// `[api]`: the REST API.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawApi {
    /// Listen address, `address:port`.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Environment variable holding the bearer token for changes
    /// (silences, labels, reloads); unset = changes refused.
    #[serde(default = "default_token_env")]
    pub token_env: String,
    /// Environment variable holding a bearer token for reads. Unset (the
    /// default): reads are open. Set: every GET except `/healthz`,
    /// `/readyz` and `/metrics` needs that token (or the change token),
    /// and `serve` refuses to start while the variable is unset or empty.
    pub read_token_env: Option<String>,
    /// Label store: `POST /v1/labels` appends here (the contract's
    /// `gpu,ts,kind` CSV, read by `forewarn train --labels`).
    #[serde(default = "default_labels_file")]
    pub labels_file: PathBuf,
    /// Silences made through the API, rewritten on every change and
    /// loaded at start (`crate::silence_file`). Default: `silences.json`
    /// in the checkpoint directory when there is one, else
    /// `forewarn-silences.json`.
    pub silences_file: Option<PathBuf>,
    /// Time a connection may take to send a request's headers, counted
    /// from when it opens or its previous response was written; a client
    /// that has not finished by then (slowloris, or an idle keep-alive
    /// connection) is disconnected. Default [`default_header_read_timeout`].
    pub header_read_timeout: Option<ConfigDuration>,
    /// Time a request may take from its headers to its response (reading
    /// its body included); past it the client gets 408. Default
    /// [`default_request_timeout`].
    pub request_timeout: Option<ConfigDuration>,
    /// Requests being served at once; more get 503 with `Retry-After`
    /// at once. `/healthz` and `/readyz` are not counted, so probes answer
    /// under load. Default [`default_max_concurrent_requests`].
    #[serde(default = "default_max_concurrent_requests")]
    pub max_concurrent_requests: usize,
    /// Open connections; past it new ones wait in the kernel's accept
    /// queue until one closes. Default [`default_max_connections`].
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// TLS certificate chain (PEM). With `tls_key`, REST speaks HTTPS only.
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM: PKCS #8, PKCS #1 or SEC1).
    pub tls_key: Option<PathBuf>,
}

/// 127.0.0.1:8080: loopback, so nothing is exposed until an operator
/// says so; 8080 is the usual unprivileged HTTP port.
fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

/// `FOREWARN_API_TOKEN`: the product's name, so it is found in an
/// environment listing.
fn default_token_env() -> String {
    "FOREWARN_API_TOKEN".into()
}

/// `forewarn-labels.csv` in the working directory, next to the other
/// `forewarn-*` outputs.
fn default_labels_file() -> PathBuf {
    PathBuf::from("forewarn-labels.csv")
}

/// 10 s: a client on a healthy network sends its headers in
/// milliseconds; a dashboard's keep-alive connection that stays quiet
/// longer than its refresh period reconnects at no cost.
pub fn default_header_read_timeout() -> Duration {
    Duration::from_secs(10)
}

/// 30 s: every handler answers from memory; only a stalled client (a body
/// sent slowly) or a stalled pipeline command takes this long.
pub fn default_request_timeout() -> Duration {
    Duration::from_secs(30)
}

/// 512: far above what two cores serve at once, so it only bites when
/// clients pile up, and small enough that their buffers stay bounded.
fn default_max_concurrent_requests() -> usize {
    512
}

/// 10,000: room for a fleet's dashboards and scrapers with idle
/// keep-alive connections; each costs a socket and a parked task.
fn default_max_connections() -> usize {
    10_000
}

/// The most `api.max_connections` may say: far beyond what one process
/// serves, and within what the connection counter holds.
const MAX_CONNECTIONS: usize = 1_000_000;

impl Default for RawApi {
    fn default() -> Self {
        RawApi {
            listen: default_listen(),
            token_env: default_token_env(),
            read_token_env: None,
            labels_file: default_labels_file(),
            silences_file: None,
            header_read_timeout: None,
            request_timeout: None,
            max_concurrent_requests: default_max_concurrent_requests(),
            max_connections: default_max_connections(),
            tls_cert: None,
            tls_key: None,
        }
    }
}

impl RawApi {
    /// The server's settings (the TLS files are only named here).
    pub fn validate(&self) -> Result<ServerSettings, ConfigError> {
        let positive = |key: &str, d: Option<ConfigDuration>, default: Duration| match d {
            None => Ok(default),
            Some(d) if d.0.is_zero() => Err(err(key, "must be longer than 0 (e.g. \"10s\")")),
            Some(d) => Ok(d.0),
        };
        let header_read_timeout = positive(
            "api.header_read_timeout",
            self.header_read_timeout,
            default_header_read_timeout(),
        )?;
        let request_timeout = positive(
            "api.request_timeout",
            self.request_timeout,
            default_request_timeout(),
        )?;
        if self.max_concurrent_requests == 0 {
            return Err(err("api.max_concurrent_requests", "must be at least 1"));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(err(
                "api.max_connections",
                format!("must be between 1 and {MAX_CONNECTIONS}"),
            ));
        }
        if self.read_token_env.as_deref() == Some("") {
            return Err(err(
                "api.read_token_env",
                "must name an environment variable (leave it out for open reads)",
            ));
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (Some(_), None) => return Err(err("api.tls_key", "is needed with api.tls_cert")),
            (None, Some(_)) => return Err(err("api.tls_cert", "is needed with api.tls_key")),
        };
        Ok(ServerSettings {
            header_read_timeout,
            request_timeout,
            max_concurrent_requests: self.max_concurrent_requests,
            max_connections: self.max_connections,
            tls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RawConfig;

    fn api(text: &str) -> Result<ServerSettings, ConfigError> {
        RawConfig::from_toml(text)?.api.validate()
    }

    #[test]
    fn defaults_and_spelled_durations() {
        let d = api("").expect("defaults");
        assert_eq!(d.header_read_timeout, Duration::from_secs(10));
        assert_eq!(d.request_timeout, Duration::from_secs(30));
        assert_eq!(d.max_concurrent_requests, 512);
        assert_eq!(d.max_connections, 10_000);
        assert_eq!(d.tls, None);
        let example = api(include_str!("../../../docs/forewarn.example.toml")).expect("example");
        assert_eq!(example, d, "the example documents the defaults");
        let s = api(
            "[api]\nheader_read_timeout = \"2s\"\nrequest_timeout = \"1m\"\nmax_concurrent_requests = 8\nmax_connections = 100\ntls_cert = \"c.pem\"\ntls_key = \"k.pem\"\nread_token_env = \"READ\"\n",
        )
        .expect("valid");
        assert_eq!(s.header_read_timeout, Duration::from_secs(2));
        assert_eq!(s.request_timeout, Duration::from_secs(60));
        assert_eq!((s.max_concurrent_requests, s.max_connections), (8, 100));
        assert_eq!(
            s.tls,
            Some(TlsFiles {
                cert: "c.pem".into(),
                key: "k.pem".into()
            })
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            (
                "[api]\nheader_read_timeout = \"0s\"\n",
                "api.header_read_timeout",
            ),
            ("[api]\nrequest_timeout = \"0s\"\n", "api.request_timeout"),
            (
                "[api]\nmax_concurrent_requests = 0\n",
                "api.max_concurrent_requests",
            ),
            ("[api]\nmax_connections = 0\n", "api.max_connections"),
            ("[api]\nmax_connections = 2000000\n", "api.max_connections"),
            ("[api]\ntls_cert = \"c.pem\"\n", "api.tls_key"),
            ("[api]\ntls_key = \"k.pem\"\n", "api.tls_cert"),
            ("[api]\nread_token_env = \"\"\n", "api.read_token_env"),
        ] {
            let e = api(text).expect_err(text);
            assert_eq!(e.key, key, "{text}: {e}");
        }
        for (unknown, key) in [
            ("[api]\nheader_timeout = \"1s\"\n", "api.header_timeout"),
            ("[api]\nrequest_timeout = \"soon\"\n", "api.request_timeout"),
        ] {
            let e = RawConfig::from_toml(unknown).expect_err(unknown);
            assert_eq!(e.key, key, "{unknown}");
            assert_eq!(e.at.map(|a| a.0), Some(2), "{unknown}");
        }
    }
}
