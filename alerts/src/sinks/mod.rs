//! Sinks: the last hop. A [`Sink`] turns outbox entries ([`Notification`]s)
//! into one request to its receiver and classifies the answer as an
//! [`Outcome`]; retries, backoff and dead-lettering live in `delivery.rs`,
//! durability in `outbox.rs`. Payload mappings are pure functions in each
//! sink's file (tested against `shared/reference/`):
//! `pagerduty.rs`, `slack.rs`, `alertmanager.rs`, `webhook.rs`, `file.rs`.
//!
//! Secrets: URLs and keys are [`Secret`]s; transport errors are stripped of
//! their URL (`reqwest::Error::without_url`) and receivers' answers pass
//! through [`Secret::redact`] before they are logged or dead-lettered.

pub mod alertmanager;
pub mod config;
pub mod file;
pub mod pagerduty;
pub mod slack;
pub mod webhook;

use std::time::Duration;

use crate::alert::Labels;
use crate::route::Notification;
use crate::secret::{Secret, SecretError};
use config::{ReceiverConfig, ReceiverKind};

/// How a receiver answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Accepted (2xx): the entries can leave the outbox.
    Accepted,
    /// Worth retrying (429, 5xx, timeout, connection error), after `after`
    /// when the receiver said so (`Retry-After`).
    Retry {
        /// Receiver-requested delay.
        after: Option<Duration>,
        /// What happened (no secrets).
        reason: String,
    },
    /// Rejected for good (other 4xx): dead-letter with the answer.
    Reject {
        /// HTTP status.
        status: u16,
        /// The receiver's answer (truncated, redacted).
        answer: String,
    },
}

/// Why a sink could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// A secret could not be read.
    #[error("receiver {receiver}: {source}")]
    Secret {
        /// Receiver name.
        receiver: String,
        /// What failed (names the variable or file, not the value).
        source: SecretError,
    },
    /// The HTTP client could not be built.
    #[error("receiver {receiver}: cannot build HTTP client: {reason}")]
    Client {
        /// Receiver name.
        receiver: String,
        /// reqwest's explanation.
        reason: String,
    },
}

/// A receiver ready to deliver.
#[derive(Debug)]
pub enum Sink {
    /// PagerDuty Events API v2.
    PagerDuty(pagerduty::PagerDutySink),
    /// Slack incoming webhook.
    Slack(slack::SlackSink),
    /// Alertmanager API v2.
    Alertmanager(alertmanager::AlertmanagerSink),
    /// Generic webhook.
    Webhook(webhook::WebhookSink),
    /// JSON lines file.
    File(file::FileSink),
}

/// Longest receiver answer kept in a dead letter or log line.
const MAX_ANSWER_CHARS: usize = 2_000;

impl Sink {
    /// Reads secrets and builds the client (startup IO).
    pub fn build(cfg: &ReceiverConfig) -> Result<Self, SinkError> {
        let secret = |s: &crate::secret::SecretSource| {
            s.load().map_err(|source| SinkError::Secret {
                receiver: cfg.name.clone(),
                source,
            })
        };
        let client = || {
            reqwest::Client::builder()
                .timeout(cfg.timeout)
                .user_agent("forewarn-alerts")
                .build()
                .map_err(|e| SinkError::Client {
                    receiver: cfg.name.clone(),
                    reason: e.without_url().to_string(),
                })
        };
        let name = cfg.name.clone();
        Ok(match &cfg.kind {
            ReceiverKind::PagerDuty {
                url,
                routing_key,
                link_template,
                severity_map,
                source_label,
            } => Sink::PagerDuty(pagerduty::PagerDutySink {
                name,
                http: Http {
                    client: client()?,
                    url: secret(url)?,
                },
                routing_key: secret(routing_key)?,
                link_template: link_template.clone(),
                severity_map: *severity_map,
                source_label: source_label.clone(),
            }),
            ReceiverKind::Slack {
                webhook_url,
                link_template,
                min_interval,
                max_batch,
            } => Sink::Slack(slack::SlackSink {
                name,
                http: Http {
                    client: client()?,
                    url: secret(webhook_url)?,
                },
                link_template: link_template.clone(),
                min_interval: *min_interval,
                max_batch: *max_batch,
            }),
            ReceiverKind::Alertmanager {
                url,
                resend_interval,
                link_template,
            } => {
                let base = secret(url)?;
                let full = format!("{}/api/v2/alerts", base.expose().trim_end_matches('/'));
                Sink::Alertmanager(alertmanager::AlertmanagerSink {
                    name,
                    http: Http {
                        client: client()?,
                        url: Secret::new(full),
                    },
                    resend_interval: *resend_interval,
                    link_template: link_template.clone(),
                })
            }
            ReceiverKind::Webhook { url } => Sink::Webhook(webhook::WebhookSink {
                name,
                http: Http {
                    client: client()?,
                    url: secret(url)?,
                },
            }),
            ReceiverKind::File { path } => Sink::File(file::FileSink {
                name,
                path: path.clone(),
            }),
        })
    }

    /// Receiver name.
    pub fn name(&self) -> &str {
        match self {
            Sink::PagerDuty(s) => &s.name,
            Sink::Slack(s) => &s.name,
            Sink::Alertmanager(s) => &s.name,
            Sink::Webhook(s) => &s.name,
            Sink::File(s) => &s.name,
        }
    }

    /// Whether the outbox stores one entry per alert event (per-incident
    /// receivers: PagerDuty, webhook), so a retry never re-sends another
    /// incident's event.
    pub fn per_event(&self) -> bool {
        matches!(self, Sink::PagerDuty(_) | Sink::Webhook(_))
    }

    /// How many queued entries one request may carry (Slack merges a
    /// backlog into one grouped message).
    pub fn max_batch(&self) -> usize {
        match self {
            Sink::Slack(s) => s.max_batch,
            _ => 1,
        }
    }

    /// Minimum spacing of requests (Slack: 1 message/s per webhook).
    pub fn min_interval(&self) -> Duration {
        match self {
            Sink::Slack(s) => s.min_interval,
            _ => Duration::ZERO,
        }
    }

    /// Re-send cap for the dispatcher (Alertmanager receivers).
    pub fn resend_interval(&self) -> Option<Duration> {
        match self {
            Sink::Alertmanager(s) => Some(s.resend_interval),
            _ => None,
        }
    }

    /// Sends `batch` (one entry unless [`Sink::max_batch`] > 1) as one request.
    pub async fn deliver(&self, batch: &[Notification]) -> Outcome {
        match self {
            Sink::PagerDuty(s) => s.deliver(batch).await,
            Sink::Slack(s) => s.deliver(batch).await,
            Sink::Alertmanager(s) => s.deliver(batch).await,
            Sink::Webhook(s) => s.deliver(batch).await,
            Sink::File(s) => s.deliver(batch).await,
        }
    }
}

/// A client and its (secret) endpoint.
#[derive(Debug)]
pub struct Http {
    pub(crate) client: reqwest::Client,
    pub(crate) url: Secret,
}

impl Http {
    /// POSTs `body` as JSON and classifies the answer; `redact` hides
    /// further secrets (a routing key) in the answer.
    pub(crate) async fn post_json(
        &self,
        body: &serde_json::Value,
        redact: Option<&Secret>,
    ) -> Outcome {
        let resp = match self.client.post(self.url.expose()).json(body).send().await {
            Ok(r) => r,
            Err(e) => {
                return Outcome::Retry {
                    after: None,
                    reason: e.without_url().to_string(),
                };
            }
        };
        let status = resp.status();
        let after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after);
        if status.is_success() {
            return Outcome::Accepted;
        }
        let text = resp.text().await.unwrap_or_default();
        let mut answer: String = self
            .url
            .redact(&text)
            .chars()
            .take(MAX_ANSWER_CHARS)
            .collect();
        if let Some(s) = redact {
            answer = s.redact(&answer);
        }
        let code = status.as_u16();
        if code == 429 || code == 408 || status.is_server_error() {
            Outcome::Retry {
                after,
                reason: format!("HTTP {code}: {answer}"),
            }
        } else {
            Outcome::Reject {
                status: code,
                answer,
            }
        }
    }
}

/// Parses `Retry-After`: delta-seconds or an HTTP date.
pub fn retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// `text` cut to at most `max` characters, ending with `…` when cut.
pub fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Fills `{label}` placeholders from `labels`; `None` when one is missing.
pub fn expand_link(template: &str, labels: &Labels) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}')? + start;
        out.push_str(labels.get(&rest[start + 1..end])?);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after("soon"), None);
        assert_eq!(truncate_chars("héllo", 3), "hé…");
        assert_eq!(truncate_chars("hi", 3), "hi");
        let labels: Labels = [("gpu".to_owned(), "GPU-1".to_owned())].into();
        assert_eq!(
            expand_link("http://x/v1/gpus/{gpu}", &labels).as_deref(),
            Some("http://x/v1/gpus/GPU-1")
        );
        assert_eq!(expand_link("http://x/{host}", &labels), None);
    }
}
