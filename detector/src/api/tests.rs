//! REST through `app(state).oneshot(request)`: no socket.

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use features::Topology;
use serde_json::Value;
use tower::ServiceExt;

use super::app;
use crate::assess::{Assessment, Evidence, HealthState, Kind};
use crate::state::{SharedState, State};

fn assessment(gpu: &str, risk: f64, rack: &str, ts_ms: i64) -> Assessment {
    let mut components = [0.0f32; 8];
    components[Kind::HbmEccTrend as usize] = risk as f32;
    Assessment {
        ts_ms,
        gpu: gpu.into(),
        topo: Topology {
            host: Some("node-0001".into()),
            rack: Some(rack.into()),
            cluster: Some("east-1".into()),
            model: None,
            job: Some("train-1".into()),
        },
        risk,
        state: HealthState::from_risk(risk),
        kind: Kind::HbmEccTrend,
        components,
        anomaly_grade: 0.0,
        eta_hours: None,
        reasons: vec![Evidence {
            signal: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL".into(),
            detail: format!("rate {risk}"),
        }],
    }
}

fn state() -> State {
    let s = SharedState::new();
    s.publish(&[
        assessment("GPU-a", 0.1, "r01", 1_000),
        assessment("GPU-b", 0.9, "r02", 1_000),
        assessment("GPU-c", 0.5, "r01", 1_000),
    ]);
    s.publish(&[assessment("GPU-a", 0.2, "r01", 400_000)]);
    s
}

async fn get(state: &State, uri: &str) -> (StatusCode, Value) {
    let resp = app(state.clone())
        .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
        .await
        .expect("response");
    let status = resp.status();
    let bytes = to_bytes(resp.into_body(), 1 << 20).await.expect("body");
    (
        status,
        serde_json::from_slice(&bytes)
            .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into())),
    )
}

#[tokio::test]
async fn gpus_are_ranked_by_risk_filtered_and_paginated() {
    let s = state();
    let (st, body) = get(&s, "/v1/gpus?sort=risk").await;
    assert_eq!(st, StatusCode::OK);
    let ids: Vec<&str> = body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|g| g["gpu"].as_str().expect("gpu"))
        .collect();
    assert_eq!(ids, ["GPU-b", "GPU-c", "GPU-a"]);
    let (_, body) = get(&s, "/v1/gpus?rack=r01&limit=1&offset=1").await;
    assert_eq!(body["total"], 2);
    assert_eq!(body["items"][0]["gpu"], "GPU-a");
    let (_, body) = get(&s, "/v1/gpus?state=failing").await;
    assert_eq!(body["items"][0]["gpu"], "GPU-b");
    let (st, _) = get(&s, "/v1/gpus?sort=color").await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) = get(&s, "/v1/gpus?nonsense=1").await;
    assert_eq!(
        st,
        StatusCode::BAD_REQUEST,
        "unknown query parameters are errors"
    );
}

#[tokio::test]
async fn one_gpu_has_reasons_components_and_history() {
    let s = state();
    let (st, body) = get(&s, "/v1/gpus/GPU-a").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(body["risk"], 0.2);
    assert_eq!(
        body["reasons"][0]["signal"],
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
    );
    assert_eq!(body["components"]["hbm_ecc_trend"], 0.2);
    assert_eq!(
        body["history"].as_array().expect("history").len(),
        2,
        "a point per 5 minutes"
    );
    assert_eq!(body["rack"], "r01");
    let (st, body) = get(&s, "/v1/gpus/GPU-zzz").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(body["error"].as_str().expect("error").contains("GPU-zzz"));
}

#[tokio::test]
async fn fleet_health_ready_and_metrics() {
    let s = state();
    let (_, body) = get(&s, "/v1/fleet").await;
    assert_eq!(body["gpus"], 3);
    assert_eq!(body["states"]["failing"], 1);
    assert_eq!(body["states"]["watch"], 1);
    let (st, _) = get(&s, "/readyz").await;
    assert_eq!(
        st,
        StatusCode::SERVICE_UNAVAILABLE,
        "not ready before restore"
    );
    s.set_ready(true);
    assert_eq!(get(&s, "/readyz").await.0, StatusCode::OK);
    let (st, body) = get(&s, "/metrics").await;
    assert_eq!(st, StatusCode::OK);
    let text = body.as_str().expect("text");
    assert!(text.contains("forewarn_gpus 3"), "{text}");
    let (st, body) = get(&s, "/openapi.json").await;
    assert_eq!(st, StatusCode::OK);
    assert!(body["paths"]["/v1/gpus/{uuid}"].is_object());
}
