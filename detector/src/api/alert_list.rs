//! `GET /v1/alerts`: what an operator looks at first. Active alerts come
//! most severe first, then newest first; each says whether a silence in
//! force mutes it (`silenced_by`: the silences' ids) and whether another
//! active alert inhibits it (`inhibited_by`: the dedup keys of the
//! inhibiting alerts), so a quiet pager is explained. `view=recent` is the
//! event log, newest first.

use axum::Json;
use axum::extract::{Query, State as AxState};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use super::app_state::AppState;
use super::error::ApiError;
use alerts::AlertEvent;
use alerts::config::InhibitRule;

#[derive(Debug, Deserialize, Default, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AlertQuery {
    /// `active` (default) or `recent`.
    #[param(pattern = "^(active|recent)$")]
    view: Option<String>,
}

/// Active alerts, most severe and newest first, with `silenced_by` and
/// `inhibited_by` (or the recent events, newest first, with view=recent),
/// in the alert contract's shape.
#[utoipa::path(get, path = "/v1/alerts", params(AlertQuery), responses((status = 200, description = "{total, items}")))]
pub async fn alerts(
    AxState(state): AxState<AppState>,
    Query(q): Query<AlertQuery>,
) -> Result<Json<Value>, ApiError> {
    let now_ms = state.event_now_ms();
    let silences = state
        .silences
        .read()
        .map_err(|_| ApiError::Internal("silence lock poisoned".into()))?
        .clone();
    let rules = state
        .inhibit_rules
        .read()
        .map_err(|_| ApiError::Internal("inhibition lock poisoned".into()))?
        .clone();
    let view = state
        .alerts
        .read()
        .map_err(|_| ApiError::Internal("alert lock poisoned".into()))?;
    let items: Vec<Value> = match q.view.as_deref() {
        None | Some("active") => {
            let active: Vec<&AlertEvent> = view.active.values().collect();
            ordered(&active)
                .into_iter()
                .map(|e| {
                    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
                    if let Value::Object(m) = &mut v {
                        let silenced: Vec<&str> = silences
                            .iter()
                            .filter(|s| s.mutes(e, now_ms))
                            .map(|s| s.id.as_str())
                            .collect();
                        m.insert("silenced_by".into(), json!(silenced));
                        m.insert("inhibited_by".into(), json!(inhibitors(e, &active, &rules)));
                    }
                    v
                })
                .collect()
        }
        Some("recent") => view
            .recent
            .iter()
            .rev()
            .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
            .collect(),
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "view={other:?}: expected active or recent"
            )));
        }
    };
    Ok(Json(json!({ "total": items.len(), "items": items })))
}

/// Most severe first, then newest, then by dedup key (a stable order).
pub fn ordered<'a>(alerts: &[&'a AlertEvent]) -> Vec<&'a AlertEvent> {
    let mut out = alerts.to_vec();
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.ts.cmp(&a.ts))
            .then_with(|| a.dedup_key.cmp(&b.dedup_key))
    });
    out
}

/// Dedup keys of the active alerts that inhibit `target` under `rules`
/// (Alertmanager's semantics: a source matching the rule's source
/// matchers, the target its target matchers, equal on the `equal` labels).
pub fn inhibitors(
    target: &AlertEvent,
    active: &[&AlertEvent],
    rules: &[InhibitRule],
) -> Vec<String> {
    let mut keys: Vec<String> = active
        .iter()
        .filter(|src| src.dedup_key != target.dedup_key)
        .filter(|src| {
            rules.iter().any(|r| {
                r.target.iter().all(|m| m.matches(target))
                    && r.source.iter().all(|m| m.matches(src))
                    && r.equal.iter().all(|l| src.field(l) == target.field(l))
            })
        })
        .map(|src| src.dedup_key.clone())
        .collect();
    keys.sort();
    keys
}

#[cfg(test)]
#[path = "alert_list_tests.rs"]
mod tests;
