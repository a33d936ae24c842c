//! The whole alerts config file ([`RawConfig`] -> [`Config`]) and the glue
//! the detector drives: [`AlertSystem::open`] builds the engine, router,
//! outbox and sinks; the detector then calls `engine.observe` / `tick`,
//! hands the events to [`AlertRouter::push`] and calls
//! [`AlertRouter::flush`] (blocking: outbox fsyncs) as event time passes,
//! while [`AlertSystem::spawn_delivery`] runs one worker per receiver.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::alert::AlertEvent;
use crate::config::{
    ConfigError, EngineConfig, RawCorrelation, RawEngineConfig, RawInhibitRule, RawLifecycle,
    RawSilence, duration,
};
use crate::delivery::{self, RetryPolicy};
use crate::engine::AlertEngine;
use crate::outbox::{Outbox, OutboxError};
use crate::route::{Dispatcher, Notification, RawRoute, Route, Router, RouterSnapshot};
use crate::shadow::ShadowLog;
use crate::sinks::config::{RawReceiver, ReceiverConfig};
use crate::sinks::{Sink, SinkError};
use crate::snapshot::{EngineSnapshot, SnapshotError};
use crate::time::duration_ms;

/// What an `[alerts]` table of `forewarn.toml` layers over (see
/// `docs/alerts.md`, "Layering"). The alerts crate itself reads one table
/// as it is; the layering is the detector's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Base {
    /// The built-in policy: the table's keys override its keys.
    #[default]
    Builtin,
    /// Nothing: the table is the whole policy.
    None,
}

/// The alerts config file (see `docs/alerts.md`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// What this table layers over in `forewarn.toml`: `"builtin"`
    /// (default) or `"none"` (start from nothing).
    #[serde(default)]
    pub base: Base,
    /// Lifecycle rules (`[lifecycle.default]`, `[lifecycle.kinds.<kind>]`).
    #[serde(default)]
    pub lifecycle: RawLifecycle,
    /// Upward correlation and job attribution.
    #[serde(default)]
    pub correlation: RawCorrelation,
    /// Silences known at startup.
    #[serde(default)]
    pub silences: Vec<RawSilence>,
    /// Inhibition rules.
    #[serde(default)]
    pub inhibit_rules: Vec<RawInhibitRule>,
    /// Routing tree (its root needs a `receiver`).
    #[serde(default)]
    pub route: RawRoute,
    /// Receivers named by routes.
    #[serde(default)]
    pub receivers: Vec<RawReceiver>,
    /// Outbox and retry settings.
    #[serde(default)]
    pub outbox: RawOutbox,
    /// Shadow routes (`shadow = true`, or `forewarn serve --shadow`) append
    /// their notifications here instead of sending them. Default
    /// `forewarn-shadow.jsonl`.
    pub shadow_file: Option<PathBuf>,
}

/// `[outbox]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawOutbox {
    /// Directory of the durable outbox. Default `forewarn-outbox` (relative to the working directory).
    pub dir: Option<PathBuf>,
    /// First retry delay. Default "1s".
    pub initial_backoff: Option<String>,
    /// Retry delay cap. Default "5m" (PagerDuty: "a backoff of a few minutes").
    pub max_backoff: Option<String>,
    /// Cap on a receiver's Retry-After. Default "1h".
    pub max_retry_after: Option<String>,
    /// Jitter seed. Default 0.
    #[serde(default)]
    pub seed: u64,
}

/// The validated config.
#[derive(Debug, Clone)]
pub struct Config {
    /// Engine settings.
    pub engine: EngineConfig,
    /// Routing tree.
    pub route: Route,
    /// Receivers.
    pub receivers: Vec<ReceiverConfig>,
    /// Outbox directory.
    pub outbox_dir: PathBuf,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Shadow notifications go here.
    pub shadow_file: PathBuf,
}

impl RawConfig {
    /// Parses TOML (unknown keys are errors).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| {
            let key = e
                .span()
                .map_or_else(String::new, |s| format!("bytes {}..{}", s.start, s.end));
            ConfigError::new(key, e.message().to_owned())
        })
    }

    /// Checks everything (no IO) and builds the typed config.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let engine = RawEngineConfig {
            lifecycle: self.lifecycle.clone(),
            correlation: self.correlation.clone(),
            silences: self.silences.clone(),
            inhibit_rules: self.inhibit_rules.clone(),
        }
        .validate()?;
        let mut names = HashSet::new();
        let receivers = self
            .receivers
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let key = format!("receivers[{i}]");
                if !names.insert(r.name().to_owned()) {
                    return Err(ConfigError::new(
                        format!("{key}.name"),
                        format!("duplicate receiver {:?}", r.name()),
                    ));
                }
                r.validate(&key)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let known: Vec<&str> = receivers.iter().map(|r| r.name.as_str()).collect();
        let route = self.route.validate(&known)?;
        let o = &self.outbox;
        let d = |k: &str, v: &Option<String>, default: &str| {
            duration(&format!("outbox.{k}"), v.as_deref().unwrap_or(default))
        };
        let retry = RetryPolicy {
            initial_backoff: d("initial_backoff", &o.initial_backoff, "1s")?,
            max_backoff: d("max_backoff", &o.max_backoff, "5m")?,
            max_retry_after: d("max_retry_after", &o.max_retry_after, "1h")?,
            seed: o.seed,
        };
        if retry.initial_backoff.is_zero() || retry.max_backoff < retry.initial_backoff {
            return Err(ConfigError::new(
                "outbox.max_backoff",
                "need 0 < initial_backoff <= max_backoff",
            ));
        }
        Ok(Config {
            engine,
            route,
            receivers,
            outbox_dir: o
                .dir
                .clone()
                .unwrap_or_else(|| PathBuf::from("forewarn-outbox")),
            retry,
            shadow_file: self
                .shadow_file
                .clone()
                .unwrap_or_else(|| PathBuf::from("forewarn-shadow.jsonl")),
        })
    }
}

/// Why the alert system could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A sink could not be built (secret missing, client).
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The outbox could not be opened.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
}

/// Aggregation groups feeding the outbox.
#[derive(Debug)]
pub struct AlertRouter {
    dispatcher: Dispatcher,
    outbox: Arc<Outbox>,
    shadow: Option<ShadowLog>,
    /// Notifications made but not yet stored in the outbox, oldest first
    /// (the outbox's disk was full or failing); stored before any newer one.
    unwritten: VecDeque<Notification>,
}

fn resend_caps(sinks: &[Arc<Sink>]) -> HashMap<String, i64> {
    sinks
        .iter()
        .filter_map(|s| {
            s.resend_interval()
                .map(|d| (s.name().to_owned(), duration_ms(d)))
        })
        .collect()
}

impl AlertRouter {
    /// A router over `route` writing to `outbox`; `sinks` supply re-send caps.
    pub fn new(route: &Route, sinks: &[Arc<Sink>], outbox: Arc<Outbox>) -> Self {
        Self {
            dispatcher: Dispatcher::new(Router::new(route), resend_caps(sinks)),
            outbox,
            shadow: None,
            unwritten: VecDeque::new(),
        }
    }

    /// Shadow routes' notifications are appended to `path`.
    pub fn with_shadow_log(mut self, path: PathBuf) -> Self {
        self.shadow = Some(ShadowLog::new(path));
        self
    }

    /// Shadow notifications recorded so far.
    pub fn shadowed(&self) -> u64 {
        self.shadow.as_ref().map_or(0, ShadowLog::written)
    }

    /// Copies the aggregation groups (see `route::checkpoint`) and the
    /// notifications not yet stored in the outbox.
    pub fn snapshot(&self) -> RouterSnapshot {
        let mut snap = self.dispatcher.snapshot();
        snap.unwritten = self
            .unwritten
            .iter()
            .filter_map(|n| serde_json::to_string(n).ok())
            .collect();
        snap
    }

    /// Notifications waiting for the outbox (see [`AlertRouter::flush`]).
    pub fn unwritten(&self) -> usize {
        self.unwritten.len()
    }

    /// Whether every event pushed so far has left: in a notification,
    /// stored, and accepted by its receiver (or dead-lettered).
    pub fn settled(&self) -> bool {
        !self.dispatcher.has_pending()
            && self.unwritten.is_empty()
            && self.outbox.pending_total() == 0
    }

    /// As [`AlertRouter::new`], with the groups of `snap` whose route still
    /// exists in `route` (others are dropped with a warning).
    pub fn restore(
        route: &Route,
        sinks: &[Arc<Sink>],
        outbox: Arc<Outbox>,
        mut snap: RouterSnapshot,
    ) -> Result<Self, SnapshotError> {
        let unwritten = std::mem::take(&mut snap.unwritten)
            .iter()
            .map(|j| serde_json::from_str(j))
            .collect::<Result<VecDeque<Notification>, _>>()
            .map_err(|e| SnapshotError::Corrupt(format!("an unwritten notification: {e}")))?;
        let dispatcher = Dispatcher::restore(Router::new(route), resend_caps(sinks), snap)?;
        Ok(Self {
            dispatcher,
            outbox,
            shadow: None,
            unwritten,
        })
    }

    /// Routes engine events into their groups, in event time: a group
    /// due before an event's time is flushed first (into the notifications
    /// waiting for the outbox), as it would have been had the events come
    /// one by one. A batch that spans hours (a stage catching up after a
    /// takeover) otherwise held an incident's firing and its resolve in
    /// one window, and the resolve cancelled the page.
    pub fn push(&mut self, events: &[AlertEvent]) {
        if events.is_empty() {
            return;
        }
        // (The earliest flush due, kept up to date without a scan of
        // every group per event.)
        let mut due = self.dispatcher.next_due();
        for e in events {
            if due.is_some_and(|t| t < e.ts) {
                self.take_due(e.ts);
                due = self.dispatcher.next_due();
            }
            if let Some(t) = self.dispatcher.push_due(e) {
                due = Some(due.map_or(t, |d| d.min(t)));
            }
        }
    }

    /// Flushes groups due at `now_ms` into the outbox (blocking IO).
    /// Returns the number of entries written.
    ///
    /// If the outbox cannot store them (disk full or failing), the
    /// notifications stay here, in order, and the error is returned; every
    /// later call stores them first, each exactly once. The caller bounds
    /// how many may wait ([`AlertRouter::unwritten`]) and retries with
    /// [`AlertRouter::retry`].
    pub fn flush(&mut self, now_ms: i64) -> Result<usize, OutboxError> {
        self.take_due(now_ms);
        self.retry()
    }

    /// Moves the notifications of the groups due at `now_ms` to those
    /// waiting for the outbox (shadow routes' to their log).
    fn take_due(&mut self, now_ms: i64) {
        let mut notifications = self.dispatcher.tick(now_ms);
        if notifications.iter().any(|n| n.shadow) {
            let (shadow, live): (Vec<_>, Vec<_>) =
                notifications.into_iter().partition(|n| n.shadow);
            for n in &shadow {
                tracing::info!(receiver = %n.receiver, group = %n.group_key, events = n.events.len(), "shadow: would notify");
            }
            match &mut self.shadow {
                Some(log) => {
                    if let Err(source) = log.record(&shadow) {
                        // A shadow log is for evaluation: its fault never
                        // holds live notifications back.
                        tracing::error!(path = %log.path().display(), error = %source, "shadow log not written");
                    }
                }
                None => tracing::warn!(
                    dropped = shadow.len(),
                    "shadow notifications with no shadow log configured"
                ),
            }
            notifications = live;
        }
        self.unwritten.extend(notifications);
    }

    /// Stores the notifications waiting for the outbox.
    pub fn retry(&mut self) -> Result<usize, OutboxError> {
        if self.unwritten.is_empty() {
            return Ok(0);
        }
        self.outbox.enqueue_from(&mut self.unwritten)
    }

    /// Event time of the next flush due.
    pub fn next_due(&self) -> Option<i64> {
        self.dispatcher.next_due()
    }
}

/// Everything the detector needs, built from a [`Config`].
#[derive(Debug)]
pub struct AlertSystem {
    /// The engine (observe / tick).
    pub engine: AlertEngine,
    /// Routing into the outbox.
    pub router: AlertRouter,
    /// The durable outbox.
    pub outbox: Arc<Outbox>,
    /// One sink per receiver.
    pub sinks: Vec<Arc<Sink>>,
    retry: RetryPolicy,
}

impl AlertSystem {
    /// Reads secrets, opens the outbox (recovering pending entries).
    pub fn open(cfg: &Config) -> Result<Self, StartError> {
        Self::open_in(cfg, &cfg.outbox_dir)
    }

    /// As [`AlertSystem::open`] with another outbox directory.
    pub fn open_in(cfg: &Config, outbox_dir: &Path) -> Result<Self, StartError> {
        let sinks = cfg
            .receivers
            .iter()
            .map(|r| Sink::build(r).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let names: Vec<(String, bool)> = sinks
            .iter()
            .map(|s| (s.name().to_owned(), s.per_event()))
            .collect();
        let outbox = Arc::new(Outbox::open(outbox_dir, &names)?);
        let router = AlertRouter::new(&cfg.route, &sinks, outbox.clone())
            .with_shadow_log(cfg.shadow_file.clone());
        Ok(Self {
            engine: AlertEngine::new(cfg.engine.clone()),
            router,
            outbox,
            sinks,
            retry: cfg.retry,
        })
    }

    /// Replaces the engine and the router's groups by the state of a
    /// checkpoint, under `cfg` (the config this system was opened with;
    /// it may differ from the one the snapshots were taken under).
    pub fn restore(
        &mut self,
        cfg: &Config,
        engine: EngineSnapshot,
        router: RouterSnapshot,
    ) -> Result<(), SnapshotError> {
        self.engine = AlertEngine::restore(cfg.engine.clone(), engine)?;
        self.router = AlertRouter::restore(&cfg.route, &self.sinks, self.outbox.clone(), router)?;
        Ok(())
    }

    /// Starts one delivery worker per receiver (needs a tokio runtime).
    pub fn spawn_delivery(
        &self,
        shutdown: &CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<Result<(), OutboxError>>> {
        delivery::spawn_workers(&self.outbox, self.sinks.clone(), self.retry, shutdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_config_is_valid() {
        let doc = include_str!("../../docs/alerts.md");
        let start = doc.find("```toml\n").expect("docs have a toml example") + 8;
        let end = start + doc[start..].find("```").expect("closed block");
        let cfg = RawConfig::from_toml(&doc[start..end])
            .expect("parses")
            .validate()
            .expect("valid");
        assert_eq!(cfg.receivers.len(), 5);
        assert_eq!(cfg.route.routes.len(), 3);
        assert_eq!(cfg.engine.job_rules["app_xid"].min_count, 4);
        let bad = doc[start..end].replace("group_wait = \"0s\"", "group_wait = \"0 q\"");
        let err = RawConfig::from_toml(&bad)
            .expect("parses")
            .validate()
            .map(|_| ())
            .expect_err("bad duration");
        assert_eq!(err.key, "route.routes[0].group_wait");
        let inline_key = doc[start..end].replace(
            "{ env = \"FOREWARN_PD_ROUTING_KEY\" }",
            "{ value = \"abc\" }",
        );
        let err = RawConfig::from_toml(&inline_key)
            .expect("parses")
            .validate()
            .map(|_| ())
            .expect_err("inline secret");
        assert_eq!(err.key, "receivers[0].routing_key");
        assert!(
            RawConfig::from_toml("[route]\nreceiver = \"x\"\nreceivers = []\n[typo]\n").is_err()
        );
    }
}
