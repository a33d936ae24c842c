//! Per-GPU physics, one call per GPU per tick: the workload's demand becomes
//! power, power and inlet temperature become die and HBM temperature through
//! a first-order thermal lag, heat becomes throttling (lower clocks, growing
//! violation counters), and time becomes energy and background error counts.
//! Failure precursors act here, as changes to the same physics (a worse
//! thermal path, a rising error rate), so the telemetry shows them the way a
//! real GPU would.
//!
//! The hot path of the simulator: no allocation, ~3 RNG draws per sample.

use features::{Field, Metrics};

use super::failures::{FailureKind, FailurePlan};
use super::jobs::Demand;
use super::random_precursors::plan_level;
use super::rng::SimRng;
use super::topology::SkuSpec;

/// Die heat-sink time constant, s (air-cooled HGX under a load step).
const TAU_DIE_S: f64 = 90.0;
/// HBM stacks lag the die.
const TAU_MEM_S: f64 = 150.0;
/// `DCGM_CLOCKS_EVENT_REASON_*` bits.
const REASON_GPU_IDLE: u32 = 0x1;
const REASON_SW_POWER_CAP: u32 = 0x4;
const REASON_SW_THERMAL: u32 = 0x20;
const REASON_HW_THERMAL: u32 = 0x40;

/// What every GPU of a tick shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Env {
    pub ts_ms: i64,
    pub interval_ms: i64,
    pub dt_s: f64,
    pub dt_h: f64,
    /// 1 − e^(−dt/τ) for the die and the HBM.
    pub alpha_die: f64,
    pub alpha_mem: f64,
    /// Mean size of background error bursts (`SimConfig::background_burst`).
    pub bg_burst: f64,
}

impl Env {
    pub fn new(interval_s: u32) -> Env {
        let dt_s = f64::from(interval_s);
        Env {
            ts_ms: 0,
            interval_ms: i64::from(interval_s) * 1_000,
            dt_s,
            dt_h: dt_s / 3_600.0,
            alpha_die: 1.0 - (-dt_s / TAU_DIE_S).exp(),
            alpha_mem: 1.0 - (-dt_s / TAU_MEM_S).exp(),
            bg_burst: 1.0,
        }
    }
}

/// Cumulative counters as DCGM reports them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counters {
    pub sbe_vol: u64,
    pub dbe_vol: u64,
    pub sbe_agg: u64,
    pub dbe_agg: u64,
    pub remap_correctable: u64,
    pub remap_uncorrectable: u64,
    pub pcie_replay: u64,
    pub nvlink_flit: u64,
    pub nvlink_data: u64,
    pub nvlink_replay: u64,
    pub nvlink_recovery: u64,
    pub power_violation_ns: u64,
    pub thermal_violation_ns: u64,
    /// Since the driver was loaded (NVML `TotalEnergyConsumption`), mJ.
    pub energy_mj: u64,
}

/// The state of one GPU slot.
#[derive(Debug, Clone)]
pub(crate) struct GpuState {
    /// Index into `Simulator::gpus` of the GPU now in the slot.
    pub gpu: usize,
    pub spec: &'static SkuSpec,
    /// This part's thermal resistance, °C/W (±6 % part-to-part).
    pub r_th: f64,
    /// Power at equal work (±3 % silicon lottery).
    pub power_eff: f64,
    /// Downstream slots breathe pre-heated air.
    pub slot_offset_c: f64,
    /// Background error counts per tick (most GPUs ~0, a few marginal ones).
    pub bg_sbe: f64,
    pub bg_pcie: f64,
    pub bg_nvlink: f64,
    /// Shares of background NVLink events that are CRC data, replay and
    /// recovery errors (`RandomPrecursors`); `None`: all are CRC flit errors.
    pub bg_nvlink_mix: Option<[f64; 3]>,
    pub temp_c: f64,
    pub mem_temp_c: f64,
    /// Slowdown controller output 0..0.6: fraction of clock given up.
    pub throttle: f64,
    pub c: Counters,
    pub xid: u32,
    pub remap_pending: bool,
    /// Fractional row remaps not yet applied.
    pub remap_acc: f64,
    pub failure: Option<FailurePlan>,
    /// The precursor's own stream, for a plan with a `precursor_seed`
    /// (started at the first precursor tick).
    pub precursor_rng: Option<SimRng>,
    /// First tick with no telemetry (failure), `i64::MAX` while healthy.
    pub silent_from_ms: i64,
}

/// Exponential growth 0 → 1 of a precursor over degradation progress 0 → 1:
/// quiet for most of the way, steep at the end (e^5 ≈ 148× last vs first).
#[inline]
pub(crate) fn growth(p: f64) -> f64 {
    const E5M1: f64 = 147.413_159_102_576_6;
    ((5.0 * p).exp() - 1.0) / E5M1
}

/// Rounds a non-negative reading to an integer. `f64::round` is a libm call
/// on baseline x86-64 (no SSE4.1); truncating `x + 0.5` is one instruction
/// and equal for x ≥ 0, which every rounded reading here is.
#[inline]
fn round0(x: f64) -> f64 {
    debug_assert!(x >= 0.0, "readings are non-negative");
    (x + 0.5) as i64 as f64
}

#[inline]
fn round3(x: f64) -> f64 {
    round0(x * 1_000.0) / 1_000.0
}

impl GpuState {
    /// A fresh GPU at idle equilibrium.
    pub fn new(
        gpu: usize,
        spec: &'static SkuSpec,
        slot: u8,
        inlet_c: f64,
        rng: &mut SimRng,
    ) -> GpuState {
        // Per-hour background rates: most parts almost never log an error, a
        // few marginal ones do so steadily (benign look-alikes of precursors).
        let marginal = |rng: &mut SimRng, share: f64, lo: f64, hi: f64, floor: f64| {
            if rng.chance(share) {
                rng.log_range(lo, hi)
            } else {
                floor
            }
        };
        let sbe_h = marginal(rng, 0.08, 0.05, 1.0, 0.002);
        let pcie_h = marginal(rng, 0.05, 0.2, 4.0, 0.01);
        let nvl_h = marginal(rng, 0.08, 0.5, 12.0, 0.02);
        let r_th = spec.r_th * (1.0 + 0.06 * rng.normal().clamp(-2.0, 2.0));
        let slot_offset_c = f64::from(slot % 4) * 0.8 + rng.range(0.0, 1.0);
        let temp_c = inlet_c + slot_offset_c + 4.0 + spec.idle_w * r_th;
        GpuState {
            gpu,
            spec,
            r_th,
            power_eff: 1.0 + 0.03 * rng.normal().clamp(-2.0, 2.0),
            slot_offset_c,
            bg_sbe: sbe_h,
            bg_pcie: pcie_h,
            bg_nvlink: nvl_h,
            bg_nvlink_mix: None,
            temp_c,
            mem_temp_c: temp_c + 3.0,
            throttle: 0.0,
            c: Counters::default(),
            xid: 0,
            remap_pending: false,
            remap_acc: 0.0,
            failure: None,
            precursor_rng: None,
            silent_from_ms: i64::MAX,
        }
    }

    /// A driver reload: volatile counters and those NVML keeps since driver
    /// load restart from 0; aggregate ECC and remapped rows persist; pending
    /// row remaps are applied. The last XID stays as DCGM caches it.
    pub fn driver_reload(&mut self) {
        let c = &mut self.c;
        c.sbe_vol = 0;
        c.dbe_vol = 0;
        c.pcie_replay = 0;
        c.nvlink_flit = 0;
        c.nvlink_data = 0;
        c.nvlink_replay = 0;
        c.nvlink_recovery = 0;
        c.power_violation_ns = 0;
        c.thermal_violation_ns = 0;
        c.energy_mj = 0;
        self.remap_pending = false;
    }

    /// Advances one tick and writes every reported field into `m`.
    pub fn step(&mut self, env: &Env, d: &Demand, inlet_c: f64, rng: &mut SimRng, m: &mut Metrics) {
        let spec = self.spec;
        let ts = env.ts_ms;
        let busy = d.util > 0.0;

        // Active failure precursor, if any.
        let mut r_mult = 1.0;
        let mut clock_f = 1.0;
        let mut power_f = 1.0;
        let mut link_width = 16.0;
        let mut fail_kind = None;
        let mut g = 0.0;
        if let Some(f) = &self.failure
            && ts >= f.onset_ms
        {
            fail_kind = Some(f.kind);
            g = plan_level(f, ts);
            let drawn = f.precursor.as_ref();
            match f.kind {
                FailureKind::Thermal => r_mult = 1.0 + drawn.map_or(1.2, |p| p.amplitude) * g,
                FailureKind::Pcie if f.progress(ts) > drawn.map_or(0.85, |p| p.link_drop_at) => {
                    link_width = 8.0
                }
                FailureKind::Straggler if ts < f.end_ms && d.util > 0.5 => {
                    clock_f = f.clock_factor;
                    power_f = f.power_factor;
                }
                _ => {}
            }
        }

        // Work → power, with the power cap and the thermal slowdown.
        let util = if busy {
            (d.util + 0.012 * rng.noise()).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let dynamic = (spec.tdp_w - spec.idle_w) * d.power_frac * self.power_eff * power_f;
        let mut power =
            spec.idle_w * (1.0 + 0.01 * rng.noise()) + dynamic * (1.0 + 0.015 * rng.noise());
        let mut reasons = 0u32;
        if power > spec.tdp_w {
            clock_f *= 1.0 - 0.6 * (power / spec.tdp_w - 1.0);
            power = spec.tdp_w - rng.f64() * 2.0;
            reasons |= REASON_SW_POWER_CAP;
            self.c.power_violation_ns += (env.dt_s * 1e9) as u64;
        }
        if self.throttle > 0.0 {
            power = spec.idle_w + (power - spec.idle_w) * (1.0 - 0.9 * self.throttle);
            clock_f *= 1.0 - self.throttle;
            reasons |= REASON_SW_THERMAL;
            self.c.thermal_violation_ns += (env.dt_s * 1e9 * (self.throttle * 4.0).min(1.0)) as u64;
        }

        // Power and inlet → temperature, with lag.
        let target = inlet_c + self.slot_offset_c + 4.0 + power * self.r_th * r_mult;
        self.temp_c += env.alpha_die * (target - self.temp_c);
        let mem_target = self.temp_c + 3.0 + 7.0 * power / spec.tdp_w;
        self.mem_temp_c += env.alpha_mem * (mem_target - self.mem_temp_c);
        let over = self.temp_c - spec.slowdown_c;
        let gain = env.dt_s / 30.0;
        self.throttle = if over > 0.0 {
            (self.throttle + 0.03 * gain * over).min(0.6)
        } else {
            (self.throttle - 0.05 * gain).max(0.0)
        };
        if over > 2.0 {
            reasons |= REASON_HW_THERMAL;
        }

        let sm_mhz = if busy {
            round0(spec.max_sm_mhz * clock_f / 15.0) * 15.0
        } else {
            spec.idle_sm_mhz
        };
        self.c.energy_mj += (power * env.dt_s * 1_000.0) as u64;

        // Background errors: one draw decides whether any counter moves
        // (bursts of `bg_burst` errors on average, as often less often).
        let traffic = 0.3 + 0.7 * d.traffic;
        let per_burst = env.dt_h / env.bg_burst;
        let p_sbe = self.bg_sbe * per_burst;
        let p_pcie = self.bg_pcie * per_burst * traffic;
        let p_nvl = self.bg_nvlink * per_burst * traffic;
        let u = rng.f64();
        if u < p_sbe + p_pcie + p_nvl {
            let n = rng.geometric(env.bg_burst);
            if u < p_sbe {
                self.c.sbe_vol += n;
                self.c.sbe_agg += n;
            } else if u < p_sbe + p_pcie {
                self.c.pcie_replay += n;
            } else {
                self.nvlink_background(((u - p_sbe - p_pcie) / p_nvl).min(1.0), n);
            }
        }
        if d.app_xid != 0 {
            self.xid = d.app_xid;
        }
        if let Some(kind) = fail_kind {
            match self.failure.as_ref().and_then(|f| f.precursor_seed) {
                Some(seed) => {
                    let mut own = self
                        .precursor_rng
                        .take()
                        .unwrap_or_else(|| SimRng::new(seed));
                    self.precursor(kind, g, env, util, traffic, &mut own);
                    self.precursor_rng = Some(own);
                }
                None => self.precursor(kind, g, env, util, traffic, rng),
            }
        }

        let fb_used = round0(spec.fb_mib * d.fb_frac);
        let c = &self.c;
        m.set(Field::GpuTemp, round0(self.temp_c));
        m.set(Field::MemoryTemp, round0(self.mem_temp_c));
        m.set(Field::PowerUsage, round3(power));
        m.set(Field::PowerLimit, spec.tdp_w);
        m.set(Field::GpuUtil, round0(util * 100.0));
        m.set(Field::MemCopyUtil, round0(d.mem_util * 100.0));
        m.set(Field::SmClock, sm_mhz);
        m.set(Field::MemClock, spec.mem_mhz);
        m.set(Field::FbUsed, fb_used);
        m.set(Field::FbFree, spec.fb_mib * 0.99 - fb_used);
        if !busy {
            reasons |= REASON_GPU_IDLE;
        }
        m.set(Field::ClocksEventReasons, f64::from(reasons));
        m.set(Field::XidErrors, f64::from(self.xid));
        m.set(Field::EccSbeVolTotal, c.sbe_vol as f64);
        m.set(Field::EccDbeVolTotal, c.dbe_vol as f64);
        m.set(Field::EccSbeAggTotal, c.sbe_agg as f64);
        m.set(Field::EccDbeAggTotal, c.dbe_agg as f64);
        m.set(Field::CorrectableRemappedRows, c.remap_correctable as f64);
        m.set(
            Field::UncorrectableRemappedRows,
            c.remap_uncorrectable as f64,
        );
        m.set(Field::RowRemapFailure, 0.0);
        m.set(
            Field::RowRemapPending,
            f64::from(u8::from(self.remap_pending)),
        );
        m.set(Field::PcieReplayCounter, c.pcie_replay as f64);
        m.set(Field::NvlinkCrcFlitErrors, c.nvlink_flit as f64);
        m.set(Field::NvlinkCrcDataErrors, c.nvlink_data as f64);
        m.set(Field::NvlinkReplayErrors, c.nvlink_replay as f64);
        m.set(Field::NvlinkRecoveryErrors, c.nvlink_recovery as f64);
        m.set(Field::PowerViolation, c.power_violation_ns as f64);
        m.set(Field::ThermalViolation, c.thermal_violation_ns as f64);
        m.set(Field::TotalEnergy, c.energy_mj as f64);
        m.set(Field::GrEngineActive, round3(util * 0.97));
        m.set(
            Field::TensorActive,
            round3(util * d.power_frac.min(1.0) * 0.6),
        );
        m.set(Field::DramActive, round3(d.mem_util * 0.9));
        m.set(Field::PcieLinkGen, spec.pcie_gen);
        m.set(Field::PcieLinkWidth, link_width);
    }

    /// Error-counter precursors and the failure itself.
    fn precursor(
        &mut self,
        kind: FailureKind,
        g: f64,
        env: &Env,
        util: f64,
        traffic: f64,
        rng: &mut SimRng,
    ) {
        let Some(f) = &self.failure else { return };
        // Errors per hour at failure: the mode's usual size, or the drawn
        // one (remaps and NVLink recoveries scale with it).
        let rate = |usual: f64| f.precursor.as_ref().map_or(usual, |p| p.amplitude);
        let scale = |usual: f64| f.precursor.as_ref().map_or(1.0, |p| p.amplitude / usual);
        let at_failure = env.ts_ms == f.failure_ms;
        let after = env.ts_ms == f.failure_ms.saturating_add(env.interval_ms);
        let c = &mut self.c;
        match kind {
            FailureKind::HbmEcc => {
                let sbe = rng.poisson(rate(400.0) * g * env.dt_h);
                c.sbe_vol += sbe;
                c.sbe_agg += sbe;
                // Rows are remapped as weak cells are found: ~2 per hour at
                // the end, accumulated so that every precursor shows some.
                self.remap_acc += 2.0 * scale(400.0) * g * env.dt_h;
                if self.remap_acc >= 1.0 {
                    let rows = self.remap_acc.floor();
                    self.remap_acc -= rows;
                    c.remap_correctable += rows as u64;
                    self.remap_pending = true;
                }
                if at_failure {
                    let dbe = 1 + rng.below(2);
                    c.dbe_vol += dbe;
                    c.dbe_agg += dbe;
                    c.remap_uncorrectable += 1;
                    self.remap_pending = true;
                    self.xid = 48;
                } else if after {
                    self.xid = f.follow_xid;
                }
            }
            FailureKind::Nvlink => {
                let mean = rate(20_000.0) * g * env.dt_h * traffic;
                c.nvlink_flit += rng.poisson(mean);
                c.nvlink_data += rng.poisson(mean / 8.0);
                c.nvlink_replay += rng.poisson(mean / 20.0);
                c.nvlink_recovery += rng.poisson(3.0 * scale(20_000.0) * g * env.dt_h);
                if at_failure {
                    self.xid = 74;
                }
            }
            FailureKind::Pcie => {
                c.pcie_replay += rng.poisson(rate(5_000.0) * g * env.dt_h * (0.3 + 0.7 * util));
                if at_failure {
                    self.xid = 79;
                }
            }
            FailureKind::Thermal if at_failure => self.xid = 79,
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "physics_tests.rs"]
mod tests;
