//! Per-GPU state of the feature stage: everything the engine remembers about
//! one GPU between two of its samples, kept compact (about 1 KB, no history
//! beyond a four-entry ring) because a shard holds hundreds of thousands.
//!
//! - [`counters`]: cumulative counters → deltas, rates and reset events.
//! - [`gaps`]: duplicates, reorders, late samples and silences.
//! - [`smooth`]: event-time EWMA and decayed event counts.

pub mod counters;
pub mod gaps;
pub mod smooth;

use serde::{Deserialize, Serialize};

use crate::expected::inlet::HostSlot;
use crate::expected::rack::{AirBaseline, RackSlot};
use crate::field::{FIELD_COUNT, Field};
use crate::peers::{LEVELS, MemberSlot};
use crate::phase::{JobHint, PhaseState};
use crate::sample::{Metrics, Topology};
use crate::xid::PendingXid;
use counters::{COUNTERS, Counter};
use gaps::ArrivalState;
use smooth::{DecayedCounts, Ewma};

/// Everything remembered about one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuState {
    /// Latest topology (a sample with an empty topology keeps it).
    pub topo: Topology,
    pub arrival: ArrivalState,
    /// Last reported value of every field, as f32 (NaN before any).
    #[serde(with = "fixed_array")]
    gauges: [f32; FIELD_COUNT],
    /// Samples since each field was last reported (saturating).
    #[serde(with = "fixed_array")]
    gauge_age: [u8; FIELD_COUNT],
    pub counters: [Counter; COUNTERS],
    /// Last value of `DCGM_FI_DEV_XID_ERRORS` (0 = none yet).
    pub last_xid: u32,
    /// An application XID waiting for its job-wide window to pass.
    pub pending_xid: Option<PendingXid>,
    pub events: DecayedCounts,
    pub phase: PhaseState,
    pub job_hint: JobHint,
    pub util_smooth: Ewma,
    pub temp_ewma: Ewma,
    /// Power smoothed with the thermal time constant.
    pub power_ewma: Ewma,
    pub resid_ewma: Ewma,
    /// Id of the SKU's models in the `ModelBank`.
    pub sku: u32,
    /// Cohort slots, one per level; valid while `links_epoch` matches and
    /// `links_valid` (cleared on topology or phase change).
    pub cohorts: [MemberSlot; LEVELS],
    pub links_valid: bool,
    pub links_epoch: u32,
    pub host: HostSlot,
    pub host_epoch: u32,
    /// Its rack's id in the shard's `RackAir`, and its own air baseline
    /// (absent in checkpoints written before they existed).
    #[serde(default)]
    pub rack: RackSlot,
    #[serde(default)]
    pub air: AirBaseline,
    /// Accepted samples; with `salt`, picks which ones train the models.
    pub samples: u32,
    pub salt: u32,
}

/// Serde for arrays longer than serde's built-in 32: a sequence.
mod fixed_array {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: Serialize, const N: usize>(
        a: &[T; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(a.iter())
    }

    pub fn deserialize<'de, D, T, const N: usize>(d: D) -> Result<[T; N], D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        let v = Vec::<T>::deserialize(d)?;
        let len = v.len();
        v.try_into()
            .map_err(|_| D::Error::custom(format!("expected {N} values, got {len}")))
    }
}

impl GpuState {
    /// Fresh state for a GPU whose id hashes to `salt`.
    pub fn new(salt: u32) -> Self {
        GpuState {
            topo: Topology::default(),
            arrival: ArrivalState::default(),
            gauges: [f32::NAN; FIELD_COUNT],
            gauge_age: [u8::MAX; FIELD_COUNT],
            counters: [Counter::default(); COUNTERS],
            last_xid: 0,
            pending_xid: None,
            events: DecayedCounts::default(),
            phase: PhaseState::default(),
            job_hint: JobHint::None,
            util_smooth: Ewma::default(),
            temp_ewma: Ewma::default(),
            power_ewma: Ewma::default(),
            resid_ewma: Ewma::default(),
            sku: u32::MAX,
            cohorts: [MemberSlot::default(); LEVELS],
            links_valid: false,
            links_epoch: 0,
            host: HostSlot::default(),
            host_epoch: 0,
            rack: RackSlot::default(),
            air: AirBaseline::default(),
            samples: 0,
            salt,
        }
    }

    /// Records every reported field's value and ages the others.
    #[inline]
    pub fn ingest(&mut self, m: &Metrics) {
        for a in &mut self.gauge_age {
            *a = a.saturating_add(1);
        }
        let mut bits = m.presence();
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some(v) = Field::from_index(i).and_then(|f| m.get(f)) {
                self.gauges[i] = v as f32;
                self.gauge_age[i] = 0;
            }
        }
    }

    /// The value of `field`: reported in this sample, or carried forward
    /// from at most `carry` samples ago; NaN otherwise.
    #[inline]
    pub fn value(&self, field: Field, carry: u8) -> f32 {
        let i = field.index();
        if self.gauge_age[i] <= carry {
            self.gauges[i]
        } else {
            f32::NAN
        }
    }

    /// Takes a sample's topology; returns true when it changed. An empty
    /// topology (a partial sample) keeps the known one.
    #[inline]
    pub fn update_topology(&mut self, topo: &Topology) -> bool {
        if self.topo == *topo {
            return false;
        }
        let empty = topo.host.is_none()
            && topo.rack.is_none()
            && topo.cluster.is_none()
            && topo.model.is_none()
            && topo.job.is_none();
        if empty && self.sku != u32::MAX {
            return false;
        }
        if self.topo.host != topo.host {
            // A GPU that moved hosts leaves its last reading in the old
            // host's sum until that host is garbage-collected (rare).
            self.host = HostSlot::default();
        }
        if self.topo.rack != topo.rack || self.topo.host != topo.host {
            // Other air: the baseline starts over.
            self.rack = RackSlot::default();
            self.air = AirBaseline::default();
        }
        self.topo = topo.clone();
        self.job_hint = JobHint::from_job(self.topo.job.as_deref());
        self.links_valid = false;
        true
    }

    /// Heap bytes this state owns (topology strings count fully even when
    /// they are shared with other GPUs).
    pub fn heap_bytes(&self) -> usize {
        let t = &self.topo;
        [&t.host, &t.rack, &t.cluster, &t.model, &t.job]
            .iter()
            .filter_map(|s| s.as_ref())
            .map(|s| s.len() + 16)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_forward_then_forgets() {
        let mut s = GpuState::new(0);
        let mut m = Metrics::default();
        m.set(Field::GpuTemp, 60.0);
        s.ingest(&m);
        assert_eq!(s.value(Field::GpuTemp, 2), 60.0);
        assert!(s.value(Field::PowerUsage, 2).is_nan());
        let empty = Metrics::default();
        s.ingest(&empty);
        s.ingest(&empty);
        assert_eq!(s.value(Field::GpuTemp, 2), 60.0);
        s.ingest(&empty);
        assert!(s.value(Field::GpuTemp, 2).is_nan());
    }

    #[test]
    fn state_is_compact() {
        let size = std::mem::size_of::<GpuState>();
        assert!(size < 1_400, "GpuState is {size} bytes");
    }
}
