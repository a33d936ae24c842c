//! The feature stage's engine: decoded [`Sample`]s in event-time order →
//! one [`FeatureRow`] per accepted sample plus [`FeatureEvent`]s. A shard
//! owns one engine for the GPUs hashed to it and calls it synchronously per
//! batch; nothing here does I/O or reads a clock.
//!
//! Per sample: arrival check (duplicate / reorder / late / bad clock), gap,
//! topology, gauges, counters, XIDs, phase, inlet proxy, expected-vs-actual
//! residuals, peer cohorts, then the row (see `row.rs`). Every so much event
//! time the engine sweeps for silent GPUs and drops stale cohorts, hosts and
//! GPUs.
//!
//! The whole engine is serde-serializable for checkpoints; snapshot →
//! restore → continue gives identical rows. Use a binary format (CBOR,
//! bincode): feature state holds NaN, which JSON cannot carry.

mod gpus;
mod row;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::{ConfigError, FeatureConfig};
use crate::expected::ModelBank;
use crate::expected::inlet::HostTemps;
use crate::expected::rack::{RackAir, RackReading};
use crate::field::Field;
use crate::peers::{CohortStats, LEVELS};
use crate::phase::Phase;
use crate::sample::{GpuId, Sample};
use crate::state::GpuState;
use crate::state::gaps::Arrival;
use crate::state::smooth::EventKind;
use crate::vector::FeatureRow;
use crate::xid::{XidBlame, XidClass, XidCorrelator};
use gpus::{GpuEntry, GpuTable};

/// Something worth telling operators or models about, beside the rows.
#[derive(Debug, Clone, PartialEq)]
pub enum FeatureEvent {
    /// A cumulative counter went down (driver reload, GPU reset).
    CounterReset {
        gpu: GpuId,
        ts_ms: i64,
        field: Field,
        from: f64,
        to: f64,
    },
    /// The fleet's clock (the input partitions' horizon) passed this GPU's
    /// silence after its last sample (`silence_ms`, or three and a half of
    /// its own samples at a slower cadence): it stopped reporting.
    Silent {
        gpu: GpuId,
        last_ts_ms: i64,
        watermark_ms: i64,
    },
    /// The GPU reported again after a silence longer than `silence_ms`.
    Gap {
        gpu: GpuId,
        from_ms: i64,
        to_ms: i64,
    },
    /// `DCGM_FI_DEV_XID_ERRORS` changed to a new XID.
    Xid {
        gpu: GpuId,
        ts_ms: i64,
        xid: u32,
        class: XidClass,
    },
    /// An application XID was judged (after its window) to be the job's
    /// fault or the GPU's.
    XidAttributed {
        gpu: GpuId,
        ts_ms: i64,
        xid: u32,
        blame: XidBlame,
    },
    /// The workload phase changed; `prev_ms` is how long the old one lasted.
    PhaseChange {
        gpu: GpuId,
        ts_ms: i64,
        from: Phase,
        to: Phase,
        prev_ms: i64,
    },
    /// A rack's bucket closed: its GPUs' median air shift (see
    /// [`crate::expected::rack`]).
    RackAir(RackReading),
}

/// What happened to an accepted-or-dropped sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// A row was produced.
    Row,
    /// Same event time as a recent sample of the GPU: dropped.
    Duplicate,
    /// A small reorder: counted, no row, no state change.
    Absorbed,
}

/// Why a sample was rejected: counted per [`Rejected::reason`] and sent to
/// the dead-letter sink by the caller; it never stops the stream.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejected {
    #[error("gpu {gpu}: sample is {lag_ms} ms older than the gpu's newest")]
    Late { gpu: GpuId, lag_ms: i64 },
    #[error("gpu {gpu}: sample is {ahead_ms} ms ahead of the fleet watermark")]
    AheadOfWatermark { gpu: GpuId, ahead_ms: i64 },
}

impl Rejected {
    /// A stable, low-cardinality label for metrics and dead letters.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejected::Late { .. } => "late",
            Rejected::AheadOfWatermark { .. } => "ahead_of_watermark",
        }
    }
}

/// Counts of what the engine did with samples (for `/metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineCounters {
    pub rows: u64,
    pub duplicates: u64,
    pub absorbed: u64,
    pub late: u64,
    pub ahead: u64,
}

/// How often (event time) silent GPUs are looked for.
const SWEEP_EVERY_MS: i64 = 15_000;
/// How often stale cohorts, hosts, XID groups and GPUs are dropped.
const GC_EVERY_MS: i64 = 600_000;
/// Cohorts and hosts idle for this many buckets are dropped.
const IDLE_BUCKETS: i64 = 30;
/// XID groups with nothing for this long are dropped.
const XID_GROUP_TTL_MS: i64 = 3_600_000;

/// Per-GPU state, shared models and cohort statistics of one shard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FeatureEngine {
    cfg: FeatureConfig,
    gpus: GpuTable,
    models: ModelBank,
    cohorts: CohortStats,
    hosts: HostTemps,
    /// Rack air shifts (absent in checkpoints written before it existed).
    #[serde(default)]
    racks: RackAir,
    xids: XidCorrelator,
    /// Newest accepted event time over all GPUs (`i64::MIN` before any).
    watermark_ms: i64,
    next_sweep_ms: i64,
    next_gc_ms: i64,
    /// Event time every input partition has reached, when the source knows
    /// it (Kafka): silence is judged against it, not the newest sample, so
    /// a partition that lags does not make its GPUs look silent.
    #[serde(default)]
    silence_horizon_ms: Option<i64>,
    /// The horizon advanced since the last sweep: sweep even if the
    /// newest sample did not move.
    #[serde(default)]
    horizon_moved: bool,
    counters: EngineCounters,
    /// Reused per batch: each row's cohort ids, for deferred z-scores.
    #[serde(skip)]
    deferred: Vec<[u32; LEVELS]>,
    /// A cache of pure functions of the config (not state).
    #[serde(skip)]
    alphas: row::AlphaCache,
}

/// A stable per-GPU salt so that which samples train the models does not
/// depend on process or hash seeds.
fn salt(gpu: &str) -> u32 {
    crate::hash::gpu_salt(gpu)
}

impl FeatureEngine {
    /// An engine with no GPUs yet.
    pub fn new(cfg: FeatureConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(FeatureEngine {
            models: ModelBank::default(),
            cohorts: CohortStats::new(cfg.peer_bucket_ms, cfg.min_cohort),
            hosts: HostTemps::new(cfg.peer_bucket_ms),
            racks: RackAir::new(cfg.peer_bucket_ms),
            xids: XidCorrelator::default(),
            gpus: GpuTable::default(),
            watermark_ms: i64::MIN,
            next_sweep_ms: i64::MIN,
            next_gc_ms: i64::MIN,
            silence_horizon_ms: None,
            horizon_moved: false,
            counters: EngineCounters::default(),
            deferred: Vec::new(),
            alphas: row::AlphaCache::default(),
            cfg,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &FeatureConfig {
        &self.cfg
    }

    /// What the engine did with samples so far.
    pub fn counters(&self) -> EngineCounters {
        self.counters
    }

    /// GPUs with state.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    /// Newest accepted event time (`i64::MIN` before any).
    pub fn watermark_ms(&self) -> i64 {
        self.watermark_ms
    }

    /// The clock silence is judged on: the newest accepted event time, or
    /// the event time all input partitions have reached if earlier.
    pub fn quiet_clock_ms(&self) -> i64 {
        let now = self.watermark_ms;
        self.silence_horizon_ms.map_or(now, |h| h.min(now))
    }

    /// Sets the event time all input partitions have reached (`None`: the
    /// input is one ordered stream, judge silence by the newest sample).
    pub fn set_silence_horizon(&mut self, horizon_ms: Option<i64>) {
        if horizon_ms != self.silence_horizon_ms {
            self.horizon_moved = true;
        }
        self.silence_horizon_ms = horizon_ms;
    }

    /// Processes a batch in order; rejected samples are reported with their
    /// index in `samples`. Preferred over [`Self::process`]: peer z-scores
    /// are computed at the end of the batch against the peers' values in the
    /// same time bucket, so a job's synchronized start or checkpoint dip
    /// moves no z-score. Batches should hold whole ticks of the shard's GPUs.
    pub fn process_batch(
        &mut self,
        samples: &[Sample],
        out: &mut Vec<FeatureRow>,
        events: &mut Vec<FeatureEvent>,
        rejected: &mut Vec<(usize, Rejected)>,
    ) {
        let first = out.len();
        let mut deferred = std::mem::take(&mut self.deferred);
        deferred.clear();
        for (i, s) in samples.iter().enumerate() {
            let mut ids = [u32::MAX; LEVELS];
            match self.process_inner(s, out, events, Some(&mut ids)) {
                Ok(Disposition::Row) => deferred.push(ids),
                Ok(_) => {}
                Err(e) => rejected.push((i, e)),
            }
        }
        for (row, ids) in out[first..].iter_mut().zip(&deferred) {
            // Narrowest first; wider cohorts are refreshed only if needed.
            for (lvl, id) in ids.iter().enumerate().filter(|(_, id)| **id != u32::MAX) {
                self.cohorts.refresh(*id);
                if let Some(r) = self.cohorts.reference_same_bucket(*id, row.ts_ms) {
                    row::fill_peer_z_from(&mut row.values, lvl, r);
                    break;
                }
            }
        }
        self.deferred = deferred;
    }

    /// Processes one sample: at most one row into `out`, any events into
    /// `events`. Samples of one GPU must come in event-time order up to the
    /// reorder tolerance. Peer z-scores compare with the last closed bucket
    /// (or the open one once it covers half as many GPUs).
    pub fn process(
        &mut self,
        sample: &Sample,
        out: &mut Vec<FeatureRow>,
        events: &mut Vec<FeatureEvent>,
    ) -> Result<Disposition, Rejected> {
        self.process_inner(sample, out, events, None)
    }

    fn process_inner(
        &mut self,
        sample: &Sample,
        out: &mut Vec<FeatureRow>,
        events: &mut Vec<FeatureEvent>,
        deferred: Option<&mut [u32; LEVELS]>,
    ) -> Result<Disposition, Rejected> {
        let ts = sample.ts_ms;
        if self.watermark_ms != i64::MIN
            && ts
                > self
                    .watermark_ms
                    .saturating_add(self.cfg.max_future_skew_ms)
        {
            self.counters.ahead += 1;
            return Err(Rejected::AheadOfWatermark {
                gpu: sample.gpu.clone(),
                ahead_ms: ts.saturating_sub(self.watermark_ms),
            });
        }
        let slot = match self.gpus.find(&sample.gpu) {
            Some(i) => i,
            None => self
                .gpus
                .insert(&sample.gpu, GpuState::new(salt(&sample.gpu))),
        };
        let st = &mut self.gpus.entry_mut(slot).state;
        let arrival = st
            .arrival
            .classify(ts, self.cfg.reorder_tolerance_ms, self.cfg.silence_ms);
        let prev_ts = st.arrival.last_ts_ms();
        match arrival {
            Arrival::Duplicate => {
                self.counters.duplicates += 1;
                return Ok(Disposition::Duplicate);
            }
            Arrival::Absorbed => {
                self.counters.absorbed += 1;
                return Ok(Disposition::Absorbed);
            }
            Arrival::Late { lag_ms } => {
                self.counters.late += 1;
                return Err(Rejected::Late {
                    gpu: sample.gpu.clone(),
                    lag_ms,
                });
            }
            Arrival::First | Arrival::InOrder { .. } => {}
        }
        st.arrival.accept(ts);
        st.events.advance(ts, self.cfg.event_decay_ms);
        if let Arrival::InOrder {
            gap_from: Some(from),
        } = arrival
        {
            st.events.bump(EventKind::Gap);
            events.push(FeatureEvent::Gap {
                gpu: sample.gpu.clone(),
                from_ms: from,
                to_ms: ts,
            });
        }
        let mut parts = row::Parts {
            cfg: &self.cfg,
            models: &mut self.models,
            cohorts: &mut self.cohorts,
            hosts: &mut self.hosts,
            racks: &mut self.racks,
            xids: &mut self.xids,
            alphas: &mut self.alphas,
        };
        let row = parts.compute(st, sample, prev_ts, events, deferred);
        out.push(row);
        self.counters.rows += 1;
        if ts > self.watermark_ms {
            self.watermark_ms = ts;
            self.horizon_moved = false;
            self.housekeeping(events);
        } else if self.horizon_moved {
            self.horizon_moved = false;
            self.housekeeping(events);
        }
        Ok(Disposition::Row)
    }

    /// Silence sweep and garbage collection, when due.
    fn housekeeping(&mut self, events: &mut Vec<FeatureEvent>) {
        // Silence runs on the horizon when the source has partitions.
        let quiet_now = self.quiet_clock_ms();
        if quiet_now >= self.next_sweep_ms && quiet_now != i64::MIN {
            self.next_sweep_ms = quiet_now.saturating_add(SWEEP_EVERY_MS);
            let floor = self.cfg.silence_ms;
            let start = events.len();
            for GpuEntry { id: gpu, state: st } in self.gpus.iter_mut() {
                let last = st.arrival.last_ts_ms();
                if !st.arrival.silent_reported
                    && quiet_now.saturating_sub(last) > st.arrival.silence_ms(floor)
                {
                    st.arrival.silent_reported = true;
                    events.push(FeatureEvent::Silent {
                        gpu: gpu.clone(),
                        last_ts_ms: last,
                        watermark_ms: quiet_now,
                    });
                }
            }
            // Map order is not stable across processes; events must be.
            events[start..].sort_by(|a, b| match (a, b) {
                (FeatureEvent::Silent { gpu: x, .. }, FeatureEvent::Silent { gpu: y, .. }) => {
                    x.cmp(y)
                }
                _ => std::cmp::Ordering::Equal,
            });
        }
        // Garbage collection also runs on the horizon (which the pipeline
        // caps at the fleet's robust clock): one sample from a clock far
        // ahead must not make every GPU look expired.
        let now = quiet_now;
        if now >= self.next_gc_ms && now != i64::MIN {
            if self.next_gc_ms != i64::MIN {
                self.cohorts.gc(now, IDLE_BUCKETS);
                self.hosts.gc(now, IDLE_BUCKETS);
                self.racks.gc(now, IDLE_BUCKETS);
                self.xids.gc(now.saturating_sub(XID_GROUP_TTL_MS));
                let ttl = self.cfg.gpu_ttl_ms;
                self.gpus
                    .retain(|st| now.saturating_sub(st.arrival.last_ts_ms()) <= ttl);
            }
            self.next_gc_ms = now.saturating_add(GC_EVERY_MS);
        }
    }

    /// Approximate heap bytes of all feature state (per-GPU table and state,
    /// models, cohorts with their open buckets, hosts, XID groups).
    pub fn approx_heap_bytes(&self) -> usize {
        self.gpus.approx_heap_bytes()
            + self.models.approx_heap_bytes()
            + self.cohorts.approx_heap_bytes()
            + self.hosts.approx_heap_bytes()
            + self.racks.approx_heap_bytes()
            + self.xids.approx_heap_bytes()
    }

    /// Drops every piece of per-GPU state of `gpu` (the shared models and
    /// cohort statistics forget it as their buckets age). False if it had
    /// none.
    pub fn evict(&mut self, gpu: &str) -> bool {
        self.gpus.remove(gpu)
    }

    /// Every GPU with state and the event time of its newest sample.
    pub fn gpu_clocks(&self) -> impl Iterator<Item = (&GpuId, i64)> {
        self.gpus
            .iter()
            .map(|e| (&e.id, e.state.arrival.last_ts_ms()))
    }

    /// Per-GPU state of `gpu`, for tests and debugging endpoints.
    pub fn gpu_state(&self, gpu: &str) -> Option<&GpuState> {
        self.gpus.get(gpu)
    }
}
