//! Alertmanager's silences API (v2, `shared/reference/alertmanager/`), so
//! `amtool silence add | query | expire`, Grafana and other Alertmanager
//! clients manage forewarn's silences: `GET /api/v2/silences` (with
//! Alertmanager's `filter` matchers and its order), `POST /api/v2/silences`
//! (a `postableSilence`; answers `{"silenceID"}`; with an `id`, an update
//! under Alertmanager's rules), `GET` and `DELETE /api/v2/silence/{id}`.
//!
//! The silences are the alert engine's, the same ones `/v1/silences`
//! shows; changes travel as pipeline commands, as there. `status.state`
//! is computed at the engine's clock (event time: in a backtest or replay,
//! the data's time), not the wall clock. forewarn does not record when a
//! silence last changed, so `updatedAt` is when it took its current state:
//! its start (never later than now), or its end once expired.
//!
//! Errors answer a JSON string, as Alertmanager's do, so its clients can
//! show them.

use std::sync::atomic::{AtomicU64, Ordering};

use alerts::matcher::Matcher;
use alerts::{Silence, SilenceState};
use axum::Json;
use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::admin::command;
use super::app_state::AppState;
use super::error::ApiError;
use crate::pipeline::Command;

/// An error as Alertmanager answers it: the status and a JSON string.
pub struct AmError(ApiError);

impl From<ApiError> for AmError {
    fn from(e: ApiError) -> Self {
        AmError(e)
    }
}

impl IntoResponse for AmError {
    fn into_response(self) -> Response {
        let (status, msg) = match self.0 {
            ApiError::NotFound(m) => (StatusCode::NOT_FOUND, m),
            ApiError::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            ApiError::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m),
            ApiError::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            ApiError::Unavailable(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
            ApiError::Unprocessable(m) => (StatusCode::UNPROCESSABLE_ENTITY, m),
            e @ ApiError::Internal(_) => return e.into_response(),
        };
        (status, Json(Value::String(msg))).into_response()
    }
}

/// A silence in Alertmanager's `gettableSilence` shape at `now_ms`.
pub fn gettable(s: &Silence, now_ms: i64) -> Value {
    let state = s.state(now_ms);
    let updated = match state {
        SilenceState::Expired => s.ends_at_ms,
        _ => s.starts_at_ms.min(now_ms),
    };
    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("status".into(), json!({ "state": state }));
        o.insert(
            "updatedAt".into(),
            json!(features::time::format_rfc3339(updated)),
        );
        o.insert("annotations".into(), json!({}));
    }
    v
}

/// Alertmanager's order: active by end, then pending by start, then
/// expired, most recently ended first.
fn order(list: &mut [&Silence], now_ms: i64) {
    list.sort_by_key(|s| match s.state(now_ms) {
        SilenceState::Active => (0, s.ends_at_ms),
        SilenceState::Pending => (1, s.starts_at_ms),
        SilenceState::Expired => (2, -s.ends_at_ms),
    });
}

/// Whether a silence passes the `filter` matchers, by Alertmanager's rule:
/// each filter is matched against the value of the silence's matcher of
/// the same name (`""` when it has none); a filter with an empty value
/// passes silences without that name (`=`, `=~`) or with it (`!=`, `!~`).
pub fn passes(s: &Silence, filters: &[Matcher]) -> bool {
    let specs: Vec<_> = s.matchers.iter().map(Matcher::spec).collect();
    filters.iter().all(|f| {
        let fs = f.spec();
        let value = specs.iter().find(|m| m.name == fs.name).map(|m| &m.value);
        if fs.value.is_empty() && value.is_some() != fs.is_equal {
            return true;
        }
        f.matches_value(value.map_or("", |v| v.as_str()))
    })
}

/// The query's `filter` values (repeated), and the `active` / `pending` /
/// `expired` switches (default true).
struct ListQuery {
    filters: Vec<Matcher>,
    show: [bool; 3],
}

fn parse_query(raw: Option<&str>) -> Result<ListQuery, ApiError> {
    let mut q = ListQuery {
        filters: Vec::new(),
        show: [true; 3],
    };
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v =
            percent_decode(v).ok_or_else(|| ApiError::BadRequest(format!("bad query {pair:?}")))?;
        let switch = |i: usize, q: &mut ListQuery| -> Result<(), ApiError> {
            q.show[i] = v
                .parse()
                .map_err(|_| ApiError::BadRequest(format!("{k}={v:?}: expected true or false")))?;
            Ok(())
        };
        match k {
            "filter" => q.filters.push(
                Matcher::parse(&v).map_err(|e| ApiError::BadRequest(format!("filter: {e}")))?,
            ),
            "active" => switch(0, &mut q)?,
            "pending" => switch(1, &mut q)?,
            "expired" => switch(2, &mut q)?,
            _ => {}
        }
    }
    Ok(q)
}

/// `application/x-www-form-urlencoded` decoding of one value.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn silences(state: &AppState) -> Result<Vec<Silence>, ApiError> {
    Ok(state
        .silences
        .read()
        .map_err(|_| ApiError::Internal("silence lock poisoned".into()))?
        .clone())
}

/// `GET /api/v2/silences`: every silence the engine knows, in
/// Alertmanager's shape and order, filtered by `filter` matchers.
#[utoipa::path(get, path = "/api/v2/silences", params(
    ("filter" = Option<Vec<String>>, Query, description = "a matcher (`name=\"v\"`, `name=~\"re\"`, `!=`, `!~`), repeatable"),
    ("active" = Option<bool>, Query, description = "include active silences (default true)"),
    ("pending" = Option<bool>, Query, description = "include pending silences (default true)"),
    ("expired" = Option<bool>, Query, description = "include expired silences (default true)"),
), responses(
    (status = 200, description = "Alertmanager's gettableSilences: [{id, status: {state}, updatedAt, matchers, startsAt, endsAt, createdBy, comment}]"),
    (status = 400, description = "a bad filter"),
))]
pub async fn list(
    AxState(state): AxState<AppState>,
    RawQuery(raw): RawQuery,
) -> Result<Json<Value>, AmError> {
    let q = parse_query(raw.as_deref())?;
    let all = silences(&state)?;
    let now = state.event_now_ms();
    let mut shown: Vec<&Silence> = all
        .iter()
        .filter(|s| {
            let i = match s.state(now) {
                SilenceState::Active => 0,
                SilenceState::Pending => 1,
                SilenceState::Expired => 2,
            };
            q.show[i] && passes(s, &q.filters)
        })
        .collect();
    order(&mut shown, now);
    Ok(Json(Value::Array(
        shown.into_iter().map(|s| gettable(s, now)).collect(),
    )))
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A new silence id in the UUID shape Alertmanager's clients expect:
/// the wall time, this process and a counter make it unique.
fn new_id() -> String {
    let ms = crate::checkpoint::wall_ms() as u64;
    let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let pid = u64::from(std::process::id());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        (ms >> 16) & 0xffff_ffff,
        ms & 0xffff,
        pid & 0xfff,
        0x8000 | ((pid >> 12) & 0x3fff),
        n & 0xffff_ffff_ffff
    )
}

/// Alertmanager's rule for changing a silence in place (else the old one
/// is expired and a new one made): same matchers, and an active silence
/// keeps its start and does not end in the past, a pending one does not
/// start in the past; an expired one never changes.
fn can_update(old: &Silence, new: &Silence, now_ms: i64) -> bool {
    if old.matchers != new.matchers {
        return false;
    }
    match old.state(now_ms) {
        SilenceState::Active => new.starts_at_ms == old.starts_at_ms && new.ends_at_ms >= now_ms,
        SilenceState::Pending => new.starts_at_ms >= now_ms,
        SilenceState::Expired => false,
    }
}

/// `POST /api/v2/silences`: creates a silence, or with the `id` of one
/// updates it (in place when Alertmanager would, else it is expired and
/// replaced by a new one). Token required.
#[utoipa::path(post, path = "/api/v2/silences", request_body(content = Value, description = "Alertmanager's postableSilence: {id?, matchers: [{name, value, isRegex, isEqual}], startsAt, endsAt, createdBy, comment}", content_type = "application/json"), responses(
    (status = 200, description = "{silenceID}"),
    (status = 400, description = "a bad field, named"),
    (status = 401, description = "missing or wrong token"),
    (status = 403, description = "no token configured"),
    (status = 404, description = "no silence with the given id"),
    (status = 503, description = "the pipeline is not running"),
), security(("bearer" = [])))]
pub async fn post(AxState(state): AxState<AppState>, body: String) -> Result<Json<Value>, AmError> {
    let mut v: Value = serde_json::from_str(&body)
        .map_err(|e| ApiError::BadRequest(format!("invalid silence: {e}")))?;
    let given = v
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned);
    if let Some(o) = v.as_object_mut() {
        // Newer clients send annotations; forewarn keeps none.
        o.remove("annotations");
    }
    let text = v.to_string();
    let check =
        |id: String| Silence::from_json(&text, id).map_err(|e| ApiError::BadRequest(e.to_string()));
    let id = match given {
        None => {
            let s = check(new_id())?;
            tracing::info!(id = %s.id, by = %s.created_by, comment = %s.comment, "silence added");
            let id = s.id.clone();
            command(&state, Command::AddSilence(s)).await?;
            id
        }
        Some(old_id) => {
            let old = silences(&state)?
                .into_iter()
                .find(|s| s.id == old_id)
                .ok_or_else(|| ApiError::NotFound(format!("silence {old_id} not found")))?;
            let now = state.event_now_ms();
            let same = check(old_id.clone())?;
            if can_update(&old, &same, now) {
                tracing::info!(id = %old_id, by = %same.created_by, "silence updated");
                command(&state, Command::AddSilence(same)).await?;
                old_id
            } else {
                let s = check(new_id())?;
                if old.state(now) != SilenceState::Expired {
                    command(&state, Command::ExpireSilence(old_id.clone())).await?;
                }
                tracing::info!(old = %old_id, id = %s.id, by = %s.created_by, "silence replaced");
                let id = s.id.clone();
                command(&state, Command::AddSilence(s)).await?;
                id
            }
        }
    };
    Ok(Json(json!({ "silenceID": id })))
}

/// `GET /api/v2/silence/{silenceID}`: one silence, Alertmanager's shape.
#[utoipa::path(get, path = "/api/v2/silence/{silenceID}", params(("silenceID" = String, Path, description = "the silence's id")), responses(
    (status = 200, description = "Alertmanager's gettableSilence"),
    (status = 404, description = "no such silence"),
))]
pub async fn get_one(
    AxState(state): AxState<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, AmError> {
    let now = state.event_now_ms();
    silences(&state)?
        .iter()
        .find(|s| s.id == id)
        .map(|s| Json(gettable(s, now)))
        .ok_or_else(|| ApiError::NotFound(format!("silence {id} not found")).into())
}

/// `DELETE /api/v2/silence/{silenceID}`: expires it now (event time); it
/// stays listed as expired. Token required.
#[utoipa::path(delete, path = "/api/v2/silence/{silenceID}", params(("silenceID" = String, Path, description = "the silence's id")), responses(
    (status = 200, description = "expired"),
    (status = 401, description = "missing or wrong token"),
    (status = 403, description = "no token configured"),
    (status = 404, description = "no such silence"),
), security(("bearer" = [])))]
pub async fn delete(
    AxState(state): AxState<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, AmError> {
    tracing::info!(%id, "silence expired");
    command(&state, Command::ExpireSilence(id)).await?;
    Ok(StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silence(matchers: &[&str]) -> Silence {
        Silence {
            id: "s".into(),
            matchers: matchers
                .iter()
                .map(|m| Matcher::parse(m).expect("matcher"))
                .collect(),
            starts_at_ms: 1_000,
            ends_at_ms: 2_000,
            created_by: "ops".into(),
            comment: "c".into(),
        }
    }

    fn filters(texts: &[&str]) -> Vec<Matcher> {
        texts
            .iter()
            .map(|m| Matcher::parse(m).expect("filter"))
            .collect()
    }

    #[test]
    fn filters_follow_alertmanager() {
        let s = silence(&["rack=\"r1\"", "kind=~\"xid_.*\""]);
        assert!(passes(&s, &[]));
        assert!(passes(&s, &filters(&["rack=\"r1\""])));
        assert!(passes(&s, &filters(&["rack=~\"r.*\""])));
        assert!(
            passes(&s, &filters(&["kind=\"xid_.*\""])),
            "the pattern as written"
        );
        assert!(!passes(&s, &filters(&["rack=\"r2\""])));
        assert!(!passes(&s, &filters(&["host=\"h\""])), "no such matcher");
        assert!(passes(&s, &filters(&["host=\"\""])));
        assert!(passes(&s, &filters(&["rack!=\"\""])));
        assert!(passes(&s, &filters(&["rack=\"r1\"", "host!=\"h\""])));
    }

    #[test]
    fn states_order_and_shape() {
        let mut a = silence(&["rack=\"a\""]);
        a.id = "active".into();
        let mut p = silence(&["rack=\"p\""]);
        p.id = "pending".into();
        (p.starts_at_ms, p.ends_at_ms) = (5_000, 6_000);
        let mut e = silence(&["rack=\"e\""]);
        e.id = "expired".into();
        e.ends_at_ms = 1_200;
        let mut list = vec![&e, &p, &a];
        order(&mut list, 1_500);
        let ids: Vec<&str> = list.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["active", "pending", "expired"]);
        let g = gettable(&a, 1_500);
        assert_eq!(g["status"]["state"], "active");
        assert_eq!(g["updatedAt"], "1970-01-01T00:00:01Z");
        assert_eq!(g["matchers"][0]["isEqual"], true);
        assert_eq!(gettable(&e, 1_500)["updatedAt"], "1970-01-01T00:00:01.200Z");
        assert_eq!(gettable(&p, 1_500)["status"]["state"], "pending");
    }

    #[test]
    fn query_and_ids() {
        let q = parse_query(Some(
            "filter=rack%3D%22r1%22&expired=false&filter=kind%3D~%22x.%2A%22",
        ))
        .expect("query");
        assert_eq!(q.filters.len(), 2);
        assert_eq!(q.filters[1].to_string(), "kind=~\"x.*\"");
        assert_eq!(q.show, [true, true, false]);
        assert!(parse_query(Some("active=maybe")).is_err());
        let (a, b) = (new_id(), new_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
    }

    #[test]
    fn updates_in_place_only_when_alertmanager_would() {
        let old = silence(&["rack=\"a\""]);
        let mut longer = old.clone();
        longer.ends_at_ms = 3_000;
        assert!(can_update(&old, &longer, 1_500));
        let mut moved = longer.clone();
        moved.starts_at_ms = 1_100;
        assert!(
            !can_update(&old, &moved, 1_500),
            "an active silence keeps its start"
        );
        assert!(!can_update(&old, &silence(&["rack=\"b\""]), 1_500));
        assert!(!can_update(&old, &longer, 2_500), "expired");
        assert!(can_update(&old, &moved, 500), "pending, starting later");
    }
}
