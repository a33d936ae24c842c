//! What the REST server is configured with and why it may not start: a
//! leaf of [`super`] that the server ([`super::server`]), its guard
//! ([`super::guard`]) and the app state ([`super::app_state`]) all read,
//! so none of them imports another for a type.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// What `[api]` says about serving (see `crate::config::RawApi`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    pub header_read_timeout: Duration,
    pub request_timeout: Duration,
    pub max_concurrent_requests: usize,
    pub max_connections: usize,
    /// HTTPS when set.
    pub tls: Option<TlsFiles>,
}

/// The PEM files of `api.tls_cert` and `api.tls_key`.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why REST could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "api.read_token_env names {var}, which is unset or empty: set it, or leave api.read_token_env out for open reads"
    )]
    ReadTokenUnset { var: String },
    /// A TLS file that cannot be used, named by its key and path.
    #[error("{key} = {}: {message}", path.display())]
    Tls {
        key: &'static str,
        path: PathBuf,
        message: String,
    },
}
