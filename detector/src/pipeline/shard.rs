//! A shard: owns the GPUs hashed to it and runs parse → features → models
//! as one synchronous call chain per batch (no `.await`, no locks), so it is
//! unit-testable without a runtime and identical live and in backtest.

use std::collections::HashMap;
use std::sync::Arc;

use features::hash::FxBuild;
use features::{
    FeatureConfig, FeatureEngine, FeatureEvent, FeatureRow, GpuId, Sample, Topology, XidClass,
};
use serde::{Deserialize, Serialize};

use models::failure::FailureModel;

use super::grade_slot::GradeSlot;
use crate::assess::anomaly::{AnomalyModel, AnomalyRead, SCORE_EVERY};
use crate::assess::change::ChangeDetector;
use crate::assess::frozen::FrozenWatch;
use crate::assess::link::LinkWatch;
use crate::assess::predict::Predictor;
use crate::assess::rules::{self, HARD_XIDS};
use crate::assess::thermal_hold::ThermalHold;
use crate::assess::{self, Assessment, Evidence, KINDS, Kind};

#[path = "shard_silence.rs"]
mod silence;

/// A GPU that went quiet with its whole host: its last sample, the host's
/// first sample since (more than `silence::HOST_ALIVE_MARGIN_MS` later) and
/// the first sample of the host's next scrape after that one.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct QuietGpu {
    gpu: GpuId,
    last_ts_ms: i64,
    host_back_ms: Option<i64>,
    #[serde(default)]
    host_next_ms: Option<i64>,
}

/// Which shard owns a GPU: FNV-1a of the UUID (the Kafka key), so every
/// instance and every run splits the fleet the same way.
pub fn shard_of(gpu: &str, shards: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in gpu.as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h % shards.max(1) as u64) as usize
}

/// Event time the expected-vs-actual models and peer statistics learn
/// before degradation rules count: an hour of a fleet's telemetry.
pub const WARM_UP_MS: i64 = 3_600_000;

/// A hard failure stays until the GPU is reset (a counter reset) or gone.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Sticky {
    since_ms: i64,
    evidence: Evidence,
}

/// What one batch produced.
#[derive(Default)]
pub struct BatchOutput {
    pub assessments: Vec<Assessment>,
    /// Rack air readings of buckets the batch closed.
    pub racks: Vec<features::expected::rack::RackReading>,
    /// Samples the feature engine rejected.
    pub rejected: Vec<RejectedSample>,
    /// GPUs forgotten before the batch (the admission gate's evictions).
    pub evicted: Vec<GpuId>,
    /// The fleet's robust clock (see `features::admission`).
    pub clock_ms: Option<i64>,
    /// Wall time the batch's oldest sample was produced, if known.
    pub origin_ms: Option<i64>,
    /// Event time every input partition had reached (see `ShardMsg::Batch`).
    pub horizon_ms: Option<i64>,
}

/// A sample the feature engine rejected, as much of it as a dead letter
/// needs.
pub struct RejectedSample {
    pub reason: &'static str,
    pub error: String,
    pub gpu: GpuId,
    pub ts_ms: i64,
    pub host: Option<Arc<str>>,
}

/// One shard's state: serializable for checkpoints.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shard {
    pub id: usize,
    features: FeatureEngine,
    anomaly: AnomalyModel,
    hard: HashMap<GpuId, Sticky, FxBuild>,
    topo: HashMap<GpuId, Topology, FxBuild>,
    /// Event time of the first sample: models learn for [`WARM_UP_MS`].
    first_ts_ms: Option<i64>,
    /// Newest sample time per host: a GPU that goes quiet while its host
    /// reports is lost; a whole quiet host is maintenance or a host outage.
    host_seen: HashMap<std::sync::Arc<str>, i64, FxBuild>,
    /// Per host, GPUs that went quiet with their whole host (watched, not
    /// paged) and their last sample: lost if the host reports again
    /// without them (a host back from a reboot, or one whose next scrape
    /// was not yet in when the silence was judged).
    #[serde(default)]
    quiet_with_host: HashMap<std::sync::Arc<str>, Vec<QuietGpu>, FxBuild>,
    /// Per GPU: samples since its last anomaly score, and that score's read.
    grades: HashMap<GpuId, GradeSlot, FxBuild>,
    /// Failure model and trend forecasts (issue 5).
    #[serde(default)]
    predict: Predictor,
    /// Change tests on the degradation signals (issue #29).
    #[serde(default)]
    change: ChangeDetector,
    /// Hot readings under load, held through idle spells.
    #[serde(default)]
    thermal: ThermalHold,
    /// Readings that stopped changing (a frozen exporter, a stuck sensor).
    #[serde(default)]
    frozen: FrozenWatch,
    /// Each GPU's usual PCIe link width.
    #[serde(default)]
    link: LinkWatch,
    #[serde(skip)]
    events: Vec<FeatureEvent>,
    #[serde(skip)]
    rows: Vec<FeatureRow>,
    /// Parquet writers (not state: reopened after a restore).
    #[serde(skip)]
    export: Option<crate::export::ShardExports>,
}

impl Shard {
    pub fn new(id: usize, features: FeatureConfig, seed: u64) -> anyhow::Result<Self> {
        Ok(Shard {
            id,
            features: FeatureEngine::new(features)?,
            anomaly: AnomalyModel::new(seed.wrapping_add(id as u64))?,
            hard: HashMap::default(),
            topo: HashMap::default(),
            first_ts_ms: None,
            host_seen: HashMap::default(),
            quiet_with_host: HashMap::default(),
            grades: HashMap::default(),
            predict: Predictor::new(None),
            change: ChangeDetector::default(),
            thermal: ThermalHold::default(),
            frozen: FrozenWatch::default(),
            link: LinkWatch::default(),
            events: Vec::new(),
            rows: Vec::new(),
            export: None,
        })
    }

    /// Serializes the whole shard (CBOR: keeps NaN and exact floats).
    pub fn snapshot(&self) -> anyhow::Result<Vec<u8>> {
        crate::checkpoint::to_cbor(self, &format!("shard {}", self.id))
    }

    /// A shard from [`Shard::snapshot`] bytes.
    pub fn restore(bytes: &[u8]) -> anyhow::Result<Self> {
        crate::checkpoint::from_cbor(bytes, "a shard snapshot")
    }

    /// See [`features::FeatureEngine::set_silence_horizon`].
    pub fn set_silence_horizon(&mut self, horizon_ms: Option<i64>) {
        self.features.set_silence_horizon(horizon_ms);
    }

    /// Scores rows with `model` from now on (None: trends and rules only).
    pub fn set_failure_model(&mut self, model: Option<Arc<FailureModel>>) {
        if let Some(x) = &mut self.export {
            x.set_model_version(crate::reload::version_of(model.as_deref()));
        }
        self.predict.set_model(model);
    }

    /// Forgets `gpu` in every map at once: feature state, topology, hard
    /// failures, anomaly grade, trends and failure scores (the one
    /// eviction path; the alert stage and risk table follow from
    /// [`BatchOutput::evicted`]).
    pub fn evict(&mut self, gpu: &str) {
        self.features.evict(gpu);
        if let Some(h) = self.topo.get(gpu).and_then(|t| t.host.clone())
            && let Some(quiet) = self.quiet_with_host.get_mut(&h)
        {
            quiet.retain(|q| *q.gpu != *gpu);
            if quiet.is_empty() {
                self.quiet_with_host.remove(&h);
            }
        }
        self.topo.remove(gpu);
        self.hard.remove(gpu);
        self.grades.remove(gpu);
        self.anomaly.forget(gpu);
        self.predict.evict(gpu);
        self.change.evict(gpu);
        self.thermal.evict(gpu);
        self.frozen.evict(gpu);
        self.link.evict(gpu);
    }

    /// Every GPU with state and the event time of its newest sample.
    pub fn gpu_clocks(&self) -> impl Iterator<Item = (&GpuId, i64)> {
        self.features.gpu_clocks()
    }

    /// The feature engine's configuration.
    pub fn feature_config(&self) -> &FeatureConfig {
        self.features.config()
    }

    /// GPUs this shard has seen.
    pub fn gpu_count(&self) -> usize {
        self.features.gpu_count()
    }

    pub fn heap_bytes(&self) -> usize {
        self.features.approx_heap_bytes()
            + self.anomaly.heap_bytes()
            + self.predict.heap_bytes()
            + self.change.heap_bytes()
            + self.thermal.heap_bytes()
            + self.frozen.heap_bytes()
            + self.link.heap_bytes()
            + self.hard.len() * 96
            + self.topo.len() * 64
            + self
                .quiet_with_host
                .values()
                .map(|q| 64 + q.len() * std::mem::size_of::<QuietGpu>())
                .sum::<usize>()
    }

    /// Processes a batch (in event-time order per GPU), appending to `out`
    /// (which partition units of one thread share).
    pub fn process(&mut self, batch: &[Sample], out: &mut BatchOutput) {
        let first = out.assessments.len();
        for s in batch {
            self.rows.clear();
            self.events.clear();
            if let Err(e) = self.features.process(s, &mut self.rows, &mut self.events) {
                out.rejected.push(RejectedSample {
                    reason: e.reason(),
                    error: e.to_string(),
                    gpu: s.gpu.clone(),
                    ts_ms: s.ts_ms,
                    host: s.topo.host.clone(),
                });
                continue;
            }
            if !self.topo.contains_key(&s.gpu) {
                self.topo.insert(s.gpu.clone(), s.topo.clone());
            }
            if let Some(h) = &s.topo.host {
                match self.host_seen.get_mut(h) {
                    Some(t) => *t = (*t).max(s.ts_ms),
                    None => {
                        self.host_seen.insert(h.clone(), s.ts_ms);
                    }
                }
                if !self.quiet_with_host.is_empty() {
                    self.host_back(h, s.ts_ms, out);
                }
            }
            // Move the reusable buffers out and back so their capacity
            // survives (assess and on_event need `&mut self`).
            let mut hard_xid = None;
            let mut events = std::mem::take(&mut self.events);
            for ev in events.drain(..) {
                self.on_event(ev, &mut hard_xid, out);
            }
            self.events = events;
            let rows = std::mem::take(&mut self.rows);
            for row in &rows {
                let a = self.assess(row, hard_xid);
                out.assessments.push(a);
            }
            if let Some(x) = &mut self.export {
                x.rows(&rows);
            }
            self.rows = rows;
        }
        // Hosts outlive their GPUs here: keep only those of tracked GPUs
        // once they outnumber them (amortized by the doubling).
        if self.host_seen.len() > 2 * self.topo.len() + 1024 {
            let live: std::collections::HashSet<&str> = self
                .topo
                .values()
                .filter_map(|t| t.host.as_deref())
                .collect();
            self.host_seen.retain(|h, _| live.contains(&**h));
            self.quiet_with_host.retain(|h, _| live.contains(&**h));
        }
        if let Some(x) = &mut self.export {
            for a in &out.assessments[first..] {
                x.assessment(a);
            }
        }
    }

    /// Writes this shard's feature rows and scores to Parquet from now on.
    pub fn set_export(&mut self, export: Option<crate::export::ShardExports>) {
        self.export = export;
    }

    /// Takes this shard's Parquet writers (a partition unit borrows its
    /// thread's while it processes a batch).
    pub fn take_export(&mut self) -> Option<crate::export::ShardExports> {
        self.export.take()
    }

    fn on_event(&mut self, ev: FeatureEvent, hard_xid: &mut Option<u32>, out: &mut BatchOutput) {
        match ev {
            FeatureEvent::Xid {
                gpu,
                ts_ms,
                xid,
                class,
            } if class == XidClass::Hardware && HARD_XIDS.contains(&xid) => {
                *hard_xid = Some(xid);
                let evidence = Evidence {
                    signal: "DCGM_FI_DEV_XID_ERRORS".into(),
                    detail: format!("XID {xid}: {}", rules::xid_text(xid)),
                };
                self.hard.entry(gpu).or_insert(Sticky {
                    since_ms: ts_ms,
                    evidence,
                });
            }
            FeatureEvent::CounterReset { gpu, .. } => {
                // A driver reload or GPU reset: a past hard failure no longer
                // stands unless it shows again.
                self.hard.remove(&gpu);
            }
            FeatureEvent::Silent {
                gpu,
                last_ts_ms,
                watermark_ms,
            } => self.on_silent(gpu, last_ts_ms, watermark_ms, out),
            FeatureEvent::RackAir(r) => out.racks.push(r),
            _ => {}
        }
    }

    fn assess(&mut self, row: &FeatureRow, hard_xid: Option<u32>) -> Assessment {
        let mut components = [0.0f32; KINDS];
        let mut reasons = Vec::new();
        // The earliest row, not the first: a broken clock first in the
        // stream must not postpone the warm-up for ever.
        let first = *self
            .first_ts_ms
            .insert(self.first_ts_ms.map_or(row.ts_ms, |f| f.min(row.ts_ms)));
        let warm = row.ts_ms - first >= WARM_UP_MS;
        rules::evaluate(row, hard_xid, warm, &mut components, &mut reasons);
        self.link.apply(row, warm, &mut components, &mut reasons);
        let crossed = self.change.assess(row, warm, &mut components, &mut reasons);
        self.thermal.apply(row, &mut components, &mut reasons);
        self.frozen.apply(row, &mut components, &mut reasons);
        if components[Kind::HardFailure as usize] >= 1.0
            && hard_xid.is_none()
            && !self.hard.contains_key(&row.gpu)
            && let Some((_, e)) = reasons.iter().find(|(k, _)| *k == Kind::HardFailure)
        {
            self.hard.insert(
                row.gpu.clone(),
                Sticky {
                    since_ms: row.ts_ms,
                    evidence: e.clone(),
                },
            );
        }
        if let Some(st) = self.hard.get(&row.gpu)
            && components[Kind::HardFailure as usize] < 1.0
        {
            components[Kind::HardFailure as usize] = 1.0;
            reasons.push((Kind::HardFailure, st.evidence.clone()));
        }
        let slot = self
            .grades
            .entry(row.gpu.clone())
            .or_insert_with(|| GradeSlot {
                since: SCORE_EVERY - 1,
                ..GradeSlot::default()
            });
        slot.since += 1;
        if slot.since >= SCORE_EVERY {
            slot.since = 0;
            slot.read = self.anomaly.assess(row).unwrap_or_else(|e| {
                tracing::warn!(gpu = %row.gpu, error = %e, "anomaly model rejected a row");
                AnomalyRead::default()
            });
        }
        let grade = slot.read.grade;
        // A clock dip the GPU explains itself (power cap, thermal
        // slowdown), or a repeat of an anomaly it already raised, keeps
        // its grade but raises no anomaly alert.
        if grade > 0.0 && !slot.read.explained && !slot.read.repeat {
            // (A frozen reading may have set it already: the larger holds.)
            let c = &mut components[Kind::Anomaly as usize];
            *c = c.max(grade * 0.6);
            if let Some(w) = slot.read.why.clone() {
                reasons.push((Kind::Anomaly, w));
            }
        }
        let eta = self
            .predict
            .assess(row, warm, &mut components, &mut reasons);
        assess::fuse(row, components, reasons, grade, eta, &crossed)
    }
}
