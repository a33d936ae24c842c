//! # The hindsight CUSUM reference (issue #29)
//!
//! A yardstick for forewarn's lead times, not part of the service: how
//! early a plain per-GPU change detector *could* warn on a simulated
//! fleet when its thresholds are set with hindsight. It reads the
//! simulator's telemetry directly (no pipeline) and scores its alerts
//! with the scenario suite's own rules ([`crate::score`]), so its lead
//! times compare with `forewarn evaluate --scenario`'s one for one.
//!
//! Per GPU:
//! - a **Poisson CUSUM** per counter ([`COUNTERS`]: correctable ECC, PCIe
//!   replays, the four NVLink error counters) on its increments, for a rise
//!   from the fleet background rate `λ0` to `ρ·λ0` (`ρ` = 32 by default,
//!   the best of 2–256 on the tuning seeds 1–3);
//!   `λ0` is the counter's events per GPU-hour over the GPUs that never
//!   fail (a first pass over the run: hindsight);
//! - a **Gaussian CUSUM** on the GPU's temperature minus its host peers'
//!   median at the same tick, standardised by the GPU's own baseline of
//!   that residual at its load level (power in tenths of its limit; mean
//!   and variance with a 6 h half-life, outliers winsorised at 3 σ; σ at
//!   least 1 °C), slack 1.5 σ (the best of 0.5–2 on the tuning seeds: a
//!   GPU's residual to its peers shifts by a degree now and then, e.g.
//!   when a peer leaves and the median moves).
//!
//! Each statistic's threshold is the largest value any healthy GPU reached
//! over the run (hindsight again): a failing GPU is alerted when one of
//! its statistics rises above it, so by construction no healthy GPU is.
//! Alerts on a labelled GPU outside its failure window (before the
//! precursor; a straggler after its end) count as false warnings.
//!
//! [`watch`] is the pass over the telemetry, [`cusum`] the statistics,
//! [`table`] the per-kind figures (also of forewarn's own outcomes).
//! Binary: `cargo run -p evaluation --bin reference -- --scenario
//! random_precursors --seed N [--reduced]`.

pub mod cusum;
pub mod evidence;
pub mod settings;
pub mod table;
pub mod watch;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use alerts::AlertEvent;
use datasets::simulator::{SimConfig, SimError, Simulator};
use serde::Serialize;
use thiserror::Error;

use crate::score::{self, ScenarioScore, Truth};
use evidence::Evidence;
pub use settings::{COUNTERS, STATS, Settings, TEMP, stat_name};
use watch::{Rates, Watch};

/// Why the reference could not run.
#[derive(Debug, Error)]
pub enum ReferenceError {
    #[error("simulator: {0}")]
    Sim(#[from] SimError),
    #[error("reading {path}: {message}")]
    Read { path: String, message: String },
}

/// Per statistic: the fleet background and the hindsight threshold.
#[derive(Debug, Clone, Serialize)]
pub struct StatRow {
    pub stat: &'static str,
    /// Events per GPU-hour over the healthy GPUs (counters only).
    pub background_per_h: Option<f64>,
    pub threshold: f64,
    /// The healthy GPU that reached it.
    pub set_by: String,
}

/// One run of the reference.
#[derive(Debug, Clone)]
pub struct Reference {
    pub stats: Vec<StatRow>,
    pub events: Vec<AlertEvent>,
    pub truth: Truth,
    pub score: ScenarioScore,
    pub samples: u64,
    pub healthy_gpus: usize,
    /// Per labelled GPU with a counter precursor: its evidence an hour
    /// before the failure ([`evidence`]).
    pub evidence: BTreeMap<String, Evidence>,
}

/// Runs the reference over the simulated run `cfg` (two passes: the
/// background rates, then the statistics).
pub fn run(cfg: &SimConfig, settings: &Settings) -> Result<Reference, ReferenceError> {
    let mut sim = Simulator::new(cfg.clone())?;
    let labelled: HashSet<Arc<str>> = sim.labels().iter().filter_map(|l| l.gpu.clone()).collect();
    let mut rates = Rates::new(labelled.clone());
    let mut buf = Vec::new();
    while sim.next_tick(&mut buf).is_some() {
        rates.tick(&buf);
        buf.clear();
    }
    let lambda0 = rates.per_h(settings.lambda_floor_per_h);

    let mut sim = Simulator::new(cfg.clone())?;
    let truth = Truth::of(&sim, settings.warm_up_ms);
    let mut watch = Watch::new(*settings, lambda0, labelled);
    let mut samples = 0u64;
    while sim.next_tick(&mut buf).is_some() {
        samples += buf.len() as u64;
        watch.tick(&buf);
        buf.clear();
    }
    let max = watch.healthy_max();
    let thresholds = std::array::from_fn(|i| max[i].0);
    let events = watch.alerts(&thresholds);
    let score = score::score(&truth, &events);
    let evidence = truth
        .labels
        .iter()
        .filter_map(|l| {
            let gpu = l.gpu.as_deref()?;
            let counters = evidence::counters_of(l.kind);
            let until = l.failure_ms? - 3_600_000;
            let counts = evidence::summed(watch.counts(gpu)?, counters);
            (!counters.is_empty()).then(|| {
                let e = Evidence::of(
                    &counts,
                    cfg.start_ms,
                    l.onset_ms,
                    until,
                    settings.lambda_floor_per_h,
                );
                (gpu.to_string(), e)
            })
        })
        .collect();
    let stats = (0..STATS)
        .map(|i| StatRow {
            stat: stat_name(i),
            background_per_h: lambda0.get(i).copied(),
            threshold: thresholds[i],
            set_by: max[i].1.clone(),
        })
        .collect();
    Ok(Reference {
        stats,
        events,
        truth,
        score,
        samples,
        healthy_gpus: watch.healthy(),
        evidence,
    })
}
