//! The checks every request passes before a handler runs, so none of them
//! depends on a handler remembering it.
//!
//! [`auth`] (in [`super::app`], so in-process tests meet it too): a change
//! (any method but GET and HEAD) needs the change token; with a read token
//! configured, a read needs it (or the change token), except the probes
//! and the metrics scrape. It runs before the handler's extractors, so a
//! request with a wrong token is refused before its body is read (issue
//! 26: a 2 MB body was read first). Tokens are compared in constant time.
//!
//! [`with_limits`] (added by the server): a cap on requests in flight,
//! which sheds the excess with 503 at once instead of queueing it, and a
//! per-request timeout answering 408. The probes are not counted, so a
//! flood of slow list requests never makes the service look dead.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use super::app_state::Admin;
use super::error::ApiError;
use super::settings::ServerSettings;

/// Paths open without the read token: liveness, readiness, the metrics
/// scrape (probes and scrapers carry no token).
fn is_open(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// The bearer token of a request.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// Constant time in the bytes compared: no early exit that times the
/// prefix (the length is not secret).
fn same(got: &str, want: &str) -> bool {
    bool::from(got.as_bytes().ct_eq(want.as_bytes()))
}

/// A change is allowed: the change token is configured and given.
pub fn authorize_change(admin: &Admin, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(want) = admin.token.as_deref().filter(|t| !t.is_empty()) else {
        return Err(ApiError::Forbidden(
            "changes are disabled: no API token is configured (set the variable api.token_env names)"
                .into(),
        ));
    };
    let got = bearer(headers)
        .ok_or_else(|| ApiError::Unauthorized("missing Authorization: Bearer <token>".into()))?;
    if same(got, want) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized("wrong token".into()))
    }
}

/// A read is allowed: no read token configured, or the read or change
/// token given.
fn authorize_read(admin: &Admin, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(want) = admin.read_token.as_deref().filter(|t| !t.is_empty()) else {
        return Ok(());
    };
    let got = bearer(headers).ok_or_else(|| {
        ApiError::Unauthorized("reads need Authorization: Bearer <read token>".into())
    })?;
    // Both compared, so the time does not tell which token was close.
    let read = same(got, want);
    let change = admin
        .token
        .as_deref()
        .filter(|t| !t.is_empty())
        .is_some_and(|t| same(got, t));
    if read | change {
        Ok(())
    } else {
        Err(ApiError::Unauthorized("wrong token".into()))
    }
}

/// The token check, before any extractor (and so before any body) runs.
pub async fn auth(State(admin): State<Arc<Admin>>, req: Request, next: Next) -> Response {
    let checked = if req.method() == Method::GET || req.method() == Method::HEAD {
        if is_open(req.uri().path()) {
            Ok(())
        } else {
            authorize_read(&admin, req.headers())
        }
    } else {
        authorize_change(&admin, req.headers())
    };
    match checked {
        Ok(()) => next.run(req).await,
        Err(e) => {
            let mut resp = e.into_response();
            // The body was not read: the connection cannot be reused.
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            resp
        }
    }
}

/// The shared request limits.
#[derive(Clone)]
struct Limits {
    in_flight: Arc<Semaphore>,
    timeout: Duration,
}

/// Sheds requests past the cap (503) and times out slow ones (408).
async fn limit(State(l): State<Limits>, req: Request, next: Next) -> Response {
    let probe = matches!(req.uri().path(), "/healthz" | "/readyz");
    let _permit = if probe {
        None
    } else {
        match l.in_flight.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                let mut resp = ApiError::Unavailable("too many requests in flight; retry".into())
                    .into_response();
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                return resp;
            }
        }
    };
    match tokio::time::timeout(l.timeout, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => {
            let body = serde_json::json!({ "error": "request timed out" });
            let mut resp = (StatusCode::REQUEST_TIMEOUT, axum::Json(body)).into_response();
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            resp
        }
    }
}

/// `app` with the request cap and timeout around every route.
pub fn with_limits(app: Router, settings: &ServerSettings) -> Router {
    let limits = Limits {
        in_flight: Arc::new(Semaphore::new(settings.max_concurrent_requests)),
        timeout: settings.request_timeout,
    };
    app.layer(middleware::from_fn_with_state(limits, limit))
}
