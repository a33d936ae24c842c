//! The endpoints that change things: silences (`GET / POST / DELETE
//! /v1/silences`) and operator labels (`POST /v1/labels`). Changes need
//! `Authorization: Bearer <token>` (the token comes from the environment
//! variable `api.token_env` names); with no token configured they are
//! refused. Reads need no token.
//!
//! Silences go to the alert engine as commands through the pipeline
//! ([`crate::pipeline::Command`]), in order with the data, so a silence
//! applies from the next assessment on and is part of the next checkpoint.
//! Labels are appended to the label store (the contract's `gpu,ts,kind`
//! CSV) that `forewarn train` reads: a confirmed failure or repair ticket,
//! or `false_alarm` for "this alert was wrong". Model reloads
//! (`POST /v1/models/reload`) load the newest artifact ([`crate::reload`]).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::ApiError;
use crate::pipeline::Command;
use crate::state::State;

fn authorize(state: &State, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(want) = state.admin.token.as_deref().filter(|t| !t.is_empty()) else {
        return Err(ApiError::Forbidden(
            "changes are disabled: no API token is configured (set the variable api.token_env names)"
                .into(),
        ));
    };
    let got = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| ApiError::Unauthorized("missing Authorization: Bearer <token>".into()))?;
    // Compare every byte: no early exit that times the prefix.
    let same = got.len() == want.len()
        && got
            .bytes()
            .zip(want.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if same {
        Ok(())
    } else {
        Err(ApiError::Unauthorized("wrong token".into()))
    }
}

async fn command(state: &State, cmd: Command) -> Result<Value, ApiError> {
    let Some(handle) = state.pipeline.get().cloned() else {
        return Err(ApiError::Unavailable("the pipeline is not running".into()));
    };
    let answer = tokio::task::spawn_blocking(move || handle.control(cmd))
        .await
        .map_err(|e| ApiError::Internal(format!("control task: {e}")))?
        .map_err(|e| ApiError::Unavailable(e.to_string()))?;
    answer.map_err(ApiError::NotFound)
}

/// `GET /v1/silences`.
pub async fn list_silences(AxState(state): AxState<State>) -> Result<Json<Value>, ApiError> {
    let list = state
        .silences
        .read()
        .map_err(|_| ApiError::Internal("silence lock poisoned".into()))?;
    let now = crate::checkpoint::wall_ms();
    let items: Vec<Value> = list
        .iter()
        .map(|s| {
            let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
            if let Some(o) = v.as_object_mut() {
                o.insert("active".into(), json!(s.active_at(now)));
            }
            v
        })
        .collect();
    Ok(Json(json!({ "total": items.len(), "items": items })))
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// `POST /v1/silences`: Alertmanager's silence body.
pub async fn add_silence(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    body: String,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    authorize(&state, &headers)?;
    let id = format!(
        "api-{}-{}",
        crate::checkpoint::wall_ms(),
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    );
    let silence =
        alerts::Silence::from_json(&body, id).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    tracing::info!(id = %silence.id, by = %silence.created_by, comment = %silence.comment, "silence added");
    let v = command(&state, Command::AddSilence(silence)).await?;
    Ok((StatusCode::CREATED, Json(v)))
}

/// `DELETE /v1/silences/{id}`: ends it now (it stays listed, expired).
pub async fn expire_silence(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    tracing::info!(%id, "silence expired");
    Ok(Json(command(&state, Command::ExpireSilence(id)).await?))
}

/// One operator label.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelBody {
    pub gpu: String,
    /// RFC 3339 or epoch ms; default now.
    pub ts: Option<Value>,
    /// A failure kind (`hbm_ecc`, `thermal`, `sudden_death`, …, or a
    /// ticket's own) or `false_alarm`.
    pub kind: String,
    /// Free text (ticket id, who); logged, not stored in the CSV.
    pub comment: Option<String>,
}

/// `POST /v1/labels`: one label or an array of them.
pub async fn add_labels(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    body: String,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    authorize(&state, &headers)?;
    let Some(path) = state.admin.labels_file.clone() else {
        return Err(ApiError::Unavailable(
            "no label store configured (labels.file)".into(),
        ));
    };
    let labels: Vec<LabelBody> = match serde_json::from_str::<Value>(&body) {
        Ok(Value::Array(_)) => serde_json::from_str(&body),
        _ => serde_json::from_str::<LabelBody>(&body).map(|l| vec![l]),
    }
    .map_err(|e| ApiError::BadRequest(format!("label body: {e}")))?;
    let mut lines = String::new();
    for (i, l) in labels.iter().enumerate() {
        let bad = |m: String| ApiError::BadRequest(format!("label {i}: {m}"));
        if l.gpu.trim().is_empty() || l.gpu.contains([',', '\n', '"']) {
            return Err(bad(
                "gpu must be a non-empty id without commas or quotes".into()
            ));
        }
        if l.kind.is_empty()
            || !l
                .kind
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(bad(format!("kind {:?} must be [A-Za-z0-9_]+", l.kind)));
        }
        let ts = match &l.ts {
            None => crate::checkpoint::wall_ms(),
            Some(Value::Number(n)) => n.as_i64().ok_or_else(|| bad("ts: not an integer".into()))?,
            Some(Value::String(s)) => features::time::parse_timestamp(s)
                .ok_or_else(|| bad(format!("ts {s:?}: not RFC 3339")))?,
            Some(other) => return Err(bad(format!("ts {other}: expected RFC 3339 or epoch ms"))),
        };
        lines.push_str(&format!(
            "{},{},{}\n",
            l.gpu,
            features::time::format_rfc3339_s(ts),
            l.kind
        ));
        tracing::info!(gpu = %l.gpu, kind = %l.kind, comment = ?l.comment, "label recorded");
    }
    let n = labels.len();
    tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let new = !path.exists();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        if new {
            f.write_all(b"gpu,ts,kind\n")?;
        }
        f.write_all(lines.as_bytes())?;
        f.sync_data()
    })
    .await
    .map_err(|e| ApiError::Internal(format!("label task: {e}")))?
    .map_err(|e| ApiError::Internal(format!("appending labels: {e}")))?;
    Ok((StatusCode::CREATED, Json(json!({ "recorded": n }))))
}

/// `GET /v1/models`: the model scoring now and its reload history.
pub async fn model_status(AxState(state): AxState<State>) -> Result<Json<Value>, ApiError> {
    let status = state
        .model
        .read()
        .map_err(|_| ApiError::Internal("model lock poisoned".into()))?
        .clone();
    let watched = state.models.get().is_some_and(|m| m.watches());
    let mut v = serde_json::to_value(status).map_err(|e| ApiError::Internal(e.to_string()))?;
    if let Some(o) = v.as_object_mut() {
        o.insert("watching_dir".into(), json!(watched));
    }
    Ok(Json(v))
}

/// `POST /v1/models/reload`: loads the newest artifact of the models
/// directory (else the configured file) and swaps it in; a refused one
/// answers 422 with the reason, and the running model stays.
pub async fn reload_model(
    AxState(state): AxState<State>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    use crate::reload::ReloadError;
    authorize(&state, &headers)?;
    let Some(slot) = state.models.get().cloned() else {
        return Err(ApiError::Unavailable("the service is starting".into()));
    };
    let st = state.clone();
    let result = tokio::task::spawn_blocking(move || slot.reload(&st))
        .await
        .map_err(|e| ApiError::Internal(format!("reload task: {e}")))?;
    match result {
        Ok(status) => Ok(Json(
            serde_json::to_value(status).map_err(|e| ApiError::Internal(e.to_string()))?,
        )),
        Err(e @ (ReloadError::NoSource | ReloadError::EmptyDir(_))) => {
            Err(ApiError::NotFound(e.to_string()))
        }
        Err(e @ ReloadError::Refused(_)) => Err(ApiError::Unprocessable(e.to_string())),
        Err(e @ ReloadError::NotRunning) => Err(ApiError::Unavailable(e.to_string())),
    }
}
