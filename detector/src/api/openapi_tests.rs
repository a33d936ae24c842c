//! The served OpenAPI document is valid OpenAPI 3 and in step with the
//! router: every documented operation is routed, and no route is
//! registered without its documentation.

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use serde_json::Value;
use tower::ServiceExt;

use super::app;
use crate::state::SharedState;

async fn call(method: &str, uri: &str) -> (StatusCode, Vec<u8>) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::empty())
        .expect("request");
    let resp = app(SharedState::new())
        .oneshot(req)
        .await
        .expect("response");
    let status = resp.status();
    let body = to_bytes(resp.into_body(), 1 << 22).await.expect("body");
    (status, body.to_vec())
}

#[tokio::test]
async fn the_document_is_openapi_3_and_lists_every_route() {
    let (status, body) = call("GET", "/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    let text = String::from_utf8(body).expect("utf-8");
    let spec = oas3::from_json(&text).expect("a valid OpenAPI 3 document");
    let version = spec
        .validate_version()
        .expect("a supported OpenAPI version");
    assert_eq!(version.major, 3, "{version}");
    let doc: Value = serde_json::from_str(&text).expect("json");
    let paths = doc["paths"].as_object().expect("paths");

    // Every documented operation reaches a handler: an unrouted path or
    // method gets axum's empty 404 or a 405, a handler's 404 has a body.
    let mut operations = Vec::new();
    for (path, item) in paths {
        for method in item.as_object().expect("path item").keys() {
            if !["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                continue;
            }
            let uri = path.replace("{uuid}", "GPU-x").replace("{id}", "x");
            let (status, body) = call(&method.to_uppercase(), &uri).await;
            assert!(
                status != StatusCode::METHOD_NOT_ALLOWED
                    && !(status == StatusCode::NOT_FOUND && body.is_empty()),
                "{method} {path} is documented but not routed ({status})"
            );
            operations.push(format!("{} {path}", method.to_uppercase()));
        }
    }
    let (status, body) = call("GET", "/not-a-route").await;
    assert!(status == StatusCode::NOT_FOUND && body.is_empty());

    // Routes are only registered through `routes!`, which takes the path
    // and method from the handler's `#[utoipa::path]`: no plain axum
    // route can slip in undocumented.
    let plain = concat!(".rou", "te(");
    for (file, src) in [
        ("api/mod.rs", include_str!("mod.rs")),
        ("api/map/mod.rs", include_str!("map/mod.rs")),
    ] {
        assert!(
            !src.contains(plain),
            "{file} registers a route outside routes!"
        );
    }

    // The API as it stands; a route removed or added shows here in review.
    operations.sort();
    assert_eq!(
        operations,
        [
            "DELETE /api/v2/silence/{silenceID}",
            "DELETE /v1/silences/{id}",
            "GET /",
            "GET /api/v2/silence/{silenceID}",
            "GET /api/v2/silences",
            "GET /healthz",
            "GET /metrics",
            "GET /openapi.json",
            "GET /readyz",
            "GET /ui/app.js",
            "GET /ui/live.js",
            "GET /ui/panel.js",
            "GET /ui/style.css",
            "GET /v1/alerts",
            "GET /v1/fleet",
            "GET /v1/gpus",
            "GET /v1/gpus/{uuid}",
            "GET /v1/map",
            "GET /v1/map/states",
            "GET /v1/models",
            "GET /v1/silences",
            "POST /api/v1/write",
            "POST /api/v2/silences",
            "POST /v1/labels",
            "POST /v1/models/reload",
            "POST /v1/silences",
        ]
    );
    // The changing endpoints name the bearer scheme.
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    assert!(doc["paths"]["/v1/labels"]["post"]["security"].is_array());
}
