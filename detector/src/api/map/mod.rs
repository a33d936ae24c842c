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
mod frame;
mod hub;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State as AxState};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::ApiError;
use crate::state::State;
use hub::Hub;

const INDEX_HTML: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const STYLE_CSS: &str = include_str!("../ui/style.css");
const PANEL_JS: &str = include_str!("../ui/panel.js");

/// What the map's handlers share: the cache and its latest snapshot.
#[derive(Clone)]
pub struct MapState {
    hub: Arc<Hub>,
}

/// The map's routes, with their own state, ready to merge into the app.
pub fn router<S: Clone + Send + Sync + 'static>(shared: State) -> Router<S> {
    let st = MapState {
        hub: Hub::new(shared),
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
async fn layout(AxState(st): AxState<MapState>) -> Result<Response, ApiError> {
    Ok(frame_body(st.hub.snapshot().await?.layout.clone()))
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
    let snap = st.hub.snapshot().await?;
    let delta = snap.cells.delta(q.since.unwrap_or(0));
    Ok(frame_body(frame::states(&delta)))
}
