//! `[[receivers]]`: one table per receiver, tagged by `type`
//! (`pagerduty`, `slack`, `alertmanager`, `webhook`, `file`). Every URL and
//! key has one type, [`RawSecret`]: `{ env = "VAR" }`, `{ file = "/path" }`,
//! `{ value = "http://..." }` or a plain string (the same as `value`).
//! Secrets are never written inline: a routing key or a Slack webhook URL
//! must come from `env` or `file`; URLs that are not secrets (PagerDuty's
//! endpoint, Alertmanager, a generic webhook) may be inline, and an inline
//! URL must be an `http(s)://` URL.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::config::{ConfigError, duration};
use crate::secret::SecretSource;

/// Per-request timeout default: PagerDuty and Slack answer in well under a
/// second; 10 s rides out a slow proxy without stalling the queue for long.
const DEFAULT_TIMEOUT: &str = "10s";

/// Where a URL or key comes from: `{ env = .. }`, `{ file = .. }`,
/// `{ value = .. }`, or a plain string (inline, as `value`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawSecret {
    /// Environment variable.
    Env(String),
    /// File.
    File(PathBuf),
    /// Inline value (not allowed for routing keys and Slack webhook URLs).
    Value(String),
}

/// The table form of [`RawSecret`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum SecretTable {
    Env(String),
    File(PathBuf),
    Value(String),
}

impl<'de> Deserialize<'de> for RawSecret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawSecret;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a URL string, or one of { env = \"VAR\" }, { file = \"/path\" }, { value = \"...\" }",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RawSecret, E> {
                Ok(RawSecret::Value(v.to_owned()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RawSecret, A::Error> {
                let t =
                    SecretTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(match t {
                    SecretTable::Env(v) => RawSecret::Env(v),
                    SecretTable::File(p) => RawSecret::File(p),
                    SecretTable::Value(v) => RawSecret::Value(v),
                })
            }
        }
        d.deserialize_any(Visit)
    }
}

/// One receiver as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RawReceiver {
    /// PagerDuty Events API v2.
    Pagerduty(RawPagerDuty),
    /// Slack incoming webhook.
    Slack(RawSlack),
    /// Alertmanager `POST /api/v2/alerts`.
    Alertmanager(RawAlertmanager),
    /// Generic webhook: one contract event per POST.
    Webhook(RawWebhook),
    /// JSON lines file.
    File(RawFile),
}

/// `type = "pagerduty"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPagerDuty {
    /// Receiver name used by routes.
    pub name: String,
    /// Events API endpoint. Default `https://events.pagerduty.com/v2/enqueue`.
    pub url: Option<RawSecret>,
    /// Integration (routing) key: `{ env = ".." }` or `{ file = ".." }`.
    pub routing_key: RawSecret,
    /// Link attached to triggers; `{label}` placeholders are filled from the
    /// alert's labels (e.g. `https://forewarn/v1/gpus/{gpu}`); no link when a label is missing.
    pub link_template: Option<String>,
    /// PagerDuty severity per forewarn severity. Default identity.
    #[serde(default)]
    pub severity_map: RawSeverityMap,
    /// Label used as `payload.source`. Default `host` (then the dedup key's scope value).
    pub source_label: Option<String>,
    /// Request timeout. Default "10s".
    pub timeout: Option<String>,
}

/// forewarn severity -> PagerDuty severity (`critical`, `error`, `warning`, `info`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSeverityMap {
    /// Default `critical`.
    pub critical: Option<String>,
    /// Default `warning`.
    pub warning: Option<String>,
    /// Default `info`.
    pub info: Option<String>,
}

/// `type = "slack"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlack {
    /// Receiver name.
    pub name: String,
    /// Incoming webhook URL (a secret): `{ env = ".." }` or `{ file = ".." }`.
    pub webhook_url: RawSecret,
    /// Link per alert, as for PagerDuty.
    pub link_template: Option<String>,
    /// Minimum spacing of messages. Default "1s" (Slack's 1 message/s per webhook).
    pub min_interval: Option<String>,
    /// Queued notifications merged into one message during a storm. Default 20.
    pub max_batch: Option<usize>,
    /// Request timeout. Default "10s".
    pub timeout: Option<String>,
}

/// `type = "alertmanager"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAlertmanager {
    /// Receiver name.
    pub name: String,
    /// Base URL (`http://am:9093`); alerts go to `<url>/api/v2/alerts`.
    pub url: RawSecret,
    /// Re-send interval of firing alerts (caps the route's `repeat_interval`). Default "1m".
    pub resend_interval: Option<String>,
    /// `generatorURL`, as `link_template` for PagerDuty.
    pub link_template: Option<String>,
    /// Request timeout. Default "10s".
    pub timeout: Option<String>,
}

/// `type = "webhook"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWebhook {
    /// Receiver name.
    pub name: String,
    /// URL receiving `POST` of one contract event (JSON) per request.
    pub url: RawSecret,
    /// Request timeout. Default "10s".
    pub timeout: Option<String>,
}

/// `type = "file"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFile {
    /// Receiver name.
    pub name: String,
    /// JSON lines file, appended to (one contract event per line).
    pub path: PathBuf,
}

/// PagerDuty's severities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PdSeverity {
    /// `critical`.
    Critical,
    /// `error`.
    Error,
    /// `warning`.
    Warning,
    /// `info`.
    Info,
}

impl PdSeverity {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PdSeverity::Critical => "critical",
            PdSeverity::Error => "error",
            PdSeverity::Warning => "warning",
            PdSeverity::Info => "info",
        }
    }
}

/// A validated receiver.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    /// Name.
    pub name: String,
    /// Request timeout (HTTP receivers).
    pub timeout: Duration,
    /// Type-specific settings.
    pub kind: ReceiverKind,
}

/// Type-specific settings of a validated receiver.
#[derive(Debug, Clone)]
pub enum ReceiverKind {
    /// PagerDuty.
    PagerDuty {
        /// Endpoint.
        url: SecretSource,
        /// Routing key.
        routing_key: SecretSource,
        /// Link template.
        link_template: Option<String>,
        /// Severity for critical, warning, info.
        severity_map: [PdSeverity; 3],
        /// Source label.
        source_label: String,
    },
    /// Slack.
    Slack {
        /// Webhook URL.
        webhook_url: SecretSource,
        /// Link template.
        link_template: Option<String>,
        /// Message spacing.
        min_interval: Duration,
        /// Merge limit.
        max_batch: usize,
    },
    /// Alertmanager.
    Alertmanager {
        /// Base URL.
        url: SecretSource,
        /// Re-send interval.
        resend_interval: Duration,
        /// generatorURL template.
        link_template: Option<String>,
    },
    /// Webhook.
    Webhook {
        /// URL.
        url: SecretSource,
    },
    /// File.
    File {
        /// Path.
        path: PathBuf,
    },
}

/// `inline_ok`: the value is a URL that is not a secret, which may be
/// written inline; it is then checked to be an `http(s)://` URL.
fn source(key: &str, raw: &RawSecret, inline_ok: bool) -> Result<SecretSource, ConfigError> {
    match raw {
        RawSecret::Env(v) => Ok(SecretSource::Env(v.clone())),
        RawSecret::File(p) => Ok(SecretSource::File(p.clone())),
        RawSecret::Value(v) if inline_ok => {
            check_url(v).map_err(|problem| ConfigError::new(key, problem))?;
            Ok(SecretSource::Value(v.clone()))
        }
        RawSecret::Value(_) => Err(ConfigError::new(
            key,
            "a secret must come from { env = .. } or { file = .. }",
        )),
    }
}

/// Whether `text` is an absolute `http` or `https` URL with a host.
pub fn check_url(text: &str) -> Result<(), String> {
    match reqwest::Url::parse(text) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        Ok(u) => Err(format!(
            "{text:?} is not an http(s) URL (scheme {:?})",
            u.scheme()
        )),
        Err(e) => Err(format!("{text:?} is not a URL: {e}")),
    }
}

fn pd_severity(
    key: &str,
    v: &Option<String>,
    default: PdSeverity,
) -> Result<PdSeverity, ConfigError> {
    match v.as_deref() {
        None => Ok(default),
        Some("critical") => Ok(PdSeverity::Critical),
        Some("error") => Ok(PdSeverity::Error),
        Some("warning") => Ok(PdSeverity::Warning),
        Some("info") => Ok(PdSeverity::Info),
        Some(other) => Err(ConfigError::new(
            key,
            format!("{other:?} is not critical, error, warning or info"),
        )),
    }
}

impl RawReceiver {
    /// The receiver's name.
    pub fn name(&self) -> &str {
        match self {
            RawReceiver::Pagerduty(r) => &r.name,
            RawReceiver::Slack(r) => &r.name,
            RawReceiver::Alertmanager(r) => &r.name,
            RawReceiver::Webhook(r) => &r.name,
            RawReceiver::File(r) => &r.name,
        }
    }

    /// Validates (no IO: secrets are read by `Sink::build`).
    pub fn validate(&self, key: &str) -> Result<ReceiverConfig, ConfigError> {
        let timeout = |t: &Option<String>| {
            duration(
                &format!("{key}.timeout"),
                t.as_deref().unwrap_or(DEFAULT_TIMEOUT),
            )
        };
        let (timeout, kind) = match self {
            RawReceiver::Pagerduty(r) => {
                let m = &r.severity_map;
                let severity_map = [
                    pd_severity(
                        &format!("{key}.severity_map.critical"),
                        &m.critical,
                        PdSeverity::Critical,
                    )?,
                    pd_severity(
                        &format!("{key}.severity_map.warning"),
                        &m.warning,
                        PdSeverity::Warning,
                    )?,
                    pd_severity(
                        &format!("{key}.severity_map.info"),
                        &m.info,
                        PdSeverity::Info,
                    )?,
                ];
                let url = match &r.url {
                    Some(u) => source(&format!("{key}.url"), u, true)?,
                    None => {
                        SecretSource::Value("https://events.pagerduty.com/v2/enqueue".to_owned())
                    }
                };
                (
                    timeout(&r.timeout)?,
                    ReceiverKind::PagerDuty {
                        url,
                        routing_key: source(&format!("{key}.routing_key"), &r.routing_key, false)?,
                        link_template: r.link_template.clone(),
                        severity_map,
                        source_label: r.source_label.clone().unwrap_or_else(|| "host".to_owned()),
                    },
                )
            }
            RawReceiver::Slack(r) => {
                let max_batch = r.max_batch.unwrap_or(20);
                if max_batch == 0 {
                    return Err(ConfigError::new(format!("{key}.max_batch"), "must be >= 1"));
                }
                (
                    timeout(&r.timeout)?,
                    ReceiverKind::Slack {
                        webhook_url: source(&format!("{key}.webhook_url"), &r.webhook_url, false)?,
                        link_template: r.link_template.clone(),
                        min_interval: duration(
                            &format!("{key}.min_interval"),
                            r.min_interval.as_deref().unwrap_or("1s"),
                        )?,
                        max_batch,
                    },
                )
            }
            RawReceiver::Alertmanager(r) => {
                let resend_interval = duration(
                    &format!("{key}.resend_interval"),
                    r.resend_interval.as_deref().unwrap_or("1m"),
                )?;
                if resend_interval.is_zero() {
                    return Err(ConfigError::new(
                        format!("{key}.resend_interval"),
                        "must be > 0",
                    ));
                }
                (
                    timeout(&r.timeout)?,
                    ReceiverKind::Alertmanager {
                        url: source(&format!("{key}.url"), &r.url, true)?,
                        resend_interval,
                        link_template: r.link_template.clone(),
                    },
                )
            }
            RawReceiver::Webhook(r) => (
                timeout(&r.timeout)?,
                ReceiverKind::Webhook {
                    url: source(&format!("{key}.url"), &r.url, true)?,
                },
            ),
            RawReceiver::File(r) => (
                Duration::from_secs(10),
                ReceiverKind::File {
                    path: r.path.clone(),
                },
            ),
        };
        if self.name().is_empty()
            || !self
                .name()
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        {
            return Err(ConfigError::new(
                format!("{key}.name"),
                "must be non-empty [A-Za-z0-9_-] (it names an outbox folder)",
            ));
        }
        Ok(ReceiverConfig {
            name: self.name().to_owned(),
            timeout,
            kind,
        })
    }
}
