//! Test receivers: small axum servers on 127.0.0.1 that check each payload
//! against the specs in `shared/reference/` (400 when it does not conform)
//! and answer from a script (202 / 200, 400, 429 with Retry-After, 500,
//! hang past the client's timeout), recording what they accepted.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// Reply with this status.
    Status(u16),
    /// 429 with `Retry-After: <secs>`.
    RetryAfter(u64),
    /// Sleep, then succeed (the client should have timed out).
    Hang(Duration),
    /// 400 whose body echoes the request (to check redaction).
    Echo400,
}

pub type Validate = fn(&Value) -> Result<(), String>;

pub struct Inner {
    pub script: VecDeque<Answer>,
    pub ok_status: u16,
    pub ok_body: &'static str,
    pub validate: Validate,
    /// Answer 503 to everything until then.
    pub down_until: Option<Instant>,
    pub accepted: Vec<(Instant, Value)>,
    pub invalid: Vec<String>,
    pub requests: usize,
}

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub inner: Arc<Mutex<Inner>>,
}

async fn handle(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let text = String::from_utf8_lossy(&body).to_string();
    let (answer, validate, ok) = {
        let mut g = inner.lock().unwrap();
        g.requests += 1;
        if g.down_until.is_some_and(|t| Instant::now() < t) {
            return (StatusCode::SERVICE_UNAVAILABLE, "down").into_response();
        }
        (g.script.pop_front(), g.validate, (g.ok_status, g.ok_body))
    };
    if headers.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/json") {
        return (
            StatusCode::BAD_REQUEST,
            "content-type must be application/json",
        )
            .into_response();
    }
    let value: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("invalid JSON: {e}")).into_response(),
    };
    if let Err(problem) = validate(&value) {
        inner.lock().unwrap().invalid.push(problem.clone());
        return (StatusCode::BAD_REQUEST, problem).into_response();
    }
    match answer {
        Some(Answer::Status(s)) if !(200..300).contains(&s) => {
            return (StatusCode::from_u16(s).unwrap(), "scripted failure").into_response();
        }
        Some(Answer::RetryAfter(secs)) => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", secs.to_string())],
                "slow down",
            )
                .into_response();
        }
        Some(Answer::Echo400) => {
            return (StatusCode::BAD_REQUEST, format!("rejected: {text}")).into_response();
        }
        Some(Answer::Hang(d)) => tokio::time::sleep(d).await,
        _ => {}
    }
    inner.lock().unwrap().accepted.push((Instant::now(), value));
    (StatusCode::from_u16(ok.0).unwrap(), ok.1).into_response()
}

impl Receiver {
    /// Starts a receiver answering `ok_status` / `ok_body` after `script`.
    pub async fn start(
        validate: Validate,
        ok_status: u16,
        ok_body: &'static str,
        script: Vec<Answer>,
    ) -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            script: script.into(),
            ok_status,
            ok_body,
            validate,
            down_until: None,
            accepted: Vec::new(),
            invalid: Vec::new(),
            requests: 0,
        }));
        let app = Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url: format!("http://{addr}"),
            inner,
        }
    }

    pub fn accepted(&self) -> Vec<Value> {
        self.inner
            .lock()
            .unwrap()
            .accepted
            .iter()
            .map(|(_, v)| v.clone())
            .collect()
    }

    pub fn accepted_at(&self) -> Vec<Instant> {
        self.inner
            .lock()
            .unwrap()
            .accepted
            .iter()
            .map(|(t, _)| *t)
            .collect()
    }

    pub fn invalid(&self) -> Vec<String> {
        self.inner.lock().unwrap().invalid.clone()
    }
}

/// Polls `cond` every 20 ms for at most `limit`.
pub async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

/// A fresh directory under the system temp dir.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!(
        "forewarn-alerts-{name}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s<'a>(v: &'a Value, k: &str) -> Result<&'a str, String> {
    v.get(k)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("missing string {k}"))
}

/// PagerDuty Events API v2 (Trigger Events page, OpenAPI `/enqueue`).
pub fn pagerduty(v: &Value) -> Result<(), String> {
    s(v, "routing_key")?;
    let action = s(v, "event_action")?;
    if !["trigger", "acknowledge", "resolve"].contains(&action) {
        return Err(format!("bad event_action {action}"));
    }
    if let Some(k) = v.get("dedup_key") {
        let k = k.as_str().ok_or("dedup_key not a string")?;
        if k.chars().count() > 255 {
            return Err("dedup_key longer than 255".into());
        }
    } else if action != "trigger" {
        return Err("dedup_key required for acknowledge / resolve".into());
    }
    if action == "trigger" {
        let p = v.get("payload").ok_or("trigger needs payload")?;
        let summary = s(p, "summary")?;
        if summary.is_empty() || summary.chars().count() > 1024 {
            return Err("payload.summary must be 1..=1024 chars".into());
        }
        s(p, "source")?;
        if !["critical", "error", "warning", "info"].contains(&s(p, "severity")?) {
            return Err("bad payload.severity".into());
        }
        if let Some(t) = p.get("timestamp") {
            alerts::time::parse_rfc3339(t.as_str().ok_or("timestamp not a string")?)
                .map_err(|e| e.to_string())?;
        }
        if p.get("custom_details").is_some_and(|d| !d.is_object()) {
            return Err("custom_details must be an object".into());
        }
        for l in v
            .get("links")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            s(l, "href")?;
        }
    }
    Ok(())
}

/// Slack incoming webhook: `text` fallback beside Block Kit `blocks`.
pub fn slack(v: &Value) -> Result<(), String> {
    if s(v, "text")?.is_empty() {
        return Err("text fallback must not be empty".into());
    }
    let blocks = v
        .get("blocks")
        .and_then(Value::as_array)
        .ok_or("blocks must be an array")?;
    if blocks.is_empty() || blocks.len() > 50 {
        return Err("1..=50 blocks".into());
    }
    for b in blocks {
        match s(b, "type")? {
            "header" => {
                let t = b.get("text").ok_or("header.text")?;
                if s(t, "type")? != "plain_text" || s(t, "text")?.chars().count() > 150 {
                    return Err("header text must be plain_text <= 150".into());
                }
            }
            "section" => {
                let t = b.get("text").ok_or("section.text")?;
                if s(t, "text")?.chars().count() > 3000 {
                    return Err("section text > 3000".into());
                }
            }
            "context" => {
                b.get("elements")
                    .and_then(Value::as_array)
                    .ok_or("context.elements")?;
            }
            other => return Err(format!("unexpected block type {other}")),
        }
    }
    Ok(())
}

/// Alertmanager `POST /api/v2/alerts` (`postableAlerts`).
pub fn alertmanager(v: &Value) -> Result<(), String> {
    let alerts = v.as_array().ok_or("body must be an array")?;
    for a in alerts {
        let labels = a
            .get("labels")
            .and_then(Value::as_object)
            .ok_or("labels required")?;
        if labels.values().any(|x| !x.is_string()) {
            return Err("label values must be strings".into());
        }
        if labels
            .get("alertname")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err("alertname label required".into());
        }
        if let Some(ann) = a.get("annotations") {
            let ann = ann.as_object().ok_or("annotations must be an object")?;
            if ann.values().any(|x| !x.is_string()) {
                return Err("annotation values must be strings".into());
            }
        }
        for k in ["startsAt", "endsAt"] {
            if let Some(t) = a.get(k) {
                alerts::time::parse_rfc3339(t.as_str().ok_or("time not a string")?)
                    .map_err(|e| e.to_string())?;
            }
        }
        if a.get("generatorURL").is_some_and(|u| !u.is_string()) {
            return Err("generatorURL must be a string".into());
        }
    }
    Ok(())
}

/// The alert contract, exactly.
pub fn contract(v: &Value) -> Result<(), String> {
    let ev: alerts::AlertEvent = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let value = ev.dedup_key.split('/').nth(2).unwrap_or("");
    if ev.dedup_key != alerts::dedup_key(ev.scope, value, &ev.kind) {
        return Err("dedup_key does not follow forewarn/<scope>/<value>/<kind>".into());
    }
    Ok(())
}
