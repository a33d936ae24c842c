//! The REST server: its own accept loop around hyper's HTTP/1 connection,
//! because `axum::serve` has no header-read timeout and no connection cap
//! (issue 26: slow clients held for minutes, thousands of half-open
//! connections kept). Here every connection must send its headers within
//! `header_read_timeout` (counted from when it opens or its last response
//! went out, so idle keep-alive connections go too), at most
//! `max_connections` are open (more wait in the kernel's accept queue),
//! and the router is wrapped by [`super::guard::limit`] (requests in
//! flight, request timeout). TLS (rustls with ring) is optional; its
//! handshake runs in the connection's task under the header timeout, so a
//! stalled handshake never blocks the accept loop.
//!
//! Shutdown follows the service's one `CancellationToken`: accepting
//! stops, idle connections close, requests in flight finish (each bounded
//! by the request timeout).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::guard;
pub use super::settings::{ServeError, ServerSettings, TlsFiles};

/// Accept errors that concern one connection (the peer gave up before we
/// took it); the loop goes on at once.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// A bound listener, ready to serve.
pub struct Server {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    settings: ServerSettings,
    app: Router,
}

impl Server {
    /// Reads the TLS files (if any) and binds `addr`. The app is wrapped
    /// in the request limits here.
    pub async fn bind(
        addr: SocketAddr,
        settings: &ServerSettings,
        app: Router,
    ) -> Result<Server, ServeError> {
        let listener = bind_listener(addr).await?;
        Server::on(listener, settings, app)
    }

    /// Serves on a listener bound earlier (`serve` binds its port before
    /// it creates anything on disk).
    pub fn on(
        listener: TcpListener,
        settings: &ServerSettings,
        app: Router,
    ) -> Result<Server, ServeError> {
        let tls = settings.tls.as_ref().map(tls_acceptor).transpose()?;
        raise_open_files_limit(settings.max_connections);
        Ok(Server {
            listener,
            tls,
            app: guard::with_limits(app, settings),
            settings: settings.clone(),
        })
    }

    /// The bound address (the port when bound to port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves until `shutdown` is cancelled, then waits for the open
    /// connections to finish (bounded by the request timeout and a grace).
    pub async fn run(self, shutdown: CancellationToken) {
        let Server {
            listener,
            tls,
            settings,
            app,
        } = self;
        let max = u32::try_from(settings.max_connections).unwrap_or(u32::MAX);
        let open = Arc::new(Semaphore::new(max as usize));
        loop {
            let permit = tokio::select! {
                p = open.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                () = shutdown.cancelled() => break,
            };
            let stream = tokio::select! {
                r = listener.accept() => match r {
                    Ok((stream, _)) => stream,
                    Err(e) if is_connection_error(&e) => continue,
                    Err(e) => {
                        // Out of file descriptors, most likely: wait for
                        // connections to close instead of spinning.
                        tracing::error!(error = %e, "REST: accepting a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = shutdown.cancelled() => break,
            };
            // Responses are small and written whole: no Nagle delay.
            let _ = stream.set_nodelay(true);
            let (app, tls, settings, sd) =
                (app.clone(), tls.clone(), settings.clone(), shutdown.clone());
            tokio::spawn(async move {
                let _open = permit;
                match tls {
                    None => connection(stream, app, &settings, sd).await,
                    Some(acceptor) => {
                        let hs = tokio::time::timeout(
                            settings.header_read_timeout,
                            acceptor.accept(stream),
                        );
                        match hs.await {
                            Ok(Ok(stream)) => connection(stream, app, &settings, sd).await,
                            Ok(Err(e)) => tracing::debug!(error = %e, "REST: TLS handshake"),
                            Err(_) => tracing::debug!("REST: TLS handshake timed out"),
                        }
                    }
                }
            });
        }
        drop(listener);
        let grace = settings.request_timeout + Duration::from_secs(1);
        if tokio::time::timeout(grace, open.acquire_many(max))
            .await
            .is_err()
        {
            tracing::warn!("REST: connections still open at shutdown were dropped");
        }
    }
}

/// One connection: HTTP/1 with keep-alive, headers due within the header
/// timeout, closed gracefully on shutdown.
async fn connection<S>(stream: S, app: Router, settings: &ServerSettings, sd: CancellationToken)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        () = sd.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        // Timeouts and peers that hang up are the client's business.
        tracing::debug!(error = %e, "REST connection ended");
    }
}

fn tls_error(key: &'static str, path: &Path, message: impl ToString) -> ServeError {
    ServeError::Tls {
        key,
        path: path.to_owned(),
        message: message.to_string(),
    }
}

/// The TLS configuration from the PEM files, each error naming its file.
fn tls_acceptor(files: &TlsFiles) -> Result<TlsAcceptor, ServeError> {
    let cert_err = |m: String| tls_error("api.tls_cert", &files.cert, m);
    let key_err = |m: String| tls_error("api.tls_key", &files.key, m);
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| cert_err(format!("reading the certificate chain: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(format!("reading the certificate chain: {e}")))?;
    if certs.is_empty() {
        return Err(cert_err("no PEM certificate in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| key_err(format!("reading the private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| cert_err(format!("TLS setup: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| key_err(format!("not usable with the certificate: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Raises the soft limit on open files towards the hard one so that
/// `max_connections` sockets fit (many systems start services at 1,024).
/// Best effort: a refusal is logged and the accept loop copes with EMFILE.
fn raise_open_files_limit(max_connections: usize) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let want = u64::try_from(max_connections)
        .unwrap_or(u64::MAX)
        .saturating_add(1_024);
    let mut lim = getrlimit(Resource::Nofile);
    let Some(current) = lim.current else {
        return; // unlimited
    };
    if current >= want {
        return;
    }
    let target = lim.maximum.map_or(want, |m| m.min(want));
    if target <= current {
        tracing::warn!(
            soft = current,
            wanted = want,
            "open files limit is below api.max_connections; raise it (ulimit -n / LimitNOFILE)"
        );
        return;
    }
    lim.current = Some(target);
    if let Err(e) = setrlimit(Resource::Nofile, lim) {
        tracing::warn!(error = %e, "raising the open files limit");
    }
}

/// Binds the REST port, first thing at start: a port in use must stop the
/// service before it has created anything.
pub async fn bind_listener(addr: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

/// Serves `app` on a bound listener until `shutdown` (the call `serve`
/// makes).
pub async fn serve(
    listener: TcpListener,
    settings: &ServerSettings,
    app: Router,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        source,
    })?;
    let server = Server::on(listener, settings, app)?;
    let scheme = if server.is_tls() { "https" } else { "http" };
    tracing::info!(
        "forewarn serving on {scheme}://{addr} (GET /v1/gpus?sort=risk, /v1/alerts, /metrics)"
    );
    server.run(shutdown).await;
    Ok(())
}
