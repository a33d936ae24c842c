//! Jobs: what a workload asks of its GPUs at each tick. Data-parallel
//! training runs flat out with synchronized checkpoint dips; inference follows
//! a daily load cycle; both start with a short ramp and may crash with an
//! application XID (13, 31, 43, 45) on all their GPUs at once, then restart.
//! Planned by `scheduler`, evaluated per host per tick by `mod.rs`.

use std::sync::Arc;

use super::config::{Scenario, SimConfig};
use super::rng::SimRng;
use super::scheduler::Grid;

const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

/// What a job does to its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// Data-parallel training: flat-out with synchronized checkpoint dips.
    Training,
    /// Serving: load follows the time of day.
    Inference,
}

/// A job crash: an application XID on all its GPUs, then a restart gap.
#[derive(Debug, Clone)]
pub(crate) struct Crash {
    pub ts_ms: i64,
    pub xid: u32,
    pub restart_end_ms: i64,
}

#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub name: Arc<str>,
    pub kind: JobKind,
    pub start_ms: i64,
    pub end_ms: i64,
    /// Fraction of the SKU's dynamic power range drawn at full load; above 1
    /// the job is power-capped.
    pub intensity: f64,
    pub fb_frac: f64,
    pub mem_util: f64,
    pub ckpt_period_ms: i64,
    pub ckpt_len_ms: i64,
    pub ckpt_offset_ms: i64,
    pub infer_base: f64,
    pub infer_amp: f64,
    pub infer_peak_h: f64,
    pub crashes: Vec<Crash>,
}

/// What a host's GPUs are asked to do at one tick (before per-GPU noise).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Demand {
    /// 0..1.
    pub util: f64,
    /// Fraction of (TDP − idle) the work draws.
    pub power_frac: f64,
    pub fb_frac: f64,
    pub mem_util: f64,
    /// Multi-GPU traffic 0..1: NVLink and PCIe errors scale with it.
    pub traffic: f64,
    /// An application XID at exactly this tick, 0 if none.
    pub app_xid: u32,
}

impl Job {
    /// The demand of this job at `ts_ms` (which lies inside the job).
    pub fn demand(&self, ts_ms: i64, hour_of_day: f64) -> Demand {
        let mut d = Demand {
            fb_frac: self.fb_frac,
            mem_util: self.mem_util,
            ..Demand::default()
        };
        for c in &self.crashes {
            if ts_ms == c.ts_ms {
                d.app_xid = c.xid;
            }
            if ts_ms >= c.ts_ms && ts_ms < c.restart_end_ms {
                // The process died: memory freed, engines idle until restart.
                return Demand {
                    util: 0.0,
                    power_frac: 0.02,
                    fb_frac: 0.0,
                    mem_util: 0.0,
                    ..d
                };
            }
        }
        let since = ts_ms - self.start_ms;
        if since < 5 * MIN_MS {
            // Start-up: loading data and weights, partial load.
            return Demand {
                util: 0.35,
                power_frac: 0.22,
                fb_frac: self.fb_frac * 0.6,
                traffic: 0.2,
                ..d
            };
        }
        match self.kind {
            JobKind::Training => {
                let into = since - self.ckpt_offset_ms;
                if into >= 0 && into % self.ckpt_period_ms < self.ckpt_len_ms {
                    return Demand {
                        util: 0.08,
                        power_frac: 0.12,
                        mem_util: 0.05,
                        traffic: 0.05,
                        ..d
                    };
                }
                Demand {
                    util: 0.98,
                    power_frac: self.intensity,
                    traffic: 1.0,
                    ..d
                }
            }
            JobKind::Inference => {
                let phase = (hour_of_day - self.infer_peak_h + 12.0) * std::f64::consts::TAU / 24.0;
                let u = self.infer_base + self.infer_amp * 0.5 * (1.0 - phase.cos());
                Demand {
                    util: u,
                    power_frac: self.intensity * (0.1 + 0.8 * u),
                    mem_util: self.mem_util * u,
                    traffic: 0.2 * u,
                    ..d
                }
            }
        }
    }
}

const APP_XIDS: [u32; 4] = [13, 31, 43, 45];
const APP_XID_WEIGHTS: [f64; 4] = [0.35, 0.35, 0.2, 0.1];

#[allow(clippy::too_many_arguments)]
pub(crate) fn make_job(
    cfg: &SimConfig,
    grid: Grid,
    group: &[usize],
    training: bool,
    start: i64,
    end: i64,
    rng: &mut SimRng,
    counters: &mut [u32; 4],
) -> Job {
    let (prefix, slot) = match (training, group.len() > 1, rng.chance(0.5)) {
        (true, true, _) => ("train-llm", 0),
        (true, false, _) => ("train-vision", 1),
        (false, _, true) => ("infer-chat", 2),
        (false, _, false) => ("infer-embed", 3),
    };
    counters[slot] += 1;
    let name: Arc<str> = if cfg.opaque_job_names {
        format!("job-{}{:05}", slot, counters[slot]).into()
    } else {
        format!("{prefix}-{}", counters[slot]).into()
    };
    let kind = if training {
        JobKind::Training
    } else {
        JobKind::Inference
    };
    let mut job = Job {
        name,
        kind,
        start_ms: start,
        end_ms: end,
        intensity: if training {
            rng.range(0.75, 1.04)
        } else {
            rng.range(0.8, 1.0)
        },
        fb_frac: if training {
            rng.range(0.70, 0.97)
        } else {
            rng.range(0.35, 0.85)
        },
        mem_util: if training {
            rng.range(0.25, 0.55)
        } else {
            rng.range(0.15, 0.4)
        },
        ckpt_period_ms: (rng.range(20.0, 60.0) * MIN_MS as f64) as i64,
        ckpt_len_ms: (rng.range(1.0, 3.0) * MIN_MS as f64) as i64,
        ckpt_offset_ms: (rng.range(10.0, 30.0) * MIN_MS as f64) as i64,
        infer_base: rng.range(0.1, 0.3),
        infer_amp: rng.range(0.4, 0.65),
        infer_peak_h: rng.range(14.0, 20.0),
        crashes: Vec::new(),
    };
    // Application crashes: one per ~30 training hours, ~80 inference hours
    // inside the run; every job gets one in the app-XID storm scenario.
    let lo = grid.start_ms.max(start + 15 * MIN_MS);
    let hi = grid.end_ms.min(end - 30 * MIN_MS);
    if hi > lo {
        let rate_h = if training { 1.0 / 30.0 } else { 1.0 / 80.0 };
        let mut n = rng.poisson(rate_h * (hi - lo) as f64 / HOUR_MS as f64);
        if cfg.scenario == Scenario::AppXidStorm {
            n = n.max(1);
        }
        let mut times: Vec<i64> = (0..n)
            .map(|_| grid.snap(lo + rng.below((hi - lo) as u64) as i64))
            .collect();
        times.sort_unstable();
        let mut free_from = i64::MIN;
        for ts in times {
            let xid = APP_XIDS[rng.weighted(&APP_XID_WEIGHTS)];
            let restart = (rng.range(5.0, 20.0) * MIN_MS as f64) as i64;
            if ts >= free_from && grid.contains(ts) {
                job.crashes.push(Crash {
                    ts_ms: ts,
                    xid,
                    restart_end_ms: ts + restart,
                });
                free_from = ts + restart + 10 * MIN_MS;
            }
        }
    }
    job
}
