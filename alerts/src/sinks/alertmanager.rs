//! Alertmanager API v2 (`shared/reference/alertmanager/`): `POST
//! /api/v2/alerts` with an array of postable alerts, so users keep their
//! Alertmanager routing. Labels: the alert's labels plus `alertname` (the
//! kind), `severity`, `scope` and `dedup_key`; annotations: `summary`,
//! `risk`, `eta_hours`, `reasons`. Firing alerts are re-sent every
//! `resend_interval` (the dispatcher caps the route's repeat interval) with
//! `endsAt` = now + 4 × that interval, so Alertmanager resolves them by
//! itself if forewarn dies; a resolve sets `endsAt` to its event time.

use std::fmt::Write;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::alert::{AlertEvent, Status};
use crate::route::Notification;
use crate::sinks::{Http, Outcome, expand_link};
use crate::time::{duration_ms, format_rfc3339};

/// Re-sends missed before Alertmanager considers a firing alert resolved.
const ENDS_AT_RESENDS: i64 = 4;

/// An Alertmanager receiver.
#[derive(Debug)]
pub struct AlertmanagerSink {
    pub(crate) name: String,
    pub(crate) http: Http,
    pub(crate) resend_interval: Duration,
    pub(crate) link_template: Option<String>,
}

/// One postable alert; `sent_at` is the notification's event time.
pub fn postable(
    ev: &AlertEvent,
    sent_at: i64,
    resend_interval: Duration,
    link_template: Option<&str>,
) -> Value {
    let mut labels: Map<String, Value> = ev
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    labels.insert("alertname".to_owned(), json!(ev.kind));
    labels.insert("severity".to_owned(), json!(ev.severity.as_str()));
    labels.insert("scope".to_owned(), json!(ev.scope.as_str()));
    labels.insert("dedup_key".to_owned(), json!(ev.dedup_key));
    let mut reasons = String::new();
    for r in &ev.reasons {
        let _ = writeln!(reasons, "{}: {}", r.signal, r.detail);
    }
    let mut annotations = json!({"summary": ev.summary, "risk": format!("{:.3}", ev.risk), "reasons": reasons.trim_end()});
    if let (Some(eta), Some(obj)) = (ev.eta_hours, annotations.as_object_mut()) {
        obj.insert("eta_hours".to_owned(), json!(format!("{eta:.1}")));
    }
    let ends_at = match ev.status {
        Status::Resolved => ev.ts,
        Status::Firing => sent_at.max(ev.ts) + ENDS_AT_RESENDS * duration_ms(resend_interval),
    };
    let mut alert =
        json!({"labels": labels, "annotations": annotations, "endsAt": format_rfc3339(ends_at)});
    if let Some(obj) = alert.as_object_mut() {
        if ev.status == Status::Firing {
            obj.insert("startsAt".to_owned(), json!(format_rfc3339(ev.ts)));
        }
        if let Some(href) = link_template.and_then(|t| expand_link(t, &ev.labels)) {
            obj.insert("generatorURL".to_owned(), json!(href));
        }
    }
    alert
}

impl AlertmanagerSink {
    pub(crate) async fn deliver(&self, batch: &[Notification]) -> Outcome {
        let alerts: Vec<Value> = batch
            .iter()
            .flat_map(|n| {
                n.events.iter().map(move |e| {
                    postable(e, n.ts, self.resend_interval, self.link_template.as_deref())
                })
            })
            .collect();
        if alerts.is_empty() {
            return Outcome::Accepted;
        }
        self.http.post_json(&Value::Array(alerts), None).await
    }
}
