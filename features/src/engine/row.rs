//! One accepted sample → one feature row: the per-sample body of the
//! engine, after the arrival checks. Touches the GPU's own state and the
//! shared parts (models, cohorts, hosts, XID groups) through [`Parts`], so
//! the borrow of the GPU's state and of the shared state stay disjoint.

use super::FeatureEvent;
use crate::config::FeatureConfig;
use crate::expected::inlet::{HostSlot, HostTemps};
use crate::expected::rack::{RackAir, RackInput, RackSlot};
use crate::expected::{Expected, ExpectedInputs, ModelBank};
use crate::field::Field;
use crate::peers::{
    CohortKey, CohortLevel, CohortStats, LEVELS, MemberSlot, PEER_FEATURES, RobustStats,
};
use crate::phase;
use crate::sample::Sample;
use crate::state::GpuState;
use crate::state::smooth::{EventKind, alpha};
use crate::vector::{Col, FEATURE_COUNT, FeatureRow};
use crate::xid::XidCorrelator;

mod events;

/// Clock event reason bits (NVML `nvmlClocksEventReasons`, which DCGM
/// reports as `DCGM_FI_DEV_CLOCKS_EVENT_REASONS`).
const REASON_SW_POWER_CAP: u64 = 0x4;
const REASON_HW_SLOWDOWN: u64 = 0x8;
const REASON_SW_THERMAL: u64 = 0x20;
const REASON_HW_THERMAL: u64 = 0x40;
const REASON_HW_POWER_BRAKE: u64 = 0x80;

/// Smoothing of utilization for phase detection (per sample).
const UTIL_ALPHA: f32 = 0.5;

/// The shared state one row needs.
pub(super) struct Parts<'a> {
    pub cfg: &'a FeatureConfig,
    pub models: &'a mut ModelBank,
    pub cohorts: &'a mut CohortStats,
    pub hosts: &'a mut HostTemps,
    pub racks: &'a mut RackAir,
    pub xids: &'a mut XidCorrelator,
    pub alphas: &'a mut AlphaCache,
}

/// Smoothing weights for the last interval length seen: a fleet scraped
/// at a fixed interval has one `dt`, so the `exp` is computed once, not
/// per sample.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct AlphaCache {
    dt: i64,
    thermal: f32,
    resid: f32,
}

impl AlphaCache {
    fn refresh(&mut self, dt: i64, cfg: &FeatureConfig) {
        if dt != self.dt {
            self.dt = dt;
            self.thermal = alpha(dt, cfg.thermal_tau_ms);
            self.resid = alpha(dt, cfg.resid_tau_ms);
        }
    }

    fn thermal(&mut self, dt: i64, cfg: &FeatureConfig) -> f32 {
        self.refresh(dt, cfg);
        self.thermal
    }

    fn resid(&mut self, dt: i64, cfg: &FeatureConfig) -> f32 {
        self.refresh(dt, cfg);
        self.resid
    }
}

/// The peer inputs of a row, read back from its columns.
fn peer_inputs(v: &[f32; FEATURE_COUNT]) -> [f32; PEER_FEATURES] {
    [
        Col::GpuTemp,
        Col::MemoryTemp,
        Col::PowerW,
        Col::SmClock,
        Col::GpuUtil,
        Col::GpuTempResid,
        Col::SmClockResid,
        Col::PowerResid,
    ]
    .map(|c| v[c as usize])
}

/// Fills the peer columns of a row from reference `r` of cohort level `lvl`.
pub(super) fn fill_peer_z_from(v: &mut [f32; FEATURE_COUNT], lvl: usize, r: &RobustStats) {
    let x = peer_inputs(v);
    v[Col::PeerLevel as usize] = lvl as f32;
    v[Col::PeerN as usize] = r.n as f32;
    for (p, x) in x.iter().enumerate() {
        v[Col::GpuTempPeerZ as usize + p] = r.z(p, *x);
    }
}

fn flag(bits: f32, mask: u64) -> f32 {
    if bits.is_finite() {
        f32::from(u8::from(bits as u64 & mask != 0))
    } else {
        f32::NAN
    }
}

fn nan_if_zero_den(num: f32, den: f32) -> f32 {
    if den > 0.0 { num / den } else { f32::NAN }
}

impl Parts<'_> {
    /// Updates `st` with `sample` (already accepted) and builds its row.
    pub fn compute(
        &mut self,
        st: &mut GpuState,
        sample: &Sample,
        prev_ts: i64,
        events: &mut Vec<FeatureEvent>,
        deferred: Option<&mut [u32; LEVELS]>,
    ) -> FeatureRow {
        let cfg = self.cfg;
        let ts = sample.ts_ms;
        let dt = if prev_ts == i64::MIN { 0 } else { ts - prev_ts };
        let mut v = [f32::NAN; FEATURE_COUNT];

        if st.update_topology(&sample.topo) || st.sku == u32::MAX {
            st.sku = self.models.resolve(&st.topo.model);
        }
        st.ingest(&sample.metrics);
        let carry = cfg.carry_forward_samples;
        let g = |f: Field| st.value(f, carry);
        let temp = g(Field::GpuTemp);
        let mem_temp = g(Field::MemoryTemp);
        let power = g(Field::PowerUsage);
        let util = g(Field::GpuUtil);
        let clock = g(Field::SmClock);
        let power_frac = nan_if_zero_den(power, g(Field::PowerLimit));
        let fb_used = g(Field::FbUsed);
        let fb_total = fb_used + g(Field::FbFree) + g(Field::FbReserved).max(0.0);
        let fb_frac = nan_if_zero_den(fb_used, fb_total);
        let reasons = g(Field::ClocksEventReasons);
        for (col, val) in [
            (Col::GpuTemp, temp),
            (Col::MemoryTemp, mem_temp),
            (Col::PowerW, power),
            (Col::PowerFrac, power_frac),
            (Col::GpuUtil, util),
            (Col::MemCopyUtil, g(Field::MemCopyUtil)),
            (Col::SmClock, clock),
            (Col::MemClock, g(Field::MemClock)),
            (Col::FbUsedFrac, fb_frac),
            (Col::SmActive, g(Field::SmActive)),
            (Col::TensorActive, g(Field::TensorActive)),
            (Col::DramActive, g(Field::DramActive)),
            (Col::PcieLinkGen, g(Field::PcieLinkGen)),
            (Col::PcieLinkWidth, g(Field::PcieLinkWidth)),
            (
                Col::ThrottlePower,
                flag(reasons, REASON_SW_POWER_CAP | REASON_HW_POWER_BRAKE),
            ),
            (
                Col::ThrottleThermal,
                flag(reasons, REASON_SW_THERMAL | REASON_HW_THERMAL),
            ),
            (Col::ThrottleHwSlowdown, flag(reasons, REASON_HW_SLOWDOWN)),
            (Col::RetiredPending, g(Field::RetiredPending)),
            (Col::RowRemapPending, g(Field::RowRemapPending)),
            (Col::RowRemapFailure, g(Field::RowRemapFailure)),
        ] {
            v[col as usize] = val;
        }

        self.counters(st, sample, &mut v, events);
        self.xid(st, sample, events);

        // Workload phase.
        let util_s = st.util_smooth.update(util, UTIL_ALPHA);
        let suggested = phase::classify(util_s, power_frac, fb_frac, st.job_hint);
        let prev_since = st.phase.since_ms;
        if let Some(from) =
            st.phase
                .update(suggested, ts, cfg.phase_confirm_samples, cfg.phase_hold_ms)
        {
            st.events.bump(EventKind::PhaseChange);
            st.links_valid = false;
            events.push(FeatureEvent::PhaseChange {
                gpu: sample.gpu.clone(),
                ts_ms: ts,
                from,
                to: st.phase.phase,
                prev_ms: ts - prev_since,
            });
        }
        let ph = st.phase.phase;
        let settling = st.phase.settling(ts, cfg.phase_settle_ms);
        // Mid-transition (a new phase suggested, not yet confirmed): neither
        // phase's models nor peers apply, so residuals and z-scores are
        // missing and the GPU contributes to no cohort.
        let transitioning = st.phase.pending();

        // Smoothing and the inlet proxy.
        let a_th = self.alphas.thermal(dt, cfg);
        st.temp_ewma.update(temp, a_th);
        st.power_ewma.update(power, a_th);
        if st.host.host == u32::MAX || st.host_epoch != self.hosts.epoch() {
            st.host = match &st.topo.host {
                Some(h) => HostSlot::new(self.hosts.resolve(h)),
                None => HostSlot::default(),
            };
            st.host_epoch = self.hosts.epoch();
        }
        let proxy = self.hosts.push_and_proxy(&mut st.host, ts, temp);

        // Expected vs actual.
        let stride = cfg.rls_update_stride;
        let learn =
            !settling && !transitioning && st.samples.wrapping_add(st.salt).is_multiple_of(stride);
        let inputs = ExpectedInputs {
            gpu_temp: temp,
            memory_temp: mem_temp,
            power_w: power,
            power_ewma_w: st.power_ewma.value,
            util,
            sm_clock: clock,
            inlet_proxy: proxy,
        };
        let mut exp = self.models.evaluate(st.sku, ph, &inputs, learn, cfg);
        if transitioning {
            exp = Expected::missing();
        }
        st.resid_ewma
            .update(exp.temp_resid, self.alphas.resid(dt, cfg));
        let air_shift = self.rack_air(
            st,
            ts,
            &RackInput {
                gpu_temp: temp,
                power_ewma_w: st.power_ewma.value,
                settled: !settling && !transitioning,
                phase: ph.code(),
                power_w: power,
                learn,
                dt_ms: dt,
                host: crate::expected::rack::host_key(sample.topo.host.as_deref()),
            },
            events,
        );

        // Peers.
        let peer_in: [f32; PEER_FEATURES] = [
            temp,
            mem_temp,
            power,
            clock,
            util,
            exp.temp_resid,
            exp.clock_resid,
            exp.power_resid,
        ];
        self.link_cohorts(st);
        if !transitioning {
            let eager = deferred.is_none();
            for slot in st.cohorts.iter_mut().filter(|s| s.cohort != u32::MAX) {
                self.cohorts.push(slot, ts, &peer_in, eager);
            }
        }
        let levels = match (transitioning, settling) {
            (true, _) => 0,
            (false, true) => 1,
            (false, false) => LEVELS,
        };
        let mut peer_ids = [u32::MAX; LEVELS];
        for (id, s) in peer_ids.iter_mut().zip(&st.cohorts[..levels]) {
            *id = s.cohort;
        }
        if let Some(deferred) = deferred {
            // Batch mode: z-scores are filled in at the end of the batch.
            *deferred = peer_ids;
        } else {
            for (lvl, id) in peer_ids
                .iter()
                .enumerate()
                .filter(|(_, id)| **id != u32::MAX)
            {
                self.cohorts.refresh_closed(*id);
                if let Some(r) = self.cohorts.reference(*id, ts) {
                    fill_peer_z_from(&mut v, lvl, r);
                    break;
                }
            }
        }

        let ev = &st.events;
        for (col, val) in [
            (Col::GpuTempEwma, st.temp_ewma.value),
            (Col::PowerEwma, st.power_ewma.value),
            (
                Col::IntervalS,
                if dt > 0 { dt as f32 / 1000.0 } else { f32::NAN },
            ),
            (Col::CounterResets1h, ev.get(EventKind::CounterReset)),
            (Col::Gaps1h, ev.get(EventKind::Gap)),
            (Col::XidHw1h, ev.get(EventKind::XidHardware)),
            (Col::XidApp1h, ev.get(EventKind::XidApplication)),
            (Col::XidUnknown1h, ev.get(EventKind::XidUnknown)),
            (Col::XidAppSolo1h, ev.get(EventKind::XidAppSolo)),
            (Col::XidAppJob1h, ev.get(EventKind::XidAppJob)),
            (Col::LastXid, st.last_xid as f32),
            (Col::PhaseCode, f32::from(ph.code())),
            (Col::PhaseAgeS, st.phase.age_ms(ts) as f32 / 1000.0),
            (Col::PhaseChanges1h, ev.get(EventKind::PhaseChange)),
            (Col::InletProxy, proxy),
            (Col::GpuTempExpected, exp.temp_expected),
            (Col::GpuTempResid, exp.temp_resid),
            (Col::GpuTempResidEwma, st.resid_ewma.value),
            (Col::MemoryTempResid, exp.mem_temp_resid),
            (Col::SmClockResid, exp.clock_resid),
            (Col::PowerResid, exp.power_resid),
            (Col::AirShift, air_shift),
        ] {
            v[col as usize] = val;
        }
        st.samples = st.samples.wrapping_add(1);
        FeatureRow {
            ts_ms: ts,
            gpu: sample.gpu.clone(),
            topo: st.topo.clone(),
            phase: ph,
            values: v,
        }
    }

    /// Feeds the GPU's sample to its rack's bucket; returns the GPU's air
    /// shift (NaN without a rack or a ready baseline).
    fn rack_air(
        &mut self,
        st: &mut GpuState,
        ts: i64,
        inp: &RackInput,
        events: &mut Vec<FeatureEvent>,
    ) -> f32 {
        let Some(rack) = &st.topo.rack else {
            return f32::NAN;
        };
        if st.rack.id == u32::MAX || st.rack.epoch != self.racks.epoch() {
            st.rack = RackSlot {
                id: self.racks.resolve(rack, &st.topo.cluster),
                epoch: self.racks.epoch(),
            };
        }
        let (shift, closed) = self
            .racks
            .push(st.rack.id, &mut st.air, st.sku, ts, inp, self.cfg);
        if let Some(r) = closed {
            events.push(FeatureEvent::RackAir(r));
        }
        shift
    }

    /// (Re)resolves the GPU's cohorts after a topology or phase change, or
    /// after cohort ids were recycled.
    fn link_cohorts(&mut self, st: &mut GpuState) {
        if st.links_valid && st.links_epoch == self.cohorts.epoch() {
            return;
        }
        let t = &st.topo;
        let scopes = [t.job.clone(), t.host.clone(), t.rack.clone(), None];
        for (i, level) in CohortLevel::ALL.iter().enumerate() {
            let scope = scopes[i].clone();
            st.cohorts[i] = if scope.is_none() && *level != CohortLevel::Fleet {
                MemberSlot::default()
            } else {
                let key = CohortKey {
                    level: *level,
                    scope,
                    sku: t.model.clone(),
                    phase: st.phase.phase,
                };
                MemberSlot::new(self.cohorts.resolve(&key))
            };
        }
        st.links_valid = true;
        st.links_epoch = self.cohorts.epoch();
    }
}
