//! The `RandomPrecursors` scenario's plan: failures whose precursors are
//! not the simulator's usual shapes, and a fleet whose background error
//! rates spread over two orders of magnitude, so that a detector tuned on
//! the other scenarios is judged on shapes and levels it was not tuned on.
//!
//! Per failing GPU, drawn from the scenario's own stream
//! ([`Stream::Precursors`], so no other scenario's draws move):
//! - the mode: every GPU mode in turn (HBM / ECC, thermal, NVLink, PCIe,
//!   straggler, sudden death), on a random GPU;
//! - the onset: 2–48 h before the failure (log-uniform);
//! - the growth of the precursor from onset to failure ([`Shape`]):
//!   exponential (steepness 3–7), linear, a step at onset, or bursty (a
//!   linear envelope switched on and off in 10–60 min blocks);
//! - the amplitude at failure, log-uniform over a range per mode whose low
//!   end is barely above a high background (e.g. 1–400 correctable ECC
//!   errors per hour; the thermal resistance +5–120 %);
//! - PCIe: whether the link drops to x8 near the end (half of them).
//!
//! Every GPU, healthy or not, gets background rates of correctable ECC,
//! PCIe replays and NVLink errors (CRC flit, and in [`NVLINK_BACKGROUND_MIX`]
//! shares CRC data, replay, recovery) drawn log-uniform over 100×
//! ([`draw_backgrounds`]): a level alone does not tell a failing GPU.
//! The scenario also spreads SKUs (one rack per cluster, so a small fleet
//! mixes H100, H200 and A100) over the scheduler's idle, training and
//! inference mix.

use super::failures::{FailureKind, FailureLabel, FailurePlan, FailurePlans, loaded_time};
use super::jobs::JobKind;
use super::physics::{GpuState, growth};
use super::rng::{SimRng, Stream, splitmix64};
use super::scheduler::{Grid, Schedule};
use super::topology::Fleet;

const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

/// GPUs per failure of each kind: a 96-GPU fleet has 3 of each.
const GPUS_PER_FAILURE_OF_A_KIND: usize = 32;

/// How a precursor grows from onset (0) to failure (1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    Exponential,
    Linear,
    Step,
    Bursty,
}

impl Shape {
    pub const ALL: [Shape; 4] = [
        Shape::Exponential,
        Shape::Linear,
        Shape::Step,
        Shape::Bursty,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Shape::Exponential => "exponential",
            Shape::Linear => "linear",
            Shape::Step => "step",
            Shape::Bursty => "bursty",
        }
    }
}

/// A drawn precursor: its shape and its size at failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Precursor {
    pub shape: Shape,
    /// At failure: errors per hour (HBM: correctable ECC; NVLink: CRC flit
    /// errors at full traffic; PCIe: replays at full load), or the thermal
    /// resistance's relative increase (thermal).
    pub amplitude: f64,
    /// Exponential: growth `(e^(k p) − 1) / (e^k − 1)` with this `k`.
    pub steepness: f64,
    /// Bursty: share of blocks that are on, block length, and the seed
    /// that decides which blocks are on.
    pub duty: f64,
    pub burst_ms: i64,
    pub burst_seed: u64,
    /// PCIe: progress after which the link runs at x8 (> 1: never).
    pub link_drop_at: f64,
}

impl Precursor {
    /// Level 0..(1 / duty) at degradation progress `p` and time `ts`, for a
    /// precursor that began at `onset_ms`. Bursty blocks average to the
    /// linear envelope.
    pub fn level(&self, p: f64, ts: i64, onset_ms: i64) -> f64 {
        if p <= 0.0 {
            return 0.0;
        }
        match self.shape {
            Shape::Exponential => {
                let k = self.steepness;
                ((k * p).exp() - 1.0) / (k.exp() - 1.0)
            }
            Shape::Linear => p,
            Shape::Step => 1.0,
            Shape::Bursty => {
                let block = (ts - onset_ms).max(0) / self.burst_ms.max(MIN_MS);
                let mut s = self.burst_seed ^ (block as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let u = (splitmix64(&mut s) >> 11) as f64 / (1u64 << 53) as f64;
                if u < self.duty { p / self.duty } else { 0.0 }
            }
        }
    }
}

/// The level of a plan's precursor at `ts`: the simulator's usual
/// exponential growth, or the drawn shape.
#[inline]
pub(crate) fn plan_level(f: &FailurePlan, ts: i64) -> f64 {
    match &f.precursor {
        None => growth(f.progress(ts)),
        Some(p) => p.level(f.progress(ts), ts, f.onset_ms),
    }
}

/// Background rates per hour, log-uniform over 100× each: correctable ECC
/// 0.005–0.5, PCIe replays 0.01–1, NVLink CRC 0.02–2 (at full traffic).
pub const BACKGROUND_RANGES: [(f64, f64); 3] = [(0.005, 0.5), (0.01, 1.0), (0.02, 2.0)];

/// Shares of background NVLink errors that are CRC data, replay and
/// recovery errors (the rest are CRC flit errors).
pub const NVLINK_BACKGROUND_MIX: [f64; 3] = [0.1, 0.05, 0.01];

/// Draws every slot's background error rates from the scenario's stream.
pub(crate) fn draw_backgrounds(seed: u64, slots: &mut [GpuState]) {
    let mut rng = SimRng::stream(seed, Stream::Precursors).fork(0xB6);
    let [sbe, pcie, nvl] = BACKGROUND_RANGES;
    for st in slots {
        st.bg_sbe = rng.log_range(sbe.0, sbe.1);
        st.bg_pcie = rng.log_range(pcie.0, pcie.1);
        st.bg_nvlink = rng.log_range(nvl.0, nvl.1);
        st.bg_nvlink_mix = Some(NVLINK_BACKGROUND_MIX);
    }
}

impl GpuState {
    /// `n` background NVLink errors (one burst); `x` in [0, 1] picks their
    /// counter (the draw that decided there was one, rescaled: no extra
    /// draw).
    pub(crate) fn nvlink_background(&mut self, x: f64, n: u64) {
        let c = &mut self.c;
        match self.bg_nvlink_mix {
            Some([data, ..]) if x < data => c.nvlink_data += n,
            Some([data, replay, _]) if x < data + replay => c.nvlink_replay += n,
            Some([data, replay, recovery]) if x < data + replay + recovery => {
                c.nvlink_recovery += n
            }
            _ => c.nvlink_flit += n,
        }
    }
}

/// A counter precursor's size at failure as a multiple of its GPU's own
/// background (`SimConfig::relative_precursors`).
pub const RELATIVE_RANGE: (f64, f64) = (5.0, 500.0);

/// Rescales every counter precursor to grow from its GPU's background:
/// the drawn amplitude's place in its mode's range (log scale) becomes the
/// same place in [`RELATIVE_RANGE`], times the background of the counter
/// it drives. No draw is added, so everything else stays as drawn.
pub(crate) fn make_relative(slots: &mut [GpuState]) {
    let (rlo, rhi) = RELATIVE_RANGE;
    for st in slots {
        let (sbe, pcie, nvl) = (st.bg_sbe, st.bg_pcie, st.bg_nvlink);
        let Some(f) = st.failure.as_mut() else {
            continue;
        };
        let bg = match f.kind {
            FailureKind::HbmEcc => sbe,
            FailureKind::Pcie => pcie,
            FailureKind::Nvlink => nvl,
            _ => continue,
        };
        let (lo, hi) = amplitude_range(f.kind);
        if let Some(p) = f.precursor.as_mut() {
            let u = (p.amplitude / lo).ln() / (hi / lo).ln();
            p.amplitude = bg * rlo * (rhi / rlo).powf(u.clamp(0.0, 1.0));
        }
    }
}

/// Amplitude range at failure per precursor mode.
fn amplitude_range(kind: FailureKind) -> (f64, f64) {
    match kind {
        FailureKind::HbmEcc => (1.0, 400.0),
        FailureKind::Nvlink => (5.0, 20_000.0),
        FailureKind::Pcie => (2.0, 5_000.0),
        FailureKind::Thermal => (0.05, 1.2),
        _ => (0.0, 0.0),
    }
}

fn draw_precursor(kind: FailureKind, rng: &mut SimRng) -> Precursor {
    let shape = Shape::ALL[rng.below(Shape::ALL.len() as u64) as usize];
    let (lo, hi) = amplitude_range(kind);
    Precursor {
        shape,
        amplitude: rng.log_range(lo, hi),
        steepness: rng.range(3.0, 7.0),
        duty: rng.range(0.15, 0.5),
        burst_ms: (rng.range(10.0, 60.0) * MIN_MS as f64) as i64,
        burst_seed: rng.next_u64(),
        link_drop_at: if rng.chance(0.5) {
            rng.range(0.85, 0.98)
        } else {
            2.0
        },
    }
}

/// Plans the scenario's failures into `out`: `gpus / 32` (at least one)
/// of every GPU mode, each on its own GPU.
pub(crate) fn plan(seed: u64, grid: Grid, fleet: &Fleet, sched: &Schedule, out: &mut FailurePlans) {
    let mut rng = SimRng::stream(seed, Stream::Precursors);
    let n = fleet.gpus.len();
    let per_kind = (n / GPUS_PER_FAILURE_OF_A_KIND).max(1);
    let mut slots: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut slots);
    let mut next = 0;
    for _ in 0..per_kind {
        for kind in FailureKind::GPU_KINDS {
            // A slot may not fit (a straggler needs a training job, a
            // thermal failure load): try the next, a few times.
            for _ in 0..8 {
                let Some(&slot) = slots.get(next) else { return };
                next += 1;
                if let Some(p) = plan_one(grid, fleet, sched, slot, kind, &mut rng) {
                    out.labels
                        .push(FailureLabel::planned(&fleet.gpus[slot], kind, &p));
                    out.per_slot[slot] = Some(p);
                    break;
                }
            }
        }
    }
}

fn plan_one(
    grid: Grid,
    fleet: &Fleet,
    sched: &Schedule,
    slot: usize,
    kind: FailureKind,
    rng: &mut SimRng,
) -> Option<FailurePlan> {
    let host = fleet.gpus[slot].host_index;
    let run_ms = grid.end_ms - grid.start_ms;
    let last_tick = grid.end_ms - grid.interval_ms;
    let frac =
        |rng: &mut SimRng, a: f64, b: f64| grid.start_ms + (run_ms as f64 * rng.range(a, b)) as i64;
    let mut plan = FailurePlan {
        kind,
        onset_ms: 0,
        failure_ms: i64::MAX,
        end_ms: i64::MAX,
        silent_from_ms: i64::MAX,
        follow_xid: if rng.chance(0.6) { 94 } else { 95 },
        clock_factor: rng.range(0.80, 0.93),
        power_factor: rng.range(0.78, 0.90),
        precursor_seed: None,
        precursor: None,
    };
    match kind {
        FailureKind::Straggler => {
            let want = grid.snap(frac(rng, 0.1, 0.9));
            let len = (rng.range(2.0, 10.0) * HOUR_MS as f64) as i64;
            let onset = loaded_time(
                sched,
                host,
                Some(JobKind::Training),
                10 * MIN_MS,
                grid.start_ms,
                last_tick - HOUR_MS,
                want,
            )?;
            let seg = &sched.hosts[host].segments[sched.hosts[host].segment_at(onset, 0)];
            plan.onset_ms = grid.snap(onset);
            plan.end_ms = grid.snap((onset + len).min(seg.end_ms).min(grid.end_ms));
            (plan.end_ms - plan.onset_ms >= HOUR_MS / 2).then_some(plan)
        }
        FailureKind::SuddenDeath => {
            plan.failure_ms = grid.snap(frac(rng, 0.1, 0.98));
            plan.onset_ms = plan.failure_ms;
            plan.silent_from_ms = plan.failure_ms;
            (plan.failure_ms < last_tick).then_some(plan)
        }
        _ => {
            let lead_ms = (rng.log_range(2.0, 48.0) * HOUR_MS as f64) as i64;
            // The whole precursor in the run when it fits in 70 % of it.
            let lo = grid.start_ms + (lead_ms + HOUR_MS).min(run_ms * 7 / 10);
            let hi = grid.end_ms - 30 * MIN_MS;
            let want = lo + rng.below((hi - lo).max(1) as u64) as i64;
            let f = if kind == FailureKind::Thermal {
                // Under load for at least two hours before the trip.
                loaded_time(sched, host, None, 2 * HOUR_MS, lo, hi, want)?
            } else {
                want
            };
            plan.failure_ms = grid.snap(f);
            if plan.failure_ms >= last_tick {
                return None;
            }
            plan.onset_ms = plan.failure_ms - lead_ms;
            plan.silent_from_ms = plan.failure_ms
                + if kind == FailureKind::HbmEcc {
                    2 * grid.interval_ms
                } else {
                    grid.interval_ms
                };
            plan.precursor = Some(draw_precursor(kind, rng));
            Some(plan)
        }
    }
}
