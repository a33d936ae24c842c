//! A shard: owns the GPUs hashed to it and runs parse → features → models
//! as one synchronous call chain per batch (no `.await`, no locks), so it is
//! unit-testable without a runtime and identical live and in backtest.

use std::collections::HashMap;

use features::{
    FeatureConfig, FeatureEngine, FeatureEvent, FeatureRow, GpuId, Sample, Topology, XidClass,
};
use serde::{Deserialize, Serialize};

use crate::assess::anomaly::AnomalyModel;
use crate::assess::rules::{self, HARD_XIDS};
use crate::assess::{self, Assessment, Evidence, HealthState, Kind};

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
#[derive(Debug, Default)]
pub struct ShardOutput {
    pub assessments: Vec<Assessment>,
    /// Rejected samples: (reason label, message).
    pub rejected: Vec<(&'static str, String)>,
    /// Feature rows, when the caller exports them.
    pub rows: Vec<FeatureRow>,
}

/// One shard's state: serializable for checkpoints.
#[derive(Debug, Serialize, Deserialize)]
pub struct Shard {
    pub id: usize,
    features: FeatureEngine,
    anomaly: AnomalyModel,
    hard: HashMap<GpuId, Sticky>,
    topo: HashMap<GpuId, Topology>,
    /// Event time of the first sample: models learn for [`WARM_UP_MS`].
    first_ts_ms: Option<i64>,
    #[serde(skip)]
    events: Vec<FeatureEvent>,
    #[serde(skip)]
    rows: Vec<FeatureRow>,
}

impl Shard {
    pub fn new(id: usize, features: FeatureConfig, seed: u64) -> anyhow::Result<Self> {
        Ok(Shard {
            id,
            features: FeatureEngine::new(features)?,
            anomaly: AnomalyModel::new(seed.wrapping_add(id as u64))?,
            hard: HashMap::new(),
            topo: HashMap::new(),
            first_ts_ms: None,
            events: Vec::new(),
            rows: Vec::new(),
        })
    }

    /// GPUs this shard has seen.
    pub fn gpu_count(&self) -> usize {
        self.features.gpu_count()
    }

    pub fn heap_bytes(&self) -> usize {
        self.features.approx_heap_bytes()
            + self.anomaly.heap_bytes()
            + self.hard.len() * 96
            + self.topo.len() * 64
    }

    /// Processes a batch (in event-time order per GPU).
    pub fn process(&mut self, batch: &[Sample], keep_rows: bool, out: &mut ShardOutput) {
        for s in batch {
            self.rows.clear();
            self.events.clear();
            if let Err(e) = self.features.process(s, &mut self.rows, &mut self.events) {
                out.rejected.push((e.reason(), e.to_string()));
                continue;
            }
            if !self.topo.contains_key(&s.gpu) {
                self.topo.insert(s.gpu.clone(), s.topo.clone());
            }
            let mut hard_xid = None;
            for ev in std::mem::take(&mut self.events) {
                self.on_event(ev, &mut hard_xid, out);
            }
            for row in std::mem::take(&mut self.rows) {
                let a = self.assess(&row, hard_xid);
                out.assessments.push(a);
                if keep_rows {
                    out.rows.push(row);
                }
            }
        }
    }

    fn on_event(&mut self, ev: FeatureEvent, hard_xid: &mut Option<u32>, out: &mut ShardOutput) {
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
            } => {
                let topo = self.topo.get(&gpu).cloned().unwrap_or_default();
                let mut components = [0.0f32; 8];
                components[Kind::GpuLost as usize] = 1.0;
                if self.hard.contains_key(&gpu) {
                    components[Kind::HardFailure as usize] = 1.0;
                }
                let silent_min = (watermark_ms - last_ts_ms) / 60_000;
                out.assessments.push(Assessment {
                    ts_ms: watermark_ms,
                    gpu,
                    topo,
                    risk: 1.0,
                    state: HealthState::Silent,
                    kind: Kind::GpuLost,
                    components,
                    anomaly_grade: 0.0,
                    eta_hours: None,
                    reasons: vec![Evidence {
                        signal: "last_seen".into(),
                        detail: format!(
                            "no telemetry for {silent_min} min while the fleet reports"
                        ),
                    }],
                });
            }
            _ => {}
        }
    }

    fn assess(&mut self, row: &FeatureRow, hard_xid: Option<u32>) -> Assessment {
        let mut components = [0.0f32; 8];
        let mut reasons = Vec::new();
        let first = *self.first_ts_ms.get_or_insert(row.ts_ms);
        let warm = row.ts_ms - first >= WARM_UP_MS;
        rules::evaluate(row, hard_xid, warm, &mut components, &mut reasons);
        if components[Kind::HardFailure as usize] >= 1.0
            && hard_xid.is_none()
            && !self.hard.contains_key(&row.gpu)
        {
            if let Some((_, e)) = reasons.iter().find(|(k, _)| *k == Kind::HardFailure) {
                self.hard.insert(
                    row.gpu.clone(),
                    Sticky {
                        since_ms: row.ts_ms,
                        evidence: e.clone(),
                    },
                );
            }
        }
        if let Some(st) = self.hard.get(&row.gpu) {
            if components[Kind::HardFailure as usize] < 1.0 {
                components[Kind::HardFailure as usize] = 1.0;
                reasons.push((Kind::HardFailure, st.evidence.clone()));
            }
        }
        let (grade, why) = match self.anomaly.assess(row) {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(gpu = %row.gpu, error = %e, "anomaly model rejected a row");
                (0.0, None)
            }
        };
        if grade > 0.0 {
            components[Kind::Anomaly as usize] = grade * 0.6;
            if let Some(w) = why {
                reasons.push((Kind::Anomaly, w));
            }
        }
        assess::fuse(row, components, reasons, grade, None)
    }
}
