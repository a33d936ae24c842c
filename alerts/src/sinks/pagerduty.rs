//! PagerDuty Events API v2 (`shared/reference/pagerduty/`): one event per
//! request. Firing -> `trigger` with the payload, resolved -> `resolve`;
//! both carry the alert's `dedup_key` (the same for every copy of one
//! incident, so a re-send after a crash is deduplicated by PagerDuty).
//! `summary` is cut to 1,024 characters, `dedup_key` to 255 (a longer one
//! keeps its head and gets a stable hash tail). Reasons, labels, risk and
//! eta go to `custom_details`; `link_template` adds the GPU's REST page.
//! 202 accepted; 429 / 5xx retried; 400 dead-lettered.

use serde_json::{Value, json};

use crate::alert::{AlertEvent, Severity, Status};
use crate::route::Notification;
use crate::secret::Secret;
use crate::sinks::config::PdSeverity;
use crate::sinks::{Http, Outcome, expand_link, truncate_chars};
use crate::time::format_rfc3339;

/// PagerDuty's limits (Trigger Events page).
const MAX_SUMMARY_CHARS: usize = 1_024;
const MAX_DEDUP_KEY_CHARS: usize = 255;

/// A PagerDuty integration.
#[derive(Debug)]
pub struct PagerDutySink {
    pub(crate) name: String,
    pub(crate) http: Http,
    pub(crate) routing_key: Secret,
    pub(crate) link_template: Option<String>,
    pub(crate) severity_map: [PdSeverity; 3],
    pub(crate) source_label: String,
}

/// The dedup key as sent (at most 255 characters, stable).
pub fn pd_dedup_key(key: &str) -> String {
    if key.chars().count() <= MAX_DEDUP_KEY_CHARS {
        return key.to_owned();
    }
    // FNV-1a: stable across runs and versions, unlike std's hasher.
    let hash = features::hash::fnv1a(key.as_bytes());
    let head: String = key.chars().take(MAX_DEDUP_KEY_CHARS - 17).collect();
    format!("{head}#{hash:016x}")
}

/// Builds the Events API body for one alert event.
pub fn event_body(
    ev: &AlertEvent,
    routing_key: &str,
    severity_map: [PdSeverity; 3],
    source_label: &str,
    link_template: Option<&str>,
) -> Value {
    let dedup_key = pd_dedup_key(&ev.dedup_key);
    if ev.status == Status::Resolved {
        return json!({"routing_key": routing_key, "event_action": "resolve", "dedup_key": dedup_key});
    }
    let severity = match ev.severity {
        Severity::Critical => severity_map[0],
        Severity::Warning => severity_map[1],
        Severity::Info => severity_map[2],
    };
    let scope_value = ev.dedup_key.split('/').nth(2).unwrap_or(&ev.dedup_key);
    let source = ev
        .labels
        .get(source_label)
        .map_or(scope_value, String::as_str);
    let mut details = json!({
        "kind": ev.kind,
        "scope": ev.scope,
        "risk": ev.risk,
        "labels": ev.labels,
        "reasons": ev.reasons,
    });
    if let (Some(eta), Some(obj)) = (ev.eta_hours, details.as_object_mut()) {
        obj.insert("eta_hours".to_owned(), json!(eta));
    }
    let mut payload = json!({
        "summary": truncate_chars(&ev.summary, MAX_SUMMARY_CHARS),
        "source": source,
        "severity": severity.as_str(),
        "timestamp": format_rfc3339(ev.ts),
        "class": ev.kind,
        "custom_details": details,
    });
    if let Some(obj) = payload.as_object_mut() {
        if let Some(gpu) = ev.labels.get("gpu") {
            obj.insert("component".to_owned(), json!(gpu));
        }
        if let Some(group) = ev.labels.get("rack").or(ev.labels.get("cluster")) {
            obj.insert("group".to_owned(), json!(group));
        }
    }
    let mut body = json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": dedup_key,
        "client": "forewarn",
        "payload": payload,
    });
    if let (Some(href), Some(obj)) = (
        link_template.and_then(|t| expand_link(t, &ev.labels)),
        body.as_object_mut(),
    ) {
        obj.insert(
            "links".to_owned(),
            json!([{"href": href, "text": "forewarn page"}]),
        );
    }
    body
}

impl PagerDutySink {
    pub(crate) async fn deliver(&self, batch: &[Notification]) -> Outcome {
        // Entries are per event (Sink::per_event); send each in order anyway.
        for ev in batch.iter().flat_map(|n| &n.events) {
            let body = event_body(
                ev,
                self.routing_key.expose(),
                self.severity_map,
                &self.source_label,
                self.link_template.as_deref(),
            );
            let outcome = self.http.post_json(&body, Some(&self.routing_key)).await;
            if outcome != Outcome::Accepted {
                return outcome;
            }
        }
        Outcome::Accepted
    }
}
