//! `GET /v1/alerts`: order and the silenced / inhibited marks.

use axum::body::{Body, to_bytes};
use axum::http::Request;
use serde_json::Value;
use tower::ServiceExt;

use alerts::{AlertEvent, Scope, Severity, Status};

use crate::state::SharedState;

fn event(gpu: &str, host: &str, kind: &str, severity: Severity, ts: i64) -> AlertEvent {
    let mut labels = alerts::Labels::new();
    labels.insert("gpu".into(), gpu.into());
    labels.insert("host".into(), host.into());
    AlertEvent {
        ts,
        status: Status::Firing,
        severity,
        kind: kind.into(),
        scope: Scope::Gpu,
        labels,
        dedup_key: format!("forewarn/gpu/{gpu}/{kind}"),
        summary: format!("{kind} on {gpu}"),
        risk: 0.9,
        eta_hours: None,
        reasons: Vec::new(),
    }
}

#[tokio::test]
async fn most_severe_and_newest_first_with_silences_and_inhibitions_marked() {
    let state = SharedState::new();
    state.record_alerts(&[
        event("GPU-a", "node-1", "anomaly", Severity::Warning, 1_000),
        event(
            "GPU-b",
            "node-1",
            "gpu_hard_failure",
            Severity::Critical,
            2_000,
        ),
        event("GPU-c", "node-2", "straggler", Severity::Warning, 3_000),
        event(
            "GPU-d",
            "node-2",
            "gpu_hard_failure",
            Severity::Critical,
            500,
        ),
    ]);
    state.set_clock(10_000);
    let silence = alerts::Silence::from_json(
        r#"{"matchers":[{"name":"gpu","value":"GPU-c","isRegex":false,"isEqual":true}],
            "startsAt":"1970-01-01T00:00:00Z","endsAt":"1970-01-02T00:00:00Z",
            "createdBy":"ops","comment":"drain"}"#,
        "s-1".into(),
    )
    .expect("silence");
    state.set_silences(vec![silence]);
    let cfg = crate::config::RawConfig::from_toml(
        "[[alerts.inhibit_rules]]\nsource_matchers = ['kind=\"gpu_hard_failure\"']\ntarget_matchers = ['severity=\"warning\"']\nequal = [\"host\"]\n",
    )
    .and_then(|r| r.validate())
    .expect("config");
    *state.inhibit_rules.write().expect("lock") = cfg.alerts.engine.inhibit_rules.clone();

    let resp = super::super::app(state.clone())
        .oneshot(
            Request::get("/v1/alerts")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("response");
    let body: Value =
        serde_json::from_slice(&to_bytes(resp.into_body(), 1 << 20).await.expect("body"))
            .expect("json");
    let items = body["items"].as_array().expect("items");
    let gpus: Vec<&str> = items
        .iter()
        .map(|a| a["labels"]["gpu"].as_str().expect("gpu"))
        .collect();
    assert_eq!(gpus, ["GPU-b", "GPU-d", "GPU-c", "GPU-a"]);
    let mark = |gpu: &str, field: &str| {
        items
            .iter()
            .find(|a| a["labels"]["gpu"] == gpu)
            .map(|a| a[field].clone())
            .expect("alert")
    };
    assert_eq!(mark("GPU-c", "silenced_by"), serde_json::json!(["s-1"]));
    assert_eq!(mark("GPU-a", "silenced_by"), serde_json::json!([]));
    assert_eq!(
        mark("GPU-a", "inhibited_by"),
        serde_json::json!(["forewarn/gpu/GPU-b/gpu_hard_failure"])
    );
    assert_eq!(
        mark("GPU-c", "inhibited_by"),
        serde_json::json!(["forewarn/gpu/GPU-d/gpu_hard_failure"])
    );
    assert_eq!(mark("GPU-b", "inhibited_by"), serde_json::json!([]));
}
