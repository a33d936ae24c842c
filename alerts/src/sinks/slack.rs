//! Slack incoming webhook (`shared/reference/slack/`): one message per
//! request with Block Kit `blocks` and a plain `text` fallback. The
//! delivery worker spaces messages by `min_interval` (1 s: Slack's limit per
//! webhook) and, when entries queue up during a storm, hands up to
//! `max_batch` of them to one call, which merges them into one grouped
//! message. Resends say so. 200 accepts; 429 honours `Retry-After`.
//! Each alert's line ends with its `dedup_key` (`shared/contracts/alerts.md`:
//! every sink's copy shares it), so a firing message, its re-sends and its
//! resolve can be matched with each other and with the PagerDuty incident.

use std::fmt::Write;

use serde_json::{Value, json};

use crate::alert::{AlertEvent, Status};
use crate::route::Notification;
use crate::sinks::{Http, Outcome, expand_link, truncate_chars};

/// Alerts shown as their own section; the rest are counted (Slack allows 50
/// blocks per message and long messages help nobody during a storm).
const MAX_SECTIONS: usize = 20;
/// Slack's limit for a section's text is 3,000 characters.
const MAX_SECTION_CHARS: usize = 2_900;
/// Slack's limit for a header's plain text is 150 characters.
const MAX_HEADER_CHARS: usize = 150;
/// The fallback text is for notifications: keep it short.
const MAX_FALLBACK_CHARS: usize = 3_000;

/// A Slack incoming webhook.
#[derive(Debug)]
pub struct SlackSink {
    pub(crate) name: String,
    pub(crate) http: Http,
    pub(crate) link_template: Option<String>,
    pub(crate) min_interval: std::time::Duration,
    pub(crate) max_batch: usize,
}

fn line(ev: &AlertEvent, resend: bool, link_template: Option<&str>) -> String {
    let icon = match (ev.status, ev.severity) {
        (Status::Resolved, _) => ":large_green_circle:",
        (_, crate::alert::Severity::Critical) => ":red_circle:",
        (_, crate::alert::Severity::Warning) => ":large_orange_circle:",
        _ => ":large_blue_circle:",
    };
    let state = match (ev.status, resend) {
        (Status::Resolved, _) => "RESOLVED",
        (Status::Firing, true) => "STILL FIRING",
        (Status::Firing, false) => "FIRING",
    };
    let mut s = format!(
        "{icon} *{state}* `{}` {} {} — {}",
        ev.kind,
        ev.scope,
        ev.severity.as_str(),
        ev.summary
    );
    if ev.status == Status::Firing {
        for r in ev.reasons.iter().take(3) {
            let _ = write!(s, "\n• `{}`: {}", r.signal, r.detail);
        }
    }
    if let Some(href) = link_template.and_then(|t| expand_link(t, &ev.labels)) {
        let _ = write!(s, "\n<{href}|details>");
    }
    let _ = write!(s, "\n`{}`", ev.dedup_key);
    s
}

/// Builds one message for a batch of notifications (one or many groups).
pub fn message(batch: &[Notification], link_template: Option<&str>) -> Value {
    let items: Vec<(&AlertEvent, bool)> = batch
        .iter()
        .flat_map(|n| n.events.iter().map(move |e| (e, n.resend)))
        .collect();
    let firing = items
        .iter()
        .filter(|(e, _)| e.status == Status::Firing)
        .count();
    let resolved = items.len() - firing;
    let title = match (batch.len(), items.first()) {
        (1, Some((e, _))) if items.len() == 1 => {
            format!("forewarn: {} {} {}", e.status.as_str(), e.kind, e.scope)
        }
        _ => format!(
            "forewarn: {firing} firing, {resolved} resolved ({} groups)",
            batch.len()
        ),
    };
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": truncate_chars(&title, MAX_HEADER_CHARS)}}),
    ];
    let mut fallback = title.clone();
    for (ev, resend) in items.iter().take(MAX_SECTIONS) {
        let text = line(ev, *resend, link_template);
        blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": truncate_chars(&text, MAX_SECTION_CHARS)}}));
        let _ = write!(
            fallback,
            "\n[{}] {} {}",
            ev.status.as_str(),
            ev.kind,
            ev.summary
        );
    }
    if items.len() > MAX_SECTIONS {
        let more = items.len() - MAX_SECTIONS;
        blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!("…and {more} more alert changes")}]}));
        let _ = write!(fallback, "\n…and {more} more");
    }
    json!({"text": truncate_chars(&fallback, MAX_FALLBACK_CHARS), "blocks": blocks})
}

impl SlackSink {
    pub(crate) async fn deliver(&self, batch: &[Notification]) -> Outcome {
        if batch.iter().all(|n| n.events.is_empty()) {
            return Outcome::Accepted;
        }
        self.http
            .post_json(&message(batch, self.link_template.as_deref()), None)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::{Reason, Scope, Severity};

    fn event(status: Status) -> AlertEvent {
        AlertEvent {
            ts: 0,
            status,
            severity: Severity::Warning,
            kind: "hbm_ecc_trend".into(),
            scope: Scope::Gpu,
            labels: [("gpu".to_owned(), "GPU-1".to_owned())].into(),
            dedup_key: "forewarn/gpu/GPU-1/hbm_ecc_trend".into(),
            summary: "correctable ECC errors rising".into(),
            risk: 0.7,
            eta_hours: None,
            reasons: vec![Reason {
                signal: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL".into(),
                detail: "correctable ECC rate 12/h".into(),
            }],
        }
    }

    fn notification(events: Vec<AlertEvent>, resend: bool) -> Notification {
        Notification {
            receiver: "slack".into(),
            group_key: "g".into(),
            ts: 0,
            events,
            resend,
            firing_in_group: 1,
            shadow: false,
        }
    }

    /// The firing message, its re-send and its resolve each carry the
    /// alert's dedup key, and say which they are.
    #[test]
    fn every_message_names_the_incident_by_its_dedup_key() {
        for (status, resend, state) in [
            (Status::Firing, false, "*FIRING*"),
            (Status::Firing, true, "*STILL FIRING*"),
            (Status::Resolved, false, "*RESOLVED*"),
        ] {
            let m = message(&[notification(vec![event(status)], resend)], None);
            let section = m["blocks"][1]["text"]["text"].as_str().expect("a section");
            assert!(section.contains(state), "{section}");
            assert!(
                section.ends_with("`forewarn/gpu/GPU-1/hbm_ecc_trend`"),
                "{section}"
            );
            assert_eq!(
                section.contains("correctable ECC rate"),
                status == Status::Firing,
                "reasons on firing lines only: {section}"
            );
        }
    }
}
