//! The endpoints that change things: silences (`GET / POST / DELETE
//! /v1/silences`; Alertmanager's `/api/v2/silences` are in
//! [`super::am_silences`]) and operator labels (`POST /v1/labels`). Changes need
//! `Authorization: Bearer <token>` (the token comes from the environment
//! variable `api.token_env` names); with no token configured they are
//! refused. Reads need no token unless `api.read_token_env` sets one. The
//! tokens are checked before any handler runs ([`super::guard`]), so a
//! handler here never reads a body it may not take.
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
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use super::app_state::AppState;
use super::error::ApiError;
use crate::pipeline::{Command, ControlError};

pub(super) async fn command(state: &AppState, cmd: Command) -> Result<Value, ApiError> {
    let Some(handle) = state.pipeline.clone() else {
        return Err(ApiError::Unavailable("the pipeline is not running".into()));
    };
    tokio::task::spawn_blocking(move || handle.control(cmd))
        .await
        .map_err(|e| ApiError::Internal(format!("control task: {e}")))?
        .map_err(|e| match e {
            ControlError::UnknownSilence(_) => ApiError::NotFound(e.to_string()),
            ControlError::Stopped | ControlError::NoAnswer | ControlError::Fleet(_) => {
                ApiError::Unavailable(e.to_string())
            }
            ControlError::Encode(_) => ApiError::Internal(e.to_string()),
        })
}

/// `GET /v1/silences`: silences known to the alert engine (API-added and
/// from the config), with whether each is active now: at the alert
/// engine's clock (event time), as `/api/v2/silences` computes its state.
#[utoipa::path(get, path = "/v1/silences", responses((status = 200, description = "{total, items}")))]
pub async fn list_silences(AxState(state): AxState<AppState>) -> Result<Json<Value>, ApiError> {
    let list = state
        .silences
        .read()
        .map_err(|_| ApiError::Internal("silence lock poisoned".into()))?;
    let now = state.event_now_ms();
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

/// `POST /v1/silences`: adds a silence (Alertmanager's body: matchers,
/// startsAt, endsAt, createdBy, comment). Token required.
#[utoipa::path(post, path = "/v1/silences", request_body(content = Value, description = "Alertmanager's silence: {matchers: [{name, value, isRegex, isEqual}], startsAt, endsAt, createdBy, comment}", content_type = "application/json"), responses(
    (status = 201, description = "the silence, with its id"),
    (status = 400, description = "a bad field, named"),
    (status = 401, description = "missing or wrong token"),
    (status = 403, description = "no token configured"),
    (status = 503, description = "the pipeline is not running"),
), security(("bearer" = [])))]
pub async fn add_silence(
    AxState(state): AxState<AppState>,
    body: String,
) -> Result<(StatusCode, Json<Value>), ApiError> {
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
/// Token required.
#[utoipa::path(delete, path = "/v1/silences/{id}", params(("id" = String, Path, description = "the silence's id")), responses(
    (status = 200, description = "expired"),
    (status = 401, description = "missing or wrong token"),
    (status = 403, description = "no token configured"),
    (status = 404, description = "no such silence"),
), security(("bearer" = [])))]
pub async fn expire_silence(
    AxState(state): AxState<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    tracing::info!(%id, "silence expired");
    Ok(Json(command(&state, Command::ExpireSilence(id)).await?))
}

/// One operator label.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelBody {
    pub gpu: String,
    /// RFC 3339 or epoch ms; default now.
    #[schema(value_type = Option<String>)]
    pub ts: Option<Value>,
    /// A failure kind (`hbm_ecc`, `thermal`, `sudden_death`, …, or a
    /// ticket's own) or `false_alarm`.
    #[schema(pattern = "^[A-Za-z0-9_]+$")]
    pub kind: String,
    /// Free text (ticket id, who); logged, not stored in the CSV.
    pub comment: Option<String>,
}

/// `POST /v1/labels`: records operator labels (a failure, repair ticket,
/// or false_alarm) into the label store `forewarn train` reads; one label
/// or an array of them. Token required.
#[utoipa::path(post, path = "/v1/labels", request_body(content = Vec<LabelBody>, description = "one label, or an array of them", content_type = "application/json"), responses(
    (status = 201, description = "{recorded: n}"),
    (status = 400, description = "a bad field, named"),
    (status = 401, description = "missing or wrong token"),
    (status = 403, description = "no token configured"),
), security(("bearer" = [])))]
pub async fn add_labels(
    AxState(state): AxState<AppState>,
    body: String,
) -> Result<(StatusCode, Json<Value>), ApiError> {
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

/// `GET /v1/models`: the failure model scoring now (version, artifact path,
/// training time, feature schema) and its reload history.
#[utoipa::path(get, path = "/v1/models", responses((status = 200, description = "model status", content_type = "application/json")))]
pub async fn model_status(AxState(state): AxState<AppState>) -> Result<Json<Value>, ApiError> {
    let status = state
        .model
        .read()
        .map_err(|_| ApiError::Internal("model lock poisoned".into()))?
        .clone();
    let watched = state.models.as_ref().is_some_and(|m| m.watches());
    let mut v = serde_json::to_value(status).map_err(|e| ApiError::Internal(e.to_string()))?;
    if let Some(o) = v.as_object_mut() {
        o.insert("watching_dir".into(), json!(watched));
    }
    Ok(Json(v))
}

/// `POST /v1/models/reload`: loads the newest artifact of the models
/// directory (else the configured file) and swaps it in; a refused one
/// answers 422 with the reason, and the running model stays.
#[utoipa::path(post, path = "/v1/models/reload", responses(
    (status = 200, description = "the new model status"),
    (status = 401, description = "missing or wrong token"),
    (status = 403, description = "no token configured"),
    (status = 404, description = "no model source configured, or an empty models directory"),
    (status = 422, description = "refused: {error} says why (e.g. feature schema mismatch)"),
    (status = 503, description = "the service is starting"),
), security(("bearer" = [])))]
pub async fn reload_model(AxState(state): AxState<AppState>) -> Result<Json<Value>, ApiError> {
    use crate::reload::ReloadError;
    let (Some(slot), Some(handle)) = (state.models.clone(), state.pipeline.clone()) else {
        return Err(ApiError::Unavailable("the service is starting".into()));
    };
    let st = state.shared.clone();
    let result = tokio::task::spawn_blocking(move || slot.reload(&st, &handle))
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
