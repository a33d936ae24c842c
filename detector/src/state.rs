//! The state the pipeline publishes and REST reads: the risk table
//! ([`RiskTable`]: latest assessment and a short risk history per GPU), the
//! alert view (active alerts and recent events), the metrics, the silences
//! and the model status. Written by the alert stage once per shard batch
//! under short write locks; never held across `.await`; lookups never wait
//! on scoring.
//!
//! This module is the bottom of the service: it holds plain data and knows
//! nothing of the pipeline, reloads or the API, which all depend on it (the
//! API's own handles live in `api::AppState`, built by `serve`).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use crate::assess::Assessment;
use crate::metrics::Metrics;
pub use crate::risk_table::{GpuView, RiskTable};
use alerts::{AlertEvent, Status};
use serde::Serialize;

/// The version of the rules and forest, which ship with the binary.
pub const BUILTIN_VERSION: &str = concat!("rules+rcf-", env!("CARGO_PKG_VERSION"));

/// What `GET /v1/models` shows: the failure model in use and its reload
/// history (kept up to date by `crate::reload`).
#[derive(Debug, Clone, Serialize)]
pub struct ModelStatus {
    pub version: String,
    /// The artifact in use (none: rules, trends and the forest only).
    pub path: Option<PathBuf>,
    pub trained: Option<String>,
    pub horizon_h: Option<f64>,
    pub feature_schema_version: Option<u32>,
    /// Wall time (epoch ms) of the last successful load.
    pub loaded_at_ms: Option<i64>,
    pub reloads: u64,
    pub refused: u64,
    /// Why the newest refused artifact was refused.
    pub last_error: Option<String>,
}

impl ModelStatus {
    pub fn builtin() -> Self {
        ModelStatus {
            version: BUILTIN_VERSION.to_owned(),
            path: None,
            trained: None,
            horizon_h: None,
            feature_schema_version: None,
            loaded_at_ms: None,
            reloads: 0,
            refused: 0,
            last_error: None,
        }
    }
}

/// Recent alert events kept for `GET /v1/alerts`.
const RECENT_EVENTS: usize = 2_000;

/// Active alerts by dedup key, and the newest events.
#[derive(Debug, Default)]
pub struct AlertView {
    pub active: BTreeMap<String, AlertEvent>,
    pub recent: VecDeque<AlertEvent>,
    /// Dedup keys of active alerts by their `gpu` label, so one GPU's
    /// alerts are found without scanning them all.
    by_gpu: HashMap<String, BTreeSet<String>>,
    /// Active alerts with no `gpu` label (host, rack, fleet scope).
    wide: BTreeSet<String>,
}

impl AlertView {
    fn insert(&mut self, e: &AlertEvent) {
        match e.labels.get("gpu") {
            Some(g) => {
                self.by_gpu
                    .entry(g.clone())
                    .or_default()
                    .insert(e.dedup_key.clone());
            }
            None => {
                self.wide.insert(e.dedup_key.clone());
            }
        }
        self.active.insert(e.dedup_key.clone(), e.clone());
    }

    fn remove(&mut self, key: &str) {
        let Some(e) = self.active.remove(key) else {
            return;
        };
        match e.labels.get("gpu") {
            Some(g) => {
                if let Some(set) = self.by_gpu.get_mut(g) {
                    set.remove(key);
                    if set.is_empty() {
                        self.by_gpu.remove(g);
                    }
                }
            }
            None => {
                self.wide.remove(key);
            }
        }
    }

    /// Active alerts about `gpu`: its own, and wider ones naming it.
    pub fn for_gpu(&self, gpu: &str) -> Vec<&AlertEvent> {
        let own = self.by_gpu.get(gpu).into_iter().flatten();
        let wide = self.wide.iter().filter(|k| {
            self.active
                .get(*k)
                .is_some_and(|e| e.reasons.iter().any(|r| r.detail.contains(gpu)))
        });
        own.chain(wide).filter_map(|k| self.active.get(k)).collect()
    }
}

/// Everything shared between the pipeline and the API.
#[derive(Debug)]
pub struct SharedState {
    pub gpus: RiskTable,
    pub alerts: RwLock<AlertView>,
    pub metrics: Metrics,
    /// True once restored and caught up.
    pub ready: AtomicBool,
    /// Silences known to the alert engine (published on every change).
    pub silences: RwLock<Vec<alerts::Silence>>,
    /// The inhibition rules in force (`GET /v1/alerts` marks inhibited alerts).
    pub inhibit_rules: RwLock<Vec<alerts::config::InhibitRule>>,
    /// The alert engine's clock (event time, epoch ms; `i64::MIN` before
    /// the first sample): what "now" is for silences.
    clock_ms: AtomicI64,
    /// The failure model in use and its reload history.
    pub model: RwLock<ModelStatus>,
    /// Each long-lived component's health (`/healthz`, `/readyz`).
    pub health: crate::health::Health,
    /// Kafka partitions whose state this instance holds (`topic-partition`,
    /// sorted; empty without partition-aligned state). `/readyz` lists them.
    partitions: RwLock<Vec<String>>,
    /// This instance runs the fleet's alert stage now (`crate::fleet`).
    pub fleet_stage_owner: AtomicBool,
}

pub type State = Arc<SharedState>;

impl SharedState {
    pub fn new() -> State {
        Arc::new(SharedState {
            gpus: RiskTable::default(),
            alerts: RwLock::new(AlertView::default()),
            metrics: Metrics::default(),
            ready: AtomicBool::new(false),
            silences: RwLock::new(Vec::new()),
            inhibit_rules: RwLock::new(Vec::new()),
            clock_ms: AtomicI64::new(i64::MIN),
            model: RwLock::new(ModelStatus::builtin()),
            health: crate::health::Health::default(),
            partitions: RwLock::new(Vec::new()),
            fleet_stage_owner: AtomicBool::new(false),
        })
    }

    /// Publishes the partitions whose state this instance holds.
    pub fn set_partitions(&self, keys: Vec<(String, i32)>) {
        if let Ok(mut p) = self.partitions.write() {
            *p = keys.iter().map(|(t, n)| format!("{t}-{n}")).collect();
        }
    }

    /// The partitions whose state this instance holds.
    pub fn partitions(&self) -> Vec<String> {
        self.partitions
            .read()
            .map(|p| p.clone())
            .unwrap_or_default()
    }

    /// Publishes the engine's silences.
    pub fn set_silences(&self, list: Vec<alerts::Silence>) {
        if let Ok(mut s) = self.silences.write() {
            *s = list;
        }
    }

    /// Publishes the alert engine's clock.
    pub fn set_clock(&self, ms: i64) {
        self.clock_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// "Now" for silences: the alert engine's event time, or the wall
    /// clock before any sample (a service that has seen no data yet).
    pub fn event_now_ms(&self) -> i64 {
        match self.clock_ms.load(Ordering::Relaxed) {
            i64::MIN => crate::checkpoint::wall_ms(),
            ms => ms,
        }
    }

    /// Publishes a batch of assessments.
    pub fn publish(&self, batch: &[Assessment]) {
        if let Err(e) = self.gpus.publish(batch) {
            tracing::error!(error = %e, "risk table not updated");
        }
    }

    /// Drops evicted GPUs from the risk table.
    pub fn forget(&self, gpus: &[features::GpuId]) {
        if gpus.is_empty() {
            return;
        }
        if let Err(e) = self.gpus.remove(gpus) {
            tracing::error!(error = %e, "risk table not updated");
        }
    }

    /// Records alert events.
    pub fn record_alerts(&self, events: &[AlertEvent]) {
        if events.is_empty() {
            return;
        }
        let Ok(mut view) = self.alerts.write() else {
            return;
        };
        for e in events {
            self.metrics.alert_event(e);
            match e.status {
                Status::Firing => view.insert(e),
                Status::Resolved => view.remove(&e.dedup_key),
            }
            if view.recent.len() == RECENT_EVENTS {
                view.recent.pop_front();
            }
            view.recent.push_back(e.clone());
        }
    }

    /// Replaces the active alerts (a fleet view catching up from the
    /// stage owner's snapshot); recent events stay.
    pub fn set_active(&self, active: &[AlertEvent]) {
        let Ok(mut view) = self.alerts.write() else {
            return;
        };
        let keys: Vec<String> = view.active.keys().cloned().collect();
        for k in keys {
            view.remove(&k);
        }
        for e in active {
            view.insert(e);
        }
    }

    /// Changes the published model status; returns the new one.
    pub fn set_model_status(&self, f: impl FnOnce(&mut ModelStatus)) -> ModelStatus {
        match self.model.write() {
            Ok(mut s) => {
                f(&mut s);
                s.clone()
            }
            Err(_) => ModelStatus::builtin(),
        }
    }

    /// The version of the models scoring now.
    pub fn model_version(&self) -> String {
        self.model
            .read()
            .map(|s| s.version.clone())
            .unwrap_or_else(|_| BUILTIN_VERSION.to_owned())
    }

    /// A copy of the model status (the built-in one if the lock is poisoned).
    pub fn model_status(&self) -> ModelStatus {
        self.model
            .read()
            .map(|m| m.clone())
            .unwrap_or_else(|_| ModelStatus::builtin())
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Restored and caught up (the source's view; see [`Self::unready`]).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Why `/readyz` fails: not caught up yet, or components down or
    /// degraded on the alert path. Empty when ready.
    pub fn unready(&self) -> Vec<String> {
        let mut why = self.health.unready_parts();
        if !self.is_ready() {
            why.insert(0, "catching_up".to_owned());
        }
        why
    }
}
