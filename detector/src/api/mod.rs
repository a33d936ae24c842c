//! REST: per-GPU risk with reasons, ranked and filtered lists, fleet
//! counts, alerts, health, readiness and Prometheus metrics. Handlers read
//! the snapshot the pipeline publishes ([`crate::state`]) and never wait on
//! scoring. `app(state)` builds the router so tests call it with
//! `oneshot` and no socket (axum `examples/testing`).
//!
//! Every request passes the token check of [`guard`] first; the server
//! ([`server`]) adds timeouts and caps around the app.
//!
//! The handlers get an [`AppState`]: the published state plus the handles
//! `serve` builds once the pipeline runs (commands, model reloads, the
//! outbox's delivery counters, the admin settings).

mod admin;
mod alert_list;
mod am_silences;
mod app_state;
mod error;
mod gpus;
mod guard;
mod map;
pub mod remote_write;
pub mod server;
mod settings;

use std::sync::Arc;

use axum::extract::State as AxState;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::{Extension, Json, Router};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::metrics::{ModelInfo, SinkInfo};

pub use error::ApiError;
pub use server::{ServeError, Server, ServerSettings, TlsFiles};

pub use app_state::{Admin, AppState, Delivery};

/// The document's head; the paths come from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "forewarn",
        description = "Per-GPU failure risk with reasons, fleet counts and alerts."
    ),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

/// The `bearer` scheme the changing endpoints name.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
    }
}

/// Every route, each registered with its OpenAPI operation: a route
/// cannot be added without its documentation (`routes!` reads the path
/// and method from the handler's `#[utoipa::path]`).
fn routes(state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi))
        .routes(routes!(gpus::list))
        .routes(routes!(gpus::one))
        .routes(routes!(gpus::fleet))
        .routes(routes!(alert_list::alerts))
        .routes(routes!(admin::list_silences, admin::add_silence))
        .routes(routes!(admin::expire_silence))
        .routes(routes!(am_silences::list, am_silences::post))
        .routes(routes!(am_silences::get_one, am_silences::delete))
        .routes(routes!(admin::add_labels))
        .routes(routes!(admin::model_status))
        .routes(routes!(admin::reload_model))
        .routes(routes!(remote_write::write))
        .merge(map::router(state.shared.clone()))
}

/// The generated OpenAPI document, served at `/openapi.json`.
#[derive(Clone)]
struct Doc(Arc<str>);

/// All routes.
pub fn app(state: impl Into<AppState>) -> Router {
    let state: AppState = state.into();
    let (router, doc) = routes(&state).split_for_parts();
    let json = doc.to_pretty_json().unwrap_or_else(|e| {
        tracing::error!(error = %e, "encoding the OpenAPI document");
        "{}".into()
    });
    router
        .layer(Extension(Doc(json.into())))
        .layer(axum::middleware::from_fn_with_state(
            state.admin.clone(),
            guard::auth,
        ))
        .with_state(state)
}

/// Liveness: 200 unless a component stopped (503 naming it). The body
/// lists every component's condition (up, degraded, down) and its cause.
#[utoipa::path(get, path = "/healthz", responses(
    (status = 200, description = "every component running (some may be degraded and retrying)", content_type = "application/json"),
    (status = 503, description = "a component stopped: `failing` names it", content_type = "application/json"),
))]
async fn healthz(AxState(state): AxState<AppState>) -> impl IntoResponse {
    let failing = state.health.down_parts();
    let code = if failing.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({
        "status": if failing.is_empty() { "ok" } else { "failing" },
        "failing": failing,
        "components": state.health.snapshot(),
    });
    (code, Json(body))
}

/// Readiness: restored, caught up, and every component on the alert path
/// working (503 naming what is not). With partition-aligned Kafka state, a
/// second line names the partitions this instance holds, and a third says
/// when this instance runs the fleet's alert stage.
#[utoipa::path(get, path = "/readyz", responses(
    (status = 200, description = "ready"),
    (status = 503, description = "not ready: the body names why"),
))]
async fn readyz(AxState(state): AxState<AppState>) -> impl IntoResponse {
    let why = state.unready();
    let owned = state.partitions();
    let mut partitions = if owned.is_empty() {
        String::new()
    } else {
        format!("partitions: {}\n", owned.join(","))
    };
    if state
        .fleet_stage_owner
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        partitions.push_str("fleet alert stage: here\n");
    }
    if why.is_empty() {
        (StatusCode::OK, format!("ready\n{partitions}"))
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n{partitions}", why.join(", ")),
        )
    }
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", responses((status = 200, description = "text exposition format 0.0.4", content_type = "text/plain")))]
async fn metrics(AxState(state): AxState<AppState>) -> impl IntoResponse {
    let gpus = state.gpus.len().unwrap_or(0);
    state
        .metrics
        .gpus
        .store(gpus as u64, std::sync::atomic::Ordering::Relaxed);
    let model = state.model_status();
    let info = ModelInfo {
        version: &model.version,
        reloads: model.reloads,
        refused: model.refused,
    };
    let sinks = state.delivery.as_ref().map(|d| SinkInfo {
        outbox: &d.outbox,
        receivers: &d.receivers,
    });
    let fleet = fleet_info(&state);
    let text = state
        .metrics
        .render(info, sinks, &state.health.gauges(), &fleet);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

/// The scrape-time counts of the operator gauges: GPUs per state (one
/// pass over the risk table) and firing alerts per severity.
fn fleet_info(state: &AppState) -> crate::metrics::FleetInfo {
    let mut fleet = crate::metrics::FleetInfo::default();
    if let Err(e) = state
        .gpus
        .for_each(|_, v| fleet.count_state(v.latest.state.as_str()))
    {
        tracing::error!(error = %e, "risk table unreadable for /metrics");
    }
    if let Ok(view) = state.alerts.read() {
        for e in view.active.values() {
            if e.status == alerts::Status::Firing {
                fleet.count_alert(e.severity.as_str());
            }
        }
    }
    fleet
}

/// This document (OpenAPI 3.1, generated from the handlers).
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "this document", content_type = "application/json")))]
async fn openapi(Extension(doc): Extension<Doc>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.0.to_string(),
    )
}

#[cfg(test)]
mod list_tests;
#[cfg(test)]
mod openapi_tests;
#[cfg(test)]
mod server_tests;
#[cfg(test)]
mod tests;
