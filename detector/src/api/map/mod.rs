//! The fleet map: `GET /` serves one self-contained page (HTML, CSS and JS
//! compiled into the binary, nothing fetched from elsewhere) that draws
//! every GPU as a cell of one canvas; `GET /v1/map` gives it the layout once
//! and `GET /v1/map/states?since=v` the cells changed since version `v` as
//! compact arrays ([`cache`]). Drill-down uses the existing
//! `/v1/gpus/{uuid}` and `/v1/alerts`.
//!
//! Reads [`SharedState::gpus`] only; keeps its own cache, so the pipeline
//! and the rest of the API know nothing of it.

mod cache;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State as AxState};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::ApiError;
use crate::state::State;
use cache::MapCache;

const INDEX_HTML: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const STYLE_CSS: &str = include_str!("../ui/style.css");
const PANEL_JS: &str = include_str!("../ui/panel.js");

/// What the map's handlers share: the pipeline's state and the cache.
#[derive(Clone)]
pub struct MapState {
    shared: State,
    cache: Arc<Mutex<MapCache>>,
}

/// The map's routes, with their own state, ready to merge into the app.
pub fn router<S: Clone + Send + Sync + 'static>(shared: State) -> Router<S> {
    let st = MapState {
        shared,
        cache: Arc::new(Mutex::new(MapCache::default())),
    };
    Router::new()
        .route("/", get(index))
        .route("/ui/app.js", get(app_js))
        .route("/ui/panel.js", get(panel_js))
        .route("/ui/style.css", get(style_css))
        .route("/v1/map", get(layout))
        .route("/v1/map/states", get(states))
        .with_state(st)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn panel_js() -> Response {
    asset("text/javascript; charset=utf-8", PANEL_JS)
}

async fn style_css() -> Response {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

/// Refreshes the cache from the risk table (read lock only, throttled).
fn refreshed(st: &MapState, force: bool) -> Result<std::sync::MutexGuard<'_, MapCache>, ApiError> {
    let mut cache = st
        .cache
        .lock()
        .map_err(|_| ApiError::Internal("map cache lock poisoned".into()))?;
    let gpus = st
        .shared
        .gpus
        .read()
        .map_err(|_| ApiError::Internal("risk table lock poisoned".into()))?;
    cache.refresh(gpus.len(), || gpus.iter(), force);
    Ok(cache)
}

fn json_body(body: String) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// `GET /v1/map`: the layout (names and cell order).
async fn layout(AxState(st): AxState<MapState>) -> Result<Response, ApiError> {
    let mut cache = refreshed(&st, false)?;
    let json = cache
        .layout_json()
        .map_err(|e| ApiError::Internal(format!("serializing the map layout: {e}")))?;
    drop(cache);
    Ok(json_body(String::clone(&json)))
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct StatesQuery {
    /// The `version` of the page's last answer; 0 or absent = everything.
    since: Option<u64>,
}

/// `GET /v1/map/states?since=v`: cells changed after version `v`.
async fn states(
    AxState(st): AxState<MapState>,
    Query(q): Query<StatesQuery>,
) -> Result<Response, ApiError> {
    let delta = refreshed(&st, false)?.delta(q.since.unwrap_or(0));
    let body = serde_json::to_string(&delta)
        .map_err(|e| ApiError::Internal(format!("serializing map states: {e}")))?;
    Ok(json_body(body))
}
