//! The state REST reads: the risk table ([`RiskTable`]: latest assessment
//! and a short risk history per GPU) and the alert view (active alerts and
//! recent events). Written by the alert stage once per shard batch under
//! short write locks; never held across `.await`; lookups never wait on
//! scoring.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use crate::assess::Assessment;
use crate::metrics::Metrics;
pub use crate::risk_table::{GpuView, RiskTable};
use alerts::{AlertEvent, Status};

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
    /// Commands into the running pipeline (set once it starts).
    pub pipeline: OnceLock<crate::pipeline::PipelineHandle>,
    /// Settings of the changing endpoints.
    pub admin: Admin,
    /// The alert outbox and its receivers, for delivery metrics.
    pub outbox: OnceLock<(Arc<alerts::Outbox>, Vec<String>)>,
    /// The failure model in use and its reload history.
    pub model: RwLock<crate::reload::ModelStatus>,
    /// Where reloads come from (set once the service starts).
    pub models: OnceLock<Arc<crate::reload::ModelSlot>>,
}

/// Settings of the endpoints that change things (silences, labels, model
/// reloads): they need the bearer token; with no token configured they are
/// refused.
#[derive(Debug, Default)]
pub struct Admin {
    pub token: Option<String>,
    /// Operator labels (`POST /v1/labels`) are appended here (contract CSV).
    pub labels_file: Option<PathBuf>,
}

pub type State = Arc<SharedState>;

impl SharedState {
    pub fn new() -> State {
        Self::with_admin(Admin::default())
    }

    pub fn with_admin(admin: Admin) -> State {
        Arc::new(SharedState {
            gpus: RiskTable::default(),
            alerts: RwLock::new(AlertView::default()),
            metrics: Metrics::default(),
            ready: AtomicBool::new(false),
            silences: RwLock::new(Vec::new()),
            pipeline: OnceLock::new(),
            admin,
            outbox: OnceLock::new(),
            model: RwLock::new(crate::reload::ModelStatus::builtin()),
            models: OnceLock::new(),
        })
    }

    /// Publishes the engine's silences.
    pub fn set_silences(&self, list: Vec<alerts::Silence>) {
        if let Ok(mut s) = self.silences.write() {
            *s = list;
        }
    }

    /// Publishes a batch of assessments.
    pub fn publish(&self, batch: &[Assessment]) {
        if let Err(e) = self.gpus.publish(batch) {
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

    /// Changes the published model status; returns the new one.
    pub fn set_model_status(
        &self,
        f: impl FnOnce(&mut crate::reload::ModelStatus),
    ) -> crate::reload::ModelStatus {
        match self.model.write() {
            Ok(mut s) => {
                f(&mut s);
                s.clone()
            }
            Err(_) => crate::reload::ModelStatus::builtin(),
        }
    }

    /// The version of the models scoring now.
    pub fn model_version(&self) -> String {
        self.model
            .read()
            .map(|s| s.version.clone())
            .unwrap_or_else(|_| crate::reload::BUILTIN_VERSION.to_owned())
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}
