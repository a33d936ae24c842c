//! The server's guard rails over real sockets on 127.0.0.1: slow headers
//! dropped, a wrong token refused before the body is read, the read token,
//! the request timeout and cap, TLS. Bounds on waits only stop a broken
//! server from hanging the test; nothing here measures speed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

use super::app_state::{Admin, AppState};
use super::server::{ServeError, Server, ServerSettings, TlsFiles};
use crate::state::SharedState;

/// Long enough that nothing a test waits for is cut short by mistake.
const PATIENCE: Duration = Duration::from_secs(20);

fn settings() -> ServerSettings {
    crate::config::RawApi::default()
        .validate()
        .expect("default [api]")
}

fn app_with(admin: Admin) -> Router {
    super::app(AppState::new(SharedState::new()).with_admin(admin))
}

/// Serves `app` on a free loopback port until the returned token is
/// cancelled.
async fn start(app: Router, settings: &ServerSettings) -> (SocketAddr, CancellationToken) {
    let server = Server::bind(SocketAddr::from(([127, 0, 0, 1], 0)), settings, app)
        .await
        .expect("bind");
    let addr = server.local_addr().expect("address");
    let stop = CancellationToken::new();
    tokio::spawn(server.run(stop.clone()));
    (addr, stop)
}

/// Reads until the server closes the connection (or `PATIENCE` passes).
async fn read_to_close(stream: &mut TcpStream) -> Option<String> {
    let mut out = Vec::new();
    let read = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut out)).await;
    match read {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_dropped() {
    let mut s = settings();
    s.header_read_timeout = Duration::from_millis(300);
    let (addr, stop) = start(app_with(Admin::default()), &s).await;
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    // One more header line now and then, never the blank line.
    let trickle = async {
        for i in 0..200 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if conn
                .write_all(format!("X-Slow-{i}: 1\r\n").as_bytes())
                .await
                .is_err()
            {
                return true;
            }
            // Any answer (an error status or the end of the stream)
            // means the server gave up on the headers.
            let mut byte = [0u8; 1];
            let answered =
                tokio::time::timeout(Duration::from_millis(1), conn.read(&mut byte)).await;
            if answered.is_ok() {
                return true;
            }
        }
        false
    };
    assert!(
        tokio::time::timeout(PATIENCE, trickle)
            .await
            .unwrap_or(false),
        "the server kept a connection whose headers never ended"
    );
    // A well-behaved client is still served.
    let ok = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .expect("healthz");
    assert_eq!(ok.status(), 200);
    stop.cancel();
}

#[tokio::test]
async fn a_wrong_token_is_refused_before_the_body_is_read() {
    let (addr, stop) = start(
        app_with(Admin {
            token: Some("s3cret".into()),
            ..Admin::default()
        }),
        &settings(),
    )
    .await;
    for auth in ["Authorization: Bearer wrong\r\n", ""] {
        let mut conn = TcpStream::connect(addr).await.expect("connect");
        // Announces 2 MB and sends none of it: a server that read the
        // body first would wait for it.
        let head = format!(
            "POST /v1/labels HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            2 << 20
        );
        conn.write_all(head.as_bytes()).await.expect("write");
        let answer = read_to_close(&mut conn).await.expect("an answer");
        assert!(answer.starts_with("HTTP/1.1 401"), "{auth:?}: {answer:?}");
    }
    stop.cancel();
}

#[tokio::test]
async fn the_read_token_guards_reads_but_not_the_probes() {
    let (addr, stop) = start(
        app_with(Admin {
            token: Some("change".into()),
            read_token: Some("read".into()),
            ..Admin::default()
        }),
        &settings(),
    )
    .await;
    let client = reqwest::Client::new();
    let get = |path: &str, token: Option<&str>| {
        let mut req = client.get(format!("http://{addr}{path}"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.expect("response").status().as_u16() }
    };
    for open in ["/healthz", "/metrics"] {
        assert_eq!(get(open, None).await, 200, "{open}");
    }
    assert_eq!(get("/readyz", None).await, 503, "not ready, but answered");
    for guarded in ["/v1/gpus", "/v1/fleet", "/v1/alerts", "/openapi.json", "/"] {
        assert_eq!(get(guarded, None).await, 401, "{guarded}");
        assert_eq!(get(guarded, Some("nope")).await, 401, "{guarded}");
        assert_eq!(get(guarded, Some("read")).await, 200, "{guarded}");
        assert_eq!(get(guarded, Some("change")).await, 200, "{guarded}");
    }
    // The read token does not allow changes.
    let post = client
        .post(format!("http://{addr}/v1/models/reload"))
        .bearer_auth("read")
        .send()
        .await
        .expect("response");
    assert_eq!(post.status(), 401);
    stop.cancel();
}

#[tokio::test]
async fn slow_requests_time_out_and_the_cap_sheds_the_excess() {
    let slow = Router::new()
        .route(
            "/slow",
            axum::routing::get(|| async {
                tokio::time::sleep(Duration::from_secs(3)).await;
                "late"
            }),
        )
        .route("/healthz", axum::routing::get(|| async { "ok" }));
    let mut s = settings();
    s.request_timeout = Duration::from_millis(500);
    s.max_concurrent_requests = 1;
    let (addr, stop) = start(slow, &s).await;
    let first = tokio::spawn(reqwest::get(format!("http://{addr}/slow")));
    // Until the first is in flight, a second may still be let in.
    let mut shed = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let r = reqwest::get(format!("http://{addr}/slow"))
            .await
            .expect("response");
        if r.status() == 503 {
            assert_eq!(r.headers()["retry-after"], "1");
            shed = true;
            break;
        }
    }
    assert!(shed, "a second request past the cap of 1 was not shed");
    let health = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200, "probes are not counted");
    let first = first.await.expect("task").expect("response");
    assert_eq!(first.status(), 408);
    stop.cancel();
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fw-tls-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[tokio::test]
async fn tls_serves_with_a_self_signed_certificate() {
    let dir = temp_dir("ok");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let files = TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&files.cert, ck.cert.pem()).expect("write cert");
    std::fs::write(&files.key, ck.signing_key.serialize_pem()).expect("write key");
    let mut s = settings();
    s.tls = Some(files);
    let (addr, stop) = start(app_with(Admin::default()), &s).await;
    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(ck.cert.pem().as_bytes()).expect("pem"),
        )
        .resolve("localhost", addr)
        .build()
        .expect("client");
    let resp = client
        .get(format!("https://localhost:{}/healthz", addr.port()))
        .send()
        .await
        .expect("https");
    assert_eq!(resp.status(), 200);
    let body: serde_json::Value = resp.json().await.expect("json body");
    assert_eq!(body["status"], "ok");
    // Plain HTTP on the TLS port gets no answer.
    let plain = reqwest::get(format!("http://{addr}/healthz")).await;
    assert!(plain.is_err() || plain.is_ok_and(|r| r.status() != 200));
    stop.cancel();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_missing_or_bad_tls_file_is_named() {
    let dir = temp_dir("bad");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let cert = dir.join("cert.pem");
    std::fs::write(&cert, ck.cert.pem()).expect("write cert");
    let bind = |files: TlsFiles| async move {
        let mut s = settings();
        s.tls = Some(files);
        match Server::bind(SocketAddr::from(([127, 0, 0, 1], 0)), &s, Router::new()).await {
            Ok(_) => panic!("bound with a bad TLS file"),
            Err(e) => e,
        }
    };
    let missing = dir.join("no-such-key.pem");
    let e = bind(TlsFiles {
        cert: cert.clone(),
        key: missing.clone(),
    })
    .await;
    let text = e.to_string();
    assert!(
        matches!(
            e,
            ServeError::Tls {
                key: "api.tls_key",
                ..
            }
        ),
        "{text}"
    );
    assert!(text.contains(&missing.display().to_string()), "{text}");
    // A certificate where the key should be: no key in it.
    let e = bind(TlsFiles {
        cert: cert.clone(),
        key: cert.clone(),
    })
    .await;
    assert!(
        matches!(
            e,
            ServeError::Tls {
                key: "api.tls_key",
                ..
            }
        ),
        "{e}"
    );
    // An empty certificate file.
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "").expect("write");
    let e = bind(TlsFiles {
        cert: empty,
        key: cert,
    })
    .await;
    assert!(
        matches!(
            e,
            ServeError::Tls {
                key: "api.tls_cert",
                ..
            }
        ),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn shutdown_closes_idle_connections_and_returns() {
    let server = Server::bind(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        &settings(),
        app_with(Admin::default()),
    )
    .await
    .expect("bind");
    let addr = server.local_addr().expect("address");
    let stop = CancellationToken::new();
    let running = tokio::spawn(server.run(stop.clone()));
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut buf = [0u8; 256];
    let n = idle.read(&mut buf).await.expect("answer");
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    stop.cancel();
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("run returned")
        .expect("task");
    assert!(
        read_to_close(&mut idle).await.is_some(),
        "idle connection closed"
    );
}

#[test]
fn a_read_token_asked_for_but_unset_refuses_to_start() {
    let unset = "FOREWARN_TEST_NO_SUCH_VARIABLE";
    let e = Admin::from_env(unset, Some(unset), "l.csv".into()).expect_err("closed reads");
    assert!(e.to_string().contains(unset), "{e}");
    let open = Admin::from_env(unset, None, "l.csv".into()).expect("open reads");
    assert_eq!((open.token, open.read_token), (None, None));
    // Any variable that is set will do (PATH always is).
    let closed = Admin::from_env(unset, Some("PATH"), "l.csv".into()).expect("closed reads");
    assert!(closed.read_token.is_some());
}
