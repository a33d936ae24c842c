//! The fleet map: `GET /` serves one self-contained page (HTML, CSS and JS
//! compiled into the binary, nothing fetched from elsewhere) that draws
//! every GPU as a cell of one canvas; `GET /v1/map` gives it the layout and
//! `GET /v1/map/states?since=v` the cells changed since version `v`, each
//! as one binary frame of columns ([`frame`]) built from the map's own
//! cache ([`cache`]) and answered from its latest snapshot ([`hub`]).
//! Drill-down uses the existing `/v1/gpus/{uuid}` and `/v1/alerts`.
//!
//! Reads [`SharedState::gpus`](crate::state::SharedState) only, off the
//! request path; the pipeline and the rest of the API know nothing of it.

mod cache;
mod cells;
mod frame;
mod hub;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State as AxState};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use crate::state::State;
use hub::Hub;

const INDEX_HTML: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const STYLE_CSS: &str = include_str!("../ui/style.css");
const LIVE_JS: &str = include_str!("../ui/live.js");
const PANEL_JS: &str = include_str!("../ui/panel.js");

/// What the map's handlers share: the cache and its latest snapshot.
#[derive(Clone)]
pub struct MapState {
    hub: Arc<Hub>,
}

/// The map's routes (documented, see `super::routes`), with their own
/// state, ready to merge into the app.
pub fn router<S: Clone + Send + Sync + 'static>(shared: State) -> OpenApiRouter<S> {
    let st = MapState {
        hub: Hub::new(shared),
    };
    OpenApiRouter::new()
        .routes(routes!(index))
        .routes(routes!(app_js))
        .routes(routes!(live_js))
        .routes(routes!(panel_js))
        .routes(routes!(style_css))
        .routes(routes!(layout))
        .routes(routes!(states))
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

/// The fleet map: one self-contained page (HTML, CSS, JS in the binary)
/// drawing every GPU as a cell of one canvas; see docs/fleet-map.md.
#[utoipa::path(get, path = "/", responses((status = 200, description = "the page", content_type = "text/html")))]
async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// The map page's script: state, wire format, layout and drawing.
#[utoipa::path(get, path = "/ui/app.js", responses((status = 200, description = "script", content_type = "text/javascript")))]
async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// The map page's script: live updates, filters, mouse.
#[utoipa::path(get, path = "/ui/live.js", responses((status = 200, description = "script", content_type = "text/javascript")))]
async fn live_js() -> Response {
    asset("text/javascript; charset=utf-8", LIVE_JS)
}

/// The map page's script: side panel and summaries.
#[utoipa::path(get, path = "/ui/panel.js", responses((status = 200, description = "script", content_type = "text/javascript")))]
async fn panel_js() -> Response {
    asset("text/javascript; charset=utf-8", PANEL_JS)
}

/// The map page's style sheet.
#[utoipa::path(get, path = "/ui/style.css", responses((status = 200, description = "style sheet", content_type = "text/css")))]
async fn style_css() -> Response {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

/// A frame as the answer; never cached by the browser (the page asks
/// for what changed since the version it holds).
fn frame_body(body: Bytes) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// `GET /v1/map`: the layout (names and cell order), encoded once per
/// layout version and shared by every request.
#[utoipa::path(get, path = "/v1/map", responses((status = 200, content_type = "application/octet-stream", description = "one map frame (\"FWM1\", u32 header length, JSON header, then little-endian columns each padded to 8 bytes; see docs/fleet-map.md). Header {layout_version, n, clusters, rack_names, rack_cluster, host_names, host_rack, models, cols}; columns gpu_host, gpu_model (u32 per cell, indexing host_names and models), gpu_id_end (u32 end offset of each GPU id in gpu_id_bytes), gpu_id_bytes (the ids as UTF-8, back to back)")))]
async fn layout(AxState(st): AxState<MapState>) -> Result<Response, ApiError> {
    Ok(frame_body(st.hub.snapshot().await?.layout.clone()))
}

#[derive(Debug, Deserialize, Default, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatesQuery {
    /// The `version` of the page's last answer; 0 or absent = everything.
    since: Option<u64>,
}

/// `GET /v1/map/states?since=v`: cells changed after version `v`.
#[utoipa::path(get, path = "/v1/map/states", params(StatesQuery), responses(
    (status = 200, content_type = "application/octet-stream", description = "one map frame as for /v1/map. Header {layout_version, version, full, n, jobs_from, jobs (names first seen after since, starting at index jobs_from), cols}; columns idx (u32 cell index; absent when full: then every cell in order), job (u32 index into the job names; 0 = none), state (u8: 0 healthy, 1 watch, 2 degraded, 3 failing, 4 silent), risk (u8 percent), each n long. A layout_version different from the page's means: fetch /v1/map again."),
    (status = 400, description = "bad or unknown parameter"),
))]
async fn states(
    AxState(st): AxState<MapState>,
    Query(q): Query<StatesQuery>,
) -> Result<Response, ApiError> {
    let snap = st.hub.snapshot().await?;
    let delta = snap.cells.delta(q.since.unwrap_or(0));
    Ok(frame_body(frame::states(&delta)))
}
