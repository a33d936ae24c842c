//! REST through `app(state).oneshot(request)`: no socket.

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use features::Topology;
use serde_json::Value;
use tower::ServiceExt;

use super::app;
use crate::assess::{Assessment, Evidence, HealthState, KINDS, Kind};
use crate::state::{SharedState, State};

fn assessment(gpu: &str, risk: f64, rack: &str, ts_ms: i64) -> Assessment {
    let mut components = [0.0f32; KINDS];
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
        confirmed: 0,
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

    // Active alerts: the GPU's own, and a rack incident naming it.
    let event = |key: &str, gpu: Option<&str>, status, member: &str| alerts::AlertEvent {
        ts: 500_000,
        status,
        severity: alerts::Severity::Critical,
        kind: "thermal".into(),
        scope: if gpu.is_some() {
            alerts::Scope::Gpu
        } else {
            alerts::Scope::Rack
        },
        labels: gpu
            .map(|g| [("gpu".to_owned(), g.to_owned())].into())
            .unwrap_or_default(),
        dedup_key: key.into(),
        summary: "s".into(),
        risk: 0.9,
        eta_hours: None,
        reasons: vec![alerts::Reason {
            signal: "member".into(),
            detail: member.into(),
        }],
    };
    use alerts::Status::{Firing, Resolved};
    s.record_alerts(&[
        event("k/GPU-a", Some("GPU-a"), Firing, ""),
        event("k/GPU-b", Some("GPU-b"), Firing, ""),
        event("k/rack", None, Firing, "GPU-a hot"),
    ]);
    let (_, body) = get(&s, "/v1/gpus/GPU-a").await;
    assert_eq!(body["active_alerts"].as_array().expect("alerts").len(), 2);
    s.record_alerts(&[event("k/GPU-a", Some("GPU-a"), Resolved, "")]);
    let (_, body) = get(&s, "/v1/gpus/GPU-a").await;
    let active = body["active_alerts"].as_array().expect("alerts");
    assert_eq!(active.len(), 1);
    assert_eq!(active[0]["dedup_key"], "k/rack");
    let (_, body) = get(&s, "/v1/gpus/GPU-b").await;
    assert_eq!(body["active_alerts"].as_array().expect("alerts").len(), 1);
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
    s.set_partitions(vec![("telemetry".into(), 0), ("telemetry".into(), 3)]);
    let (st, body) = get(&s, "/readyz").await;
    assert_eq!(st, StatusCode::OK);
    assert!(
        body.as_str()
            .is_some_and(|b| b.ends_with("partitions: telemetry-0,telemetry-3\n")),
        "{body}"
    );
    // Component health: a degraded outbox fails readiness, not liveness;
    // a stopped part fails both, and /healthz names it.
    s.health.register("outbox", true);
    s.health.register("shard-0", true);
    s.health.degraded("outbox", "No space left on device");
    let (st, body) = get(&s, "/readyz").await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body.as_str().is_some_and(|b| b.contains("outbox")),
        "{body}"
    );
    let (st, body) = get(&s, "/healthz").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(body["components"]["outbox"]["condition"], "degraded");
    assert_eq!(
        body["components"]["outbox"]["cause"],
        "No space left on device"
    );
    s.health.up("outbox");
    s.health.down("shard-0", "the thread panicked");
    let (st, body) = get(&s, "/healthz").await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["failing"], serde_json::json!(["shard-0"]));
    assert_eq!(get(&s, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
    let (st, body) = get(&s, "/metrics").await;
    assert_eq!(st, StatusCode::OK);
    let text = body.as_str().expect("text");
    assert!(text.contains("forewarn_gpus 3"), "{text}");
    assert!(
        text.contains("forewarn_component_up{component=\"shard-0\"} 0")
            && text.contains("forewarn_component_up{component=\"outbox\"} 1"),
        "{text}"
    );
    let (st, body) = get(&s, "/openapi.json").await;
    assert_eq!(st, StatusCode::OK);
    assert!(body["paths"]["/v1/gpus/{uuid}"].is_object());
}

async fn send(
    state: impl Into<super::AppState>,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: &str,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = app(state)
        .oneshot(req.body(Body::from(body.to_string())).expect("request"))
        .await
        .expect("response");
    let status = resp.status();
    let bytes = to_bytes(resp.into_body(), 1 << 20).await.expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn changes_need_the_token_and_labels_reach_the_store() {
    let label = r#"{"gpu":"GPU-1","ts":"2026-11-30T04:12:00Z","kind":"hbm_ecc"}"#;
    // No token configured: changes refused, reads fine.
    let (status, body) = send(SharedState::new(), "POST", "/v1/labels", Some("x"), label).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = send(SharedState::new(), "GET", "/v1/silences", None, "").await;
    assert_eq!(status, StatusCode::OK);

    let file = std::env::temp_dir().join(format!("fw-labels-{}.csv", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let st = super::AppState::new(SharedState::new()).with_admin(super::Admin {
        token: Some("s3cret".into()),
        labels_file: Some(file.clone()),
        ..Default::default()
    });
    let (status, _) = send(st.clone(), "POST", "/v1/labels", None, label).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = send(st.clone(), "POST", "/v1/labels", Some("s3cre"), label).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = send(
        st.clone(),
        "POST",
        "/v1/labels",
        Some("s3cret"),
        r#"[{"gpu":"GPU-1","ts":"2026-11-30T04:12:00Z","kind":"hbm_ecc"},{"gpu":"GPU-2","ts":1764460000000,"kind":"false_alarm","comment":"INC-1"}]"#,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let text = std::fs::read_to_string(&file).expect("label store");
    assert!(text.starts_with("gpu,ts,kind\n"), "{text}");
    assert!(
        text.contains("GPU-1,2026-11-30T04:12:00Z,hbm_ecc\n"),
        "{text}"
    );
    assert!(text.contains(",false_alarm\n"), "{text}");
    let (status, body) = send(
        st.clone(),
        "POST",
        "/v1/labels",
        Some("s3cret"),
        r#"{"gpu":"GPU-1","kind":"bad kind"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"].as_str().unwrap_or("").contains("kind"),
        "{body}"
    );
    // A silence body is validated before the pipeline is asked.
    let (status, body) = send(
        st.clone(),
        "POST",
        "/v1/silences",
        Some("s3cret"),
        r#"{"matchers":[]}"#,
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // A good one needs the running pipeline.
    let good = r#"{"matchers":[{"name":"rack","value":"r07","isRegex":false}],"startsAt":"2026-11-30T00:00:00Z","endsAt":"2026-11-30T04:00:00Z","createdBy":"alice","comment":"CHG-1 CDU swap"}"#;
    let (status, _) = send(st.clone(), "POST", "/v1/silences", Some("s3cret"), good).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    // Model reloads need the token too; the status is public.
    let (status, _) = send(st.clone(), "POST", "/v1/models/reload", None, "").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = send(st, "GET", "/v1/models", None, "").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["version"], crate::reload::BUILTIN_VERSION);
    let _ = std::fs::remove_file(&file);
}
