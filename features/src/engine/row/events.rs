//! The event-producing parts of one row: cumulative counters (deltas,
//! rates, totals, reset events) and XIDs (classification, job-level
//! attribution). Split from [`super`] so the row's arithmetic and its
//! events read separately; both are methods of the same [`Parts`].

use std::sync::Arc;

use super::Parts;
use crate::engine::FeatureEvent;
use crate::field::Field;
use crate::peers::CohortLevel;
use crate::sample::Sample;
use crate::state::GpuState;
use crate::state::counters::{AGG_SBE, CounterUpdate, ERROR_COUNTERS, TRACKED};
use crate::state::smooth::EventKind;
use crate::vector::{Col, FEATURE_COUNT};
use crate::xid::{self, PendingXid, XidBlame, XidClass};

impl Parts<'_> {
    /// Counter deltas, rates, totals and reset events.
    pub(super) fn counters(
        &mut self,
        st: &mut GpuState,
        sample: &Sample,
        v: &mut [f32; FEATURE_COUNT],
        events: &mut Vec<FeatureEvent>,
    ) {
        let ts = sample.ts_ms;
        let mut reset = false;
        for (slot, (field, unit)) in TRACKED.iter().enumerate() {
            let c = &mut st.counters[slot];
            match sample.metrics.get(*field) {
                Some(x) => {
                    if let CounterUpdate::Reset { from, to } = c.update(x, ts, *unit) {
                        reset = true;
                        events.push(FeatureEvent::CounterReset {
                            gpu: sample.gpu.clone(),
                            ts_ms: ts,
                            field: *field,
                            from,
                            to,
                        });
                    }
                }
                None => c.clear_interval(),
            }
        }
        if reset {
            // One reset episode (a driver reload resets many counters).
            st.events.bump(EventKind::CounterReset);
        }
        let c = &st.counters;
        for slot in 0..ERROR_COUNTERS {
            v[Col::EccSbeDelta as usize + slot] = c[slot].delta;
            v[Col::EccSbeRate as usize + slot] = c[slot].rate;
        }
        // An exporter whose counters list has the aggregate (lifetime) ECC
        // counts but not the volatile ones (dcgm-exporter ships neither by
        // default; a site's own list may pick either): the aggregate's
        // growth is the same errors, so the ECC columns come from it.
        for (vol, agg) in [(0, AGG_SBE), (1, AGG_SBE + 1)] {
            if !sample.metrics.has(TRACKED[vol].0) && sample.metrics.has(TRACKED[agg].0) {
                v[Col::EccSbeDelta as usize + vol] = c[agg].delta;
                v[Col::EccSbeRate as usize + vol] = c[agg].rate;
            }
        }
        v[Col::PowerViolationFrac as usize] = c[11].rate;
        v[Col::ThermalViolationFrac as usize] = c[12].rate;
        v[Col::EnergyPowerW as usize] = c[13].rate;
        let total = |slot: usize| c[slot].total().map_or(f32::NAN, |t| t as f32);
        v[Col::EccSbeAggTotal as usize] = total(AGG_SBE);
        v[Col::EccDbeAggTotal as usize] = total(AGG_SBE + 1);
        v[Col::RetiredPagesTotal as usize] = total(2) + total(3);
        v[Col::RemapCorrTotal as usize] = total(4);
        v[Col::RemapUncorrTotal as usize] = total(5);
    }

    /// XID events, classification and job-level attribution.
    pub(super) fn xid(
        &mut self,
        st: &mut GpuState,
        sample: &Sample,
        events: &mut Vec<FeatureEvent>,
    ) {
        let cfg = self.cfg;
        let ts = sample.ts_ms;
        // The job (else host) whose GPUs' XIDs count together; cloned only
        // on the rare paths that need it.
        let group = |st: &GpuState| -> Option<Arc<str>> {
            st.topo.job.clone().or_else(|| st.topo.host.clone())
        };
        if let Some(p) = st.pending_xid
            && ts >= p.ts_ms + cfg.xid_window_ms
        {
            let g = group(st);
            self.judge(st, sample, g.as_ref(), p, events);
        }
        let Some(x) = sample.metrics.get(Field::XidErrors) else {
            return;
        };
        let x = if x.is_finite() && x >= 0.0 {
            x as u32
        } else {
            return;
        };
        if x == st.last_xid {
            return;
        }
        let group = group(st);
        st.last_xid = x;
        if x == 0 {
            return;
        }
        let class = xid::classify(x);
        st.events.bump(match class {
            XidClass::Hardware => EventKind::XidHardware,
            XidClass::Application => EventKind::XidApplication,
            XidClass::Unknown => EventKind::XidUnknown,
        });
        events.push(FeatureEvent::Xid {
            gpu: sample.gpu.clone(),
            ts_ms: ts,
            xid: x,
            class,
        });
        if class != XidClass::Application {
            return;
        }
        if let Some(p) = st.pending_xid.take() {
            self.judge(st, sample, group.as_ref(), p, events);
        }
        if let Some(g) = &group {
            let level = if st.topo.job.is_some() {
                CohortLevel::Job
            } else {
                CohortLevel::Host
            };
            let size = self.cohorts.size(st.cohorts[level as usize].cohort).max(1);
            self.xids.record(g, ts, cfg.xid_window_ms, size);
        }
        st.pending_xid = Some(PendingXid { xid: x, ts_ms: ts });
    }

    fn judge(
        &mut self,
        st: &mut GpuState,
        sample: &Sample,
        group: Option<&Arc<str>>,
        p: PendingXid,
        events: &mut Vec<FeatureEvent>,
    ) {
        let cfg = self.cfg;
        let blame = self
            .xids
            .judge(group, p, cfg.xid_window_ms, cfg.xid_job_fraction);
        st.events.bump(match blame {
            XidBlame::Job => EventKind::XidAppJob,
            XidBlame::Gpu => EventKind::XidAppSolo,
        });
        st.pending_xid = None;
        events.push(FeatureEvent::XidAttributed {
            gpu: sample.gpu.clone(),
            ts_ms: p.ts_ms,
            xid: p.xid,
            blame,
        });
    }
}
