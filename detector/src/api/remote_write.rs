//! `POST /api/v1/write`: the Prometheus remote-write receiver (1.0). The
//! route exists in every service; it answers 404 unless the source is
//! `remote_write`, whose queue `serve` hands in as an [`Extension`]
//! ([`RemoteWrite`]). Decoding is `crate::sources::remote_write`'s; this
//! file maps its outcomes to the answers the remote-write spec asks for:
//! 2xx taken, 5xx retried by the sender, 4xx dropped by it.
//!
//! Like every change it passes the bearer-token guard first
//! (`remote_write.authorization` in Prometheus's config).

use axum::Extension;
use axum::body::Body;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use features::decode::{DecodeOutput, Decoded, Position};

use super::AppState;
pub use crate::sources::remote_write::RemoteWrite;
use crate::sources::remote_write::{MAX_BODY, Refused, decode_request};

/// What dead letters of this endpoint name as their source.
const SOURCE: &str = "remote-write";

fn answer(code: StatusCode, message: &str) -> Response {
    let mut resp = (code, format!("{message}\n")).into_response();
    if code == StatusCode::SERVICE_UNAVAILABLE {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

/// Prometheus remote-write 1.0 receiver.
#[utoipa::path(post, path = "/api/v1/write", request_body(content = Vec<u8>, description = "a snappy block-compressed protobuf prometheus.WriteRequest (remote-write 1.0)", content_type = "application/x-protobuf"), responses(
    (status = 204, description = "taken (series that could not be decoded are dead-lettered)"),
    (status = 400, description = "not a snappy-compressed WriteRequest: dropped by the sender, dead-lettered here"),
    (status = 401, description = "missing or wrong token"),
    (status = 403, description = "no token configured"),
    (status = 404, description = "the source is not remote_write"),
    (status = 413, description = "the body is over 8 MiB"),
    (status = 415, description = "not remote-write 1.0 (2.0 is not supported: send prometheus.WriteRequest)"),
    (status = 503, description = "the pipeline is busy or stopping: retry after Retry-After"),
), security(("bearer" = [])))]
pub async fn write(
    rw: Option<Extension<RemoteWrite>>,
    AxState(app): AxState<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(Extension(rw)) = rw else {
        return answer(
            StatusCode::NOT_FOUND,
            "remote-write is not enabled: set [source] type = \"remote_write\"",
        );
    };
    let (code, values) = take(&rw, &app, &headers, body).await;
    rw.ingest.metrics.answered(code.0.as_u16(), values);
    answer(code.0, &code.1)
}

type Outcome = ((StatusCode, String), usize);

async fn take(rw: &RemoteWrite, app: &AppState, headers: &HeaderMap, body: Body) -> Outcome {
    let text = |h: header::HeaderName| {
        headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase()
    };
    if text(header::CONTENT_TYPE).contains("io.prometheus.write.v2") {
        let why =
            "remote-write 2.0 is not supported: set protobuf_message: prometheus.WriteRequest";
        return ((StatusCode::UNSUPPORTED_MEDIA_TYPE, why.into()), 0);
    }
    let encoding = text(header::CONTENT_ENCODING);
    if !encoding.is_empty() && encoding != "snappy" {
        let why = format!("Content-Encoding {encoding:?}: only snappy is supported");
        return ((StatusCode::UNSUPPORTED_MEDIA_TYPE, why), 0);
    }
    let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            let why = format!("reading the body (at most {MAX_BODY} bytes): {e}");
            return ((StatusCode::PAYLOAD_TOO_LARGE, why), 0);
        }
    };
    let mut out = DecodeOutput::default();
    let req = match decode_request(&bytes, &mut out) {
        Ok(r) => r,
        Err(e) => {
            let mut dead = rw.dead.clone();
            dead.unit(&app.shared, e.reason(), &e.to_string(), SOURCE, &bytes);
            dead.flush();
            return ((StatusCode::BAD_REQUEST, e.to_string()), 0);
        }
    };
    if !out.errors.is_empty() {
        let mut dead = rw.dead.clone();
        dead.record(
            &app.shared,
            &Decoded {
                position: Position::File { file: SOURCE },
                payload: &[],
                samples: &mut Vec::new(),
                errors: &out.errors,
                last: true,
            },
        );
        dead.flush();
    }
    match rw.ingest.offer(out.samples) {
        Ok(()) => ((StatusCode::NO_CONTENT, String::new()), req.values),
        Err(Refused::Full) => (
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the pipeline is busy: retry".into(),
            ),
            req.values,
        ),
        Err(Refused::Closed) => (
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "the source is stopping: retry".into(),
            ),
            req.values,
        ),
    }
}
