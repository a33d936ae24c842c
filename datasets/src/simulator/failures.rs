//! Ground truth: which GPUs fail, how, and when. Failure modes, their
//! precursor timing, the power-law failure propensity, rack cooling
//! incidents and GPU replacement are all planned at construction (from the
//! `Propensity` and `Failures` streams), so [`FailureLabel`]s are known before
//! the first tick; `physics` then makes the telemetry show them.
//!
//! Which GPU fails is drawn from its power-law propensity (`propensity`).

use super::config::{Scenario, SimConfig};
use super::jobs::JobKind;
use super::propensity::propensity_weights;
use super::random_precursors::Precursor;
use super::rng::SimRng;
use super::scheduler::{Grid, Schedule, SimEvent, SimEventKind};
use super::topology::{Fleet, GpuInfo, random_uuid};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: f64 = 86_400_000.0;

/// What went wrong. GPU kinds first, then fleet incidents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// HBM degradation: rising single-bit ECC rate → correctable row remaps →
    /// double-bit error, XID 48 then 94 / 95 → GPU lost.
    HbmEcc,
    /// Cooling path degradation: hotter at equal power, throttling → XID 79.
    Thermal,
    /// NVLink degradation: CRC / replay / recovery errors grow → XID 74.
    Nvlink,
    /// PCIe link degradation: replays grow, link drops to x8 → XID 79.
    Pcie,
    /// Slower than its peers in the same job (clocks, power); no errors, no
    /// loss. Has an end time instead of a failure time.
    Straggler,
    /// Stops reporting with no precursor and no XID.
    SuddenDeath,
    /// Every GPU of a rack heats up for 1–2 h: one incident, not a GPU
    /// failure. Has an end time instead of a failure time.
    RackCooling,
}

impl FailureKind {
    /// The GPU failure modes, in label order.
    pub const GPU_KINDS: [FailureKind; 6] = [
        FailureKind::HbmEcc,
        FailureKind::Thermal,
        FailureKind::Nvlink,
        FailureKind::Pcie,
        FailureKind::Straggler,
        FailureKind::SuddenDeath,
    ];

    /// Share of each of [`Self::GPU_KINDS`] in the mixed scenario.
    const MIX: [f64; 6] = [0.30, 0.15, 0.15, 0.10, 0.12, 0.18];

    /// The label-file spelling (`hbm_ecc`, …).
    pub const fn as_str(self) -> &'static str {
        match self {
            FailureKind::HbmEcc => "hbm_ecc",
            FailureKind::Thermal => "thermal",
            FailureKind::Nvlink => "nvlink",
            FailureKind::Pcie => "pcie",
            FailureKind::Straggler => "straggler",
            FailureKind::SuddenDeath => "sudden_death",
            FailureKind::RackCooling => "rack_cooling",
        }
    }

    /// True for incidents that span more than one GPU.
    pub const fn is_incident(self) -> bool {
        matches!(self, FailureKind::RackCooling)
    }

    /// True when the GPU stops reporting after `failure_ms`.
    pub const fn loses_gpu(self) -> bool {
        !matches!(self, FailureKind::Straggler | FailureKind::RackCooling)
    }

    /// The XID reported at `failure_ms`, if any.
    pub const fn xid(self) -> Option<u32> {
        match self {
            FailureKind::HbmEcc => Some(48),
            FailureKind::Thermal | FailureKind::Pcie => Some(79),
            FailureKind::Nvlink => Some(74),
            _ => None,
        }
    }

    /// Precursor length in hours (straggler: how long it lasts).
    pub(crate) fn precursor_hours(self, rng: &mut SimRng) -> f64 {
        match self {
            FailureKind::HbmEcc => rng.log_range(12.0, 48.0),
            FailureKind::Thermal => rng.range(4.0, 16.0),
            FailureKind::Nvlink => rng.range(3.0, 12.0),
            FailureKind::Pcie => rng.range(4.0, 24.0),
            FailureKind::Straggler => rng.range(2.0, 10.0),
            FailureKind::RackCooling => rng.range(1.0, 2.0),
            FailureKind::SuddenDeath => 0.0,
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub use super::failure_label::FailureLabel;

/// How one slot fails (first GPU in the slot only).
#[derive(Debug, Clone)]
pub(crate) struct FailurePlan {
    pub kind: FailureKind,
    pub onset_ms: i64,
    /// Tick of the hard failure; `i64::MAX` for stragglers.
    pub failure_ms: i64,
    /// Straggler end; `i64::MAX` otherwise.
    pub end_ms: i64,
    /// First tick with no telemetry.
    pub silent_from_ms: i64,
    /// HBM: 94 (contained) or 95 (uncontained) one tick after the DBE.
    pub follow_xid: u32,
    /// Straggler slowdown factors.
    pub clock_factor: f64,
    pub power_factor: f64,
    /// Common random numbers: with a seed, the precursor's error counts
    /// come from a stream of this plan's own instead of the fleet's noise,
    /// so every GPU given the plan (a newcomer and its incumbent twin)
    /// shows the very same degradation. `None`: the noise stream.
    pub precursor_seed: Option<u64>,
    /// A drawn precursor (`RandomPrecursors`); `None`: the mode's usual
    /// exponential growth and size.
    pub precursor: Option<Precursor>,
}

impl FailurePlan {
    /// Degradation progress 0..1 between onset and failure.
    #[inline]
    pub fn progress(&self, ts: i64) -> f64 {
        if ts <= self.onset_ms || self.failure_ms == i64::MAX {
            return 0.0;
        }
        ((ts - self.onset_ms) as f64 / (self.failure_ms - self.onset_ms).max(1) as f64).min(1.0)
    }
}

/// A rack-wide inlet temperature excursion.
#[derive(Debug, Clone)]
pub(crate) struct RackIncident {
    pub rack: usize,
    pub onset_ms: i64,
    pub end_ms: i64,
    pub delta_c: f64,
}

/// A new GPU that takes over a slot at `at_ms`.
#[derive(Debug, Clone)]
pub(crate) struct Replacement {
    pub slot: usize,
    pub at_ms: i64,
    pub gpu: GpuInfo,
    /// How the newcomer fails, if it does (the `Replacement` scenario).
    pub failure: Option<FailurePlan>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct FailurePlans {
    pub per_slot: Vec<Option<FailurePlan>>,
    pub incidents: Vec<RackIncident>,
    pub labels: Vec<FailureLabel>,
    pub replacements: Vec<Replacement>,
    pub events: Vec<SimEvent>,
}

/// A tick `t` in `[lo, hi]` where `host` is in a job of `need` (any job when
/// `None`) that has run for at least `busy_ms`; the nearest to `want`.
pub(crate) fn loaded_time(
    sched: &Schedule,
    host: usize,
    need: Option<JobKind>,
    busy_ms: i64,
    lo: i64,
    hi: i64,
    want: i64,
) -> Option<i64> {
    let mut best: Option<i64> = None;
    for seg in &sched.hosts[host].segments {
        let Some(j) = seg.job else { continue };
        let job = &sched.jobs[j as usize];
        if need.is_some_and(|k| k != job.kind) {
            continue;
        }
        let a = (seg.start_ms + busy_ms).max(lo);
        let b = (seg.end_ms - HOUR_MS / 4).min(hi);
        if a > b {
            continue;
        }
        let t = want.clamp(a, b);
        if best.is_none_or(|x| (x - want).abs() > (t - want).abs()) {
            best = Some(t);
        }
    }
    best
}

/// Plans every failure, incident and replacement of a run.
pub(crate) fn plan(
    cfg: &SimConfig,
    fleet: &Fleet,
    sched: &Schedule,
    prop: &mut SimRng,
    rng: &mut SimRng,
) -> FailurePlans {
    let grid = Grid::of(cfg);
    let n = fleet.gpus.len();
    let mut out = FailurePlans {
        per_slot: vec![None; n],
        ..FailurePlans::default()
    };
    let weights = propensity_weights(n, prop);
    let only = cfg.scenario.only_kind();
    let run_ms = (grid.end_ms - grid.start_ms) as f64;
    let last_tick = grid.end_ms - grid.interval_ms;

    // Candidate failures: (slot, time, kind), at most one per slot.
    let gpu_kind = only.filter(|k| !k.is_incident());
    let replacing = cfg.scenario == Scenario::Replacement;
    let randomised = cfg.scenario == Scenario::RandomPrecursors;
    let propensity_driven = !replacing && !randomised;
    if cfg.scenario.has_failures() && only != Some(FailureKind::RackCooling) && propensity_driven {
        for (slot, w) in weights.iter().enumerate() {
            let lambda_per_ms = cfg.failure_rate_per_gpu_day * w / DAY_MS;
            if lambda_per_ms <= 0.0 {
                continue;
            }
            let t = grid.start_ms as f64 + rng.exp(1.0 / lambda_per_ms);
            let kind =
                gpu_kind.unwrap_or_else(|| FailureKind::GPU_KINDS[rng.weighted(&FailureKind::MIX)]);
            if t < last_tick as f64 {
                add_gpu_failure(
                    cfg,
                    grid,
                    fleet,
                    sched,
                    slot,
                    When::At(t as i64),
                    kind,
                    rng,
                    &mut out,
                );
            }
        }
        if let Some(k) = gpu_kind {
            // Plant one, late enough in the run for its precursor to show; a
            // candidate may not fit (a straggler needs a training job).
            for _ in 0..256 {
                if out.labels.iter().any(|l| l.kind == k) {
                    break;
                }
                let slot = rng.weighted(&weights);
                if out.per_slot[slot].is_none() {
                    add_gpu_failure(
                        cfg,
                        grid,
                        fleet,
                        sched,
                        slot,
                        When::Planted,
                        k,
                        rng,
                        &mut out,
                    );
                }
            }
        }
    }

    // Rack cooling incidents: ~1 per 50 rack-days, or exactly one.
    let plant_cooling = only == Some(FailureKind::RackCooling) || cfg.rack_incident;
    if cfg.scenario == Scenario::Mixed || plant_cooling {
        let mut incidents: Vec<(usize, i64)> = Vec::new();
        if plant_cooling {
            let rack = rng.below(fleet.racks.len() as u64) as usize;
            incidents.push((rack, grid.start_ms + (run_ms * rng.range(0.3, 0.6)) as i64));
        } else {
            for rack in 0..fleet.racks.len() {
                let k = rng.poisson(0.02 * run_ms / DAY_MS);
                for _ in 0..k {
                    incidents.push((rack, grid.start_ms + (run_ms * rng.f64()) as i64));
                }
            }
        }
        for (rack, t) in incidents {
            let onset = grid.snap(t);
            let end = grid.snap(
                onset + (FailureKind::RackCooling.precursor_hours(rng) * HOUR_MS as f64) as i64,
            );
            let delta_c = rng.range(8.0, 14.0);
            let r = &fleet.racks[rack];
            out.labels.push(FailureLabel {
                kind: FailureKind::RackCooling,
                gpu: None,
                host: None,
                rack: r.name.clone(),
                cluster: r.cluster.clone(),
                onset_ms: onset,
                failure_ms: None,
                end_ms: Some(end),
                xid: None,
            });
            out.incidents.push(RackIncident {
                rack,
                onset_ms: onset,
                end_ms: end,
                delta_c,
            });
        }
    }
    if replacing {
        super::replacement::plan_pairs(grid, fleet, rng, &mut out);
    }
    if randomised {
        super::random_precursors::plan(cfg.seed, grid, fleet, sched, &mut out);
    }
    out.labels
        .sort_by_key(|l| (l.failure_ms.unwrap_or(l.onset_ms), l.kind));
    out.replacements.sort_by_key(|r| (r.at_ms, r.slot));
    out
}

/// Plans one GPU failure and its label (and replacement) if it fits.
#[allow(clippy::too_many_arguments)]
fn add_gpu_failure(
    cfg: &SimConfig,
    grid: Grid,
    fleet: &Fleet,
    sched: &Schedule,
    slot: usize,
    when: When,
    kind: FailureKind,
    rng: &mut SimRng,
    out: &mut FailurePlans,
) {
    let Some(p) = plan_gpu(cfg, grid, fleet, sched, slot, when, kind, rng) else {
        return;
    };
    let info = &fleet.gpus[slot];
    out.labels.push(FailureLabel::planned(info, kind, &p));
    if cfg.replace_failed && kind.loses_gpu() {
        let at = grid.snap(p.silent_from_ms + (rng.range(4.0, 12.0) * HOUR_MS as f64) as i64);
        if grid.contains(at) {
            let gpu = GpuInfo {
                uuid: random_uuid(rng),
                replaces: Some(info.uuid.clone()),
                active_from_ms: Some(at),
                ..info.clone()
            };
            let kind = SimEventKind::GpuReplaced {
                host: info.host.clone(),
                old: info.uuid.clone(),
                new: gpu.uuid.clone(),
            };
            out.events.push(SimEvent { ts_ms: at, kind });
            out.replacements.push(Replacement {
                slot,
                at_ms: at,
                gpu,
                failure: None,
            });
        }
    }
    out.per_slot[slot] = Some(p);
}

/// When a candidate fails.
#[derive(Debug, Clone, Copy)]
enum When {
    /// Drawn from the GPU's propensity.
    At(i64),
    /// Planted by an `Only(kind)` scenario: placed so the precursor shows.
    Planted,
}

/// Turns a candidate into a plan whose telemetry can show it: thermal
/// failures happen under load, stragglers inside a training job.
#[allow(clippy::too_many_arguments)]
fn plan_gpu(
    cfg: &SimConfig,
    grid: Grid,
    fleet: &Fleet,
    sched: &Schedule,
    slot: usize,
    when: When,
    kind: FailureKind,
    rng: &mut SimRng,
) -> Option<FailurePlan> {
    let host = fleet.gpus[slot].host_index;
    let last_tick = grid.end_ms - grid.interval_ms;
    let len_ms = (kind.precursor_hours(rng) * HOUR_MS as f64) as i64;
    let run_ms = (grid.end_ms - grid.start_ms) as f64;
    let t = match when {
        When::At(t) => t,
        When::Planted if kind == FailureKind::Straggler => {
            grid.start_ms + (run_ms * rng.range(0.2, 0.5)) as i64
        }
        // The whole precursor inside the run when it fits, else late in it.
        When::Planted => (grid.start_ms + (run_ms * rng.range(0.1, 0.25)) as i64 + len_ms)
            .min(grid.start_ms + (run_ms * 0.92) as i64),
    };
    let mut plan = FailurePlan {
        kind,
        onset_ms: 0,
        failure_ms: i64::MAX,
        end_ms: i64::MAX,
        silent_from_ms: i64::MAX,
        follow_xid: if rng.chance(0.6) { 94 } else { 95 },
        clock_factor: rng.range(0.80, 0.90),
        power_factor: rng.range(0.78, 0.88),
        precursor_seed: None,
        precursor: None,
    };
    match kind {
        FailureKind::Straggler => {
            let want = grid.snap(t);
            let lo = grid.start_ms;
            let hi = last_tick - HOUR_MS;
            let onset = loaded_time(
                sched,
                host,
                Some(JobKind::Training),
                10 * 60_000,
                lo,
                hi,
                want,
            )?;
            let seg = &sched.hosts[host].segments[sched.hosts[host].segment_at(onset, 0)];
            plan.onset_ms = grid.snap(onset);
            plan.end_ms = grid.snap((onset + len_ms).min(seg.end_ms).min(grid.end_ms));
            (plan.end_ms - plan.onset_ms >= HOUR_MS / 2).then_some(plan)
        }
        _ => {
            let mut f = t;
            if kind == FailureKind::Thermal {
                // Under load for at least two hours before the trip.
                f = loaded_time(
                    sched,
                    host,
                    None,
                    2 * HOUR_MS,
                    grid.start_ms,
                    last_tick - cfg.interval_ms(),
                    t,
                )?;
            }
            plan.failure_ms = grid.snap(f);
            if plan.failure_ms >= last_tick {
                return None;
            }
            plan.onset_ms = plan.failure_ms - len_ms;
            plan.silent_from_ms = plan.failure_ms
                + match kind {
                    FailureKind::SuddenDeath => 0,
                    FailureKind::HbmEcc => 2 * grid.interval_ms,
                    _ => grid.interval_ms,
                };
            Some(plan)
        }
    }
}
