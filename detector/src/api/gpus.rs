//! `/v1/gpus`, `/v1/gpus/{uuid}`, `/v1/fleet` (`/v1/alerts`: `alert_list.rs`).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State as AxState};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use features::time::format_rfc3339_s;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::IntoParams;

use super::app_state::AppState;
use super::error::ApiError;
use crate::assess::{HealthState, Kind};
use crate::risk_table::Order;
use crate::state::GpuView;

/// Largest page of `GET /v1/gpus`.
const MAX_LIMIT: usize = 10_000;

#[derive(Debug, Deserialize, Default, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    #[param(pattern = "^(healthy|watch|degraded|failing|silent)$")]
    state: Option<String>,
    cluster: Option<String>,
    rack: Option<String>,
    host: Option<String>,
    job: Option<String>,
    model: Option<String>,
    /// `risk` (default, highest first) or `gpu`.
    #[param(pattern = "^(risk|gpu)$")]
    sort: Option<String>,
    /// Page size (default 100).
    #[param(maximum = 10000)]
    limit: Option<usize>,
    offset: Option<usize>,
}

/// What `GET /v1/gpus` lists per GPU, and the head of `GET /v1/gpus/{uuid}`.
#[derive(Serialize)]
pub(super) struct GpuSummary<'a> {
    gpu: &'a str,
    risk: f64,
    state: &'static str,
    kind: Option<&'static str>,
    host: Option<&'a str>,
    rack: Option<&'a str>,
    cluster: Option<&'a str>,
    job: Option<&'a str>,
    model: Option<&'a str>,
    last_seen: String,
    top_reason: Option<&'a String>,
}

pub(super) fn summary(v: &GpuView) -> GpuSummary<'_> {
    let a = &v.latest;
    GpuSummary {
        gpu: &a.gpu,
        risk: (a.risk * 1000.0).round() / 1000.0,
        state: a.state.as_str(),
        kind: (a.risk > 0.0).then(|| a.kind.as_str()),
        host: a.topo.host.as_deref(),
        rack: a.topo.rack.as_deref(),
        cluster: a.topo.cluster.as_deref(),
        job: a.topo.job.as_deref(),
        model: a.topo.model.as_deref(),
        last_seen: format_rfc3339_s(v.last_seen_ms),
        top_reason: a.reasons.first().map(|r| &r.detail),
    }
}

/// GPUs, filtered and ranked.
#[utoipa::path(get, path = "/v1/gpus", params(ListQuery), responses(
    (status = 200, description = "{total, offset, limit, items: [{gpu, risk, state, kind, host, rack, cluster, job, model, last_seen, top_reason}]}"),
    (status = 400, description = "bad parameter"),
))]
pub async fn list(
    AxState(state): AxState<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = q.limit.unwrap_or(100).min(MAX_LIMIT);
    let offset = q.offset.unwrap_or(0);
    let by_risk = match q.sort.as_deref() {
        None | Some("risk") => true,
        Some("gpu") => false,
        Some(other) => {
            return Err(ApiError::BadRequest(format!(
                "sort={other:?}: expected risk or gpu"
            )));
        }
    };
    let eq = |want: &Option<String>, have: &Option<std::sync::Arc<str>>| {
        want.as_deref().is_none_or(|w| have.as_deref() == Some(w))
    };
    let matches = |v: &GpuView| {
        let a = &v.latest;
        q.state.as_deref().is_none_or(|s| a.state.as_str() == s)
            && eq(&q.cluster, &a.topo.cluster)
            && eq(&q.rack, &a.topo.rack)
            && eq(&q.host, &a.topo.host)
            && eq(&q.job, &a.topo.job)
            && eq(&q.model, &a.topo.model)
    };
    let filtered = [&q.state, &q.cluster, &q.rack, &q.host, &q.job, &q.model]
        .iter()
        .any(|f| f.is_some());
    let order = if by_risk { Order::Risk } else { Order::Gpu };
    let keep: Option<&dyn Fn(&GpuView) -> bool> = filtered.then_some(&matches);
    // The table keeps both orders: a page is read, never sorted.
    let (total, page) = state.gpus.page(order, keep, offset, limit)?;
    let items: Vec<GpuSummary> = page.iter().map(|v| summary(v)).collect();
    Ok(Json(
        json!({ "total": total, "offset": offset, "limit": limit, "items": items }),
    ))
}

/// `GET /v1/gpus/{uuid}`, serialized straight from the snapshot. The
/// handler runs 5,000 times a second under load: building a `Value` tree
/// first cost ~150 allocations a lookup (history points as maps, every key
/// a `String`).
#[derive(Serialize)]
struct GpuDetail<'a> {
    #[serde(flatten)]
    summary: GpuSummary<'a>,
    components: BTreeMap<&'static str, f64>,
    anomaly_grade: f32,
    eta_hours: Option<f64>,
    reasons: &'a [crate::assess::Evidence],
    active_alerts: Vec<&'a alerts::AlertEvent>,
    history: Vec<HistoryPoint>,
}

#[derive(Serialize)]
struct HistoryPoint {
    risk: f32,
    ts: String,
}

/// One GPU: risk, state, components, reasons, topology, active alerts,
/// risk history.
#[utoipa::path(get, path = "/v1/gpus/{uuid}", params(("uuid" = String, Path, description = "the GPU's UUID")), responses(
    (status = 200, description = "the GPU"),
    (status = 404, description = "unknown GPU"),
))]
pub async fn one(
    AxState(state): AxState<AppState>,
    Path(uuid): Path<String>,
) -> Result<Response, ApiError> {
    let view = state
        .gpus
        .get(&uuid)?
        .ok_or_else(|| ApiError::NotFound(format!("no GPU {uuid}")))?;
    let alerts = state
        .alerts
        .read()
        .map_err(|_| ApiError::Internal("alert lock poisoned".into()))?;
    let a = &view.latest;
    let detail = GpuDetail {
        summary: summary(&view),
        components: Kind::ALL
            .iter()
            .map(|k| (k.as_str(), (a.component(*k) * 1000.0).round() / 1000.0))
            .collect(),
        anomaly_grade: a.anomaly_grade,
        eta_hours: a.eta_hours,
        reasons: &a.reasons,
        active_alerts: alerts.for_gpu(&uuid),
        history: view
            .history
            .iter()
            .map(|(t, r)| HistoryPoint {
                risk: *r,
                ts: format_rfc3339_s(*t),
            })
            .collect(),
    };
    let body = serde_json::to_vec(&detail)
        .map_err(|e| ApiError::Internal(format!("serializing GPU {uuid}: {e}")))?;
    drop(alerts);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// Counts per state, per cluster and rack.
#[utoipa::path(get, path = "/v1/fleet", responses((status = 200, description = "fleet counts")))]
pub async fn fleet(AxState(state): AxState<AppState>) -> Result<Json<Value>, ApiError> {
    let gpus = state.gpus.views()?;
    let mut per_state: BTreeMap<&str, u64> = BTreeMap::new();
    let mut per_rack: BTreeMap<(String, String), BTreeMap<&str, u64>> = BTreeMap::new();
    for s in [
        HealthState::Healthy,
        HealthState::Watch,
        HealthState::Degraded,
        HealthState::Failing,
        HealthState::Silent,
    ] {
        per_state.insert(s.as_str(), 0);
    }
    for v in &gpus {
        let a = &v.latest;
        *per_state.entry(a.state.as_str()).or_default() += 1;
        let key = (
            a.topo.cluster.as_deref().unwrap_or("").to_string(),
            a.topo.rack.as_deref().unwrap_or("").to_string(),
        );
        *per_rack
            .entry(key)
            .or_default()
            .entry(a.state.as_str())
            .or_default() += 1;
    }
    let racks: Vec<Value> = per_rack
        .into_iter()
        .map(|((c, r), m)| json!({"cluster": c, "rack": r, "states": m}))
        .collect();
    Ok(Json(
        json!({ "gpus": gpus.len(), "states": per_state, "racks": racks, "model_version": state.model_version() }),
    ))
}
