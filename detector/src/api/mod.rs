//! REST: per-GPU risk with reasons, ranked and filtered lists, fleet
//! counts, alerts, health, readiness and Prometheus metrics. Handlers read
//! the snapshot the pipeline publishes ([`crate::state`]) and never wait on
//! scoring. `app(state)` builds the router so tests call it with
//! `oneshot` and no socket (axum `examples/testing`).

mod admin;
mod error;
mod gpus;
mod map;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{delete, get};

pub use error::ApiError;

use crate::state::State;

/// All routes.
pub fn app(state: State) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/v1/gpus", get(gpus::list))
        .route("/v1/gpus/{uuid}", get(gpus::one))
        .route("/v1/fleet", get(gpus::fleet))
        .route("/v1/alerts", get(gpus::alerts))
        .route(
            "/v1/silences",
            get(admin::list_silences).post(admin::add_silence),
        )
        .route("/v1/silences/{id}", delete(admin::expire_silence))
        .route("/v1/labels", axum::routing::post(admin::add_labels))
        .route("/v1/models", get(admin::model_status))
        .route(
            "/v1/models/reload",
            axum::routing::post(admin::reload_model),
        )
        .merge(map::router(state.clone()))
        .with_state(state)
}

async fn readyz(axum::extract::State(state): axum::extract::State<State>) -> impl IntoResponse {
    if state.is_ready() {
        (StatusCode::OK, "ready\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
    }
}

async fn metrics(axum::extract::State(state): axum::extract::State<State>) -> impl IntoResponse {
    let gpus = state.gpus.len().unwrap_or(0);
    state
        .metrics
        .gpus
        .store(gpus as u64, std::sync::atomic::Ordering::Relaxed);
    let model = state
        .model
        .read()
        .map(|m| m.clone())
        .unwrap_or_else(|_| crate::reload::ModelStatus::builtin());
    let mut text = state.metrics.render(&model);
    if let Some((outbox, receivers)) = state.outbox.get() {
        crate::metrics::render_sinks(&mut text, outbox, receivers);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text)
}

async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        include_str!("openapi.json"),
    )
}

#[cfg(test)]
mod tests;
