//! The signals the change tests watch (part of [`super`]): which kind each
//! one's evidence belongs to and what a feature row says about it.

use features::{Col, FeatureRow};

use super::{ChangeConfig, Kind};

/// Hours of a phase the peer difference learns before it is judged (its
/// baseline then counts as [`PEER_BASE_H`] of data: an expanding average
/// absorbed a step 1.2 h into training).
const PEER_WARM_H: f64 = 0.5;
const PEER_BASE_H: f64 = 6.0;

/// Hours of judged buckets the temperature's own test learns before it
/// counts. Its fit has already seen four hours (its first judged bucket
/// comes ~4 h into a GPU's history, see [`super::fit`]): the counters'
/// four more hours left a thermal precursor under way then unjudged for
/// hours more (and learnt as usual meanwhile).
const THERMAL_WARM_H: f64 = 1.0;

/// The smallest spread assumed for the bucket means of the temperature's
/// difference to its host peers, °C (the difference cancels the
/// workload's and the air's noise: whole degrees are its floor).
const PEER_MIN_SD: f64 = 1.5;

/// One signal under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Ecc,
    Nvlink,
    Pcie,
    /// The temperature against the GPU's own fit on power, less its
    /// host's other GPUs' misses of theirs ([`super::fit`]).
    Thermal,
    /// The temperature residual less the common part of its host's GPUs
    /// in its job and phase (same code, same air): a cooling fault of one
    /// GPU, with the workload's and the room's swings taken out.
    ThermalPeer,
}

impl Signal {
    pub const ALL: [Signal; 5] = [
        Signal::Ecc,
        Signal::Nvlink,
        Signal::Pcie,
        Signal::Thermal,
        Signal::ThermalPeer,
    ];

    /// The alert kind the signal's evidence belongs to.
    pub const fn kind(self) -> Kind {
        match self {
            Signal::Ecc => Kind::HbmEccTrend,
            Signal::Nvlink => Kind::NvlinkErrors,
            Signal::Pcie => Kind::PcieErrors,
            Signal::Thermal | Signal::ThermalPeer => Kind::ThermalDegradation,
        }
    }

    pub(super) const fn counts(self) -> bool {
        !matches!(self, Signal::Thermal | Signal::ThermalPeer)
    }

    /// Whether the counter's errors come with the workload's traffic
    /// (link errors: a share of the bits moved), so that its hours are
    /// weighed by their phase ([`super::exposure`]). Correctable ECC
    /// errors are the memory's, not the links': weighing them by phase
    /// only added noise (two HBM precursors at full seed 111 lost
    /// 0.1–0.4 h).
    pub(super) const fn weighed_by_phase(self) -> bool {
        matches!(self, Signal::Nvlink | Signal::Pcie)
    }

    /// Background rate per hour assumed before anything is known (a
    /// healthy GPU's order of magnitude; the SKU's measured background
    /// replaces it within hours).
    pub(super) const fn prior_rate_h(self) -> f64 {
        match self {
            Signal::Ecc => 0.5,
            Signal::Nvlink => 2.0,
            Signal::Pcie => 2.0,
            Signal::Thermal | Signal::ThermalPeer => 0.0,
        }
    }

    /// This row's value: a count since the previous sample, or a gauge
    /// (NaN: no information).
    pub(super) fn value(self, row: &FeatureRow) -> f64 {
        let g = |c: Col| {
            let v = f64::from(row.get(c));
            if v.is_finite() && v >= 0.0 { v } else { 0.0 }
        };
        match self {
            Signal::Ecc => g(Col::EccSbeDelta),
            Signal::Nvlink => {
                g(Col::NvlinkCrcFlitDelta)
                    + g(Col::NvlinkCrcDataDelta)
                    + g(Col::NvlinkReplayDelta)
                    + g(Col::NvlinkRecoveryDelta)
            }
            Signal::Pcie => g(Col::PcieReplayDelta),
            // (The feature stage's residual: its usual level per phase is
            // what the peer signal takes out; the test itself reads the
            // GPU's own fit, see `fit`.)
            Signal::Thermal => f64::from(row.get(Col::GpuTempResid)),
            // (The temperature above what the GPU's load and air predict,
            // like `Thermal`; the group's median of the same is taken out
            // when the bucket is judged, see `change_peers`: the model's
            // common error in this workload and room cancels.)
            Signal::ThermalPeer => f64::from(row.get(Col::GpuTempResid)),
        }
    }

    pub(super) fn signal_name(self) -> &'static str {
        match self {
            Signal::Ecc => "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            Signal::Nvlink => "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            Signal::Pcie => "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            Signal::Thermal | Signal::ThermalPeer => "DCGM_FI_DEV_GPU_TEMP",
        }
    }

    /// The risk at the warning threshold: the shipped alert policy's
    /// `fire_at` of the signal's kind, so a warning fires where the
    /// budget puts it (detector's `tests/hold_levels.rs` checks them
    /// against the policy).
    pub const fn warn_risk(self) -> f32 {
        match self {
            Signal::Ecc => 0.6,
            Signal::Nvlink | Signal::Pcie | Signal::Thermal | Signal::ThermalPeer => 0.5,
        }
    }

    /// Evidence the signal needs beyond the shared warning threshold: the
    /// peer test warns at twice the others' odds (half their share of
    /// the false-warning budget), since it shares a kind with `Thermal`.
    pub(super) fn extra_evidence(self) -> f64 {
        if self == Signal::ThermalPeer {
            std::f64::consts::LN_2
        } else {
            0.0
        }
    }

    /// The smallest spread of a gauge's bucket means, °C.
    pub(super) fn min_sd(self, cfg: &ChangeConfig) -> f64 {
        if self == Signal::ThermalPeer {
            PEER_MIN_SD
        } else {
            cfg.min_sd
        }
    }

    /// Hours of a phase a gauge's baseline has seen before its buckets
    /// are judged against it.
    pub(super) fn judged_after_h(self) -> f64 {
        if self == Signal::ThermalPeer {
            PEER_WARM_H
        } else {
            1.0
        }
    }

    /// The weight, hours, a judged gauge baseline counts at least: the
    /// peer difference starts from a known place (like its peers), so
    /// after its first half hour it weighs 6 h.
    pub(super) fn baseline_floor_h(self) -> f64 {
        if self == Signal::ThermalPeer {
            PEER_BASE_H
        } else {
            0.0
        }
    }

    /// Hours of baseline before the signal is judged. The peer signal
    /// starts from a known place (like its peers), so half an hour of a
    /// phase is enough: see [`PEER_WARM_H`].
    pub(super) fn warm_up_h(self, cfg: &ChangeConfig) -> f64 {
        match self {
            Signal::ThermalPeer => PEER_WARM_H,
            Signal::Thermal => THERMAL_WARM_H,
            _ => cfg.warm_up_h,
        }
    }
}
