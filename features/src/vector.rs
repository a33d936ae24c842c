//! The feature vector: a fixed, versioned layout with one name per column,
//! shared by the models, the Parquet exports and attribution. The output of
//! the feature stage, one [`FeatureRow`] per accepted sample.
//!
//! Columns are `f32`; NaN means missing (never zero). Append new columns at
//! the end and bump [`FEATURE_SCHEMA_VERSION`] on any change: trained models
//! and exported files name the version they were built with.

use crate::phase::Phase;
use crate::sample::{GpuId, Topology};

/// Version of the column layout below.
pub const FEATURE_SCHEMA_VERSION: u32 = 2;

macro_rules! columns {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal; )*) => {
        /// A column of the feature vector; `Col as usize` indexes
        /// [`FeatureRow::values`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Col { $( $(#[$doc])* $variant, )* }

        /// Number of feature columns.
        pub const FEATURE_COUNT: usize = [$($name,)*].len();

        /// The name of every column, in column order.
        pub const FEATURE_NAMES: [&str; FEATURE_COUNT] = [$($name,)*];

        impl Col {
            /// Every column, in order.
            pub const ALL: [Col; FEATURE_COUNT] = [$(Col::$variant,)*];
        }
    };
}

columns! {
    // Last values of gauges (carried forward for a sample or two when absent).
    /// °C.
    GpuTemp => "gpu_temp";
    /// HBM temperature, °C.
    MemoryTemp => "memory_temp";
    PowerW => "power_w";
    /// Power over the management limit, 0..1.
    PowerFrac => "power_frac";
    /// Percent.
    GpuUtil => "gpu_util";
    MemCopyUtil => "mem_copy_util";
    SmClock => "sm_clock_mhz";
    MemClock => "mem_clock_mhz";
    /// Used / (used + free + reserved).
    FbUsedFrac => "fb_used_frac";
    SmActive => "sm_active";
    TensorActive => "tensor_active";
    DramActive => "dram_active";
    PcieLinkGen => "pcie_link_gen";
    PcieLinkWidth => "pcie_link_width";
    // Flags decoded from state fields (0 / 1).
    /// SW power cap or HW power brake (clock event reasons 0x4 | 0x80).
    ThrottlePower => "throttle_power";
    /// SW or HW thermal slowdown (0x20 | 0x40).
    ThrottleThermal => "throttle_thermal";
    /// HW slowdown (0x8).
    ThrottleHwSlowdown => "throttle_hw_slowdown";
    RetiredPending => "retired_pending";
    RowRemapPending => "row_remap_pending";
    RowRemapFailure => "row_remap_failure";
    // Smoothed.
    GpuTempEwma => "gpu_temp_ewma";
    /// Power smoothed with the thermal time constant.
    PowerEwma => "power_w_ewma";
    // Per-interval deltas of error counters (NaN at a reset).
    EccSbeDelta => "ecc_sbe_delta";
    EccDbeDelta => "ecc_dbe_delta";
    RetiredSbeDelta => "retired_sbe_delta";
    RetiredDbeDelta => "retired_dbe_delta";
    RemapCorrDelta => "remap_corr_delta";
    RemapUncorrDelta => "remap_uncorr_delta";
    PcieReplayDelta => "pcie_replay_delta";
    NvlinkCrcFlitDelta => "nvlink_crc_flit_delta";
    NvlinkCrcDataDelta => "nvlink_crc_data_delta";
    NvlinkReplayDelta => "nvlink_replay_delta";
    NvlinkRecoveryDelta => "nvlink_recovery_delta";
    // Rates (never negative; NaN at a reset).
    EccSbeRate => "ecc_sbe_rate_per_h";
    EccDbeRate => "ecc_dbe_rate_per_h";
    RetiredSbeRate => "retired_sbe_rate_per_h";
    RetiredDbeRate => "retired_dbe_rate_per_h";
    RemapCorrRate => "remap_corr_rate_per_h";
    RemapUncorrRate => "remap_uncorr_rate_per_h";
    PcieReplayRate => "pcie_replay_rate_per_h";
    NvlinkCrcFlitRate => "nvlink_crc_flit_rate_per_h";
    NvlinkCrcDataRate => "nvlink_crc_data_rate_per_h";
    NvlinkReplayRate => "nvlink_replay_rate_per_h";
    NvlinkRecoveryRate => "nvlink_recovery_rate_per_h";
    /// Fraction of the interval spent power-throttled.
    PowerViolationFrac => "power_violation_frac";
    ThermalViolationFrac => "thermal_violation_frac";
    /// Mean power from the energy counter, W.
    EnergyPowerW => "energy_power_w";
    // Totals, for trend models (ETA to the remap / retirement limit).
    EccSbeAggTotal => "ecc_sbe_agg_total";
    EccDbeAggTotal => "ecc_dbe_agg_total";
    /// Retired pages, SBE + DBE.
    RetiredPagesTotal => "retired_pages_total";
    RemapCorrTotal => "remap_corr_total";
    RemapUncorrTotal => "remap_uncorr_total";
    // Events: decayed counts over about the last hour.
    /// Seconds since this GPU's previous accepted sample.
    IntervalS => "interval_s";
    CounterResets1h => "counter_resets_1h";
    Gaps1h => "gaps_1h";
    XidHw1h => "xid_hw_1h";
    XidApp1h => "xid_app_1h";
    XidUnknown1h => "xid_unknown_1h";
    /// Application XIDs judged to be this GPU's fault (its job was clean).
    XidAppSolo1h => "xid_app_solo_1h";
    /// Application XIDs judged to be the job's fault.
    XidAppJob1h => "xid_app_job_1h";
    /// The last XID code reported (0 = none).
    LastXid => "last_xid";
    // Workload phase.
    /// 0 idle, 1 light, 2 training, 3 inference.
    PhaseCode => "phase";
    PhaseAgeS => "phase_age_s";
    PhaseChanges1h => "phase_changes_1h";
    // Expected vs actual (per-SKU, per-phase online regressions).
    /// Mean temperature of the host's other GPUs in the last bucket, °C.
    InletProxy => "inlet_proxy_temp";
    GpuTempExpected => "gpu_temp_expected";
    /// Actual minus expected, °C.
    GpuTempResid => "gpu_temp_resid";
    /// The residual smoothed over ~10 min: slow thermal degradation.
    GpuTempResidEwma => "gpu_temp_resid_ewma";
    MemoryTempResid => "memory_temp_resid";
    /// MHz below (negative) or above the clock expected at this load.
    SmClockResid => "sm_clock_resid";
    /// W above (positive) the power expected at this utilization.
    PowerResid => "power_resid";
    // Peers: robust z-scores against the cohort's median / MAD.
    /// 0 job, 1 host + SKU, 2 rack + SKU, 3 fleet SKU; NaN when no cohort.
    PeerLevel => "peer_level";
    PeerN => "peer_n";
    GpuTempPeerZ => "gpu_temp_peer_z";
    MemoryTempPeerZ => "memory_temp_peer_z";
    PowerPeerZ => "power_peer_z";
    SmClockPeerZ => "sm_clock_peer_z";
    GpuUtilPeerZ => "gpu_util_peer_z";
    GpuTempResidPeerZ => "gpu_temp_resid_peer_z";
    SmClockResidPeerZ => "sm_clock_resid_peer_z";
    PowerResidPeerZ => "power_resid_peer_z";
    // Schema 2.
    /// °C the GPU runs above its own slow baseline of temperature given
    /// power (`expected::rack`): its air got warmer, or it did.
    AirShift => "air_shift";
}

impl Col {
    /// The column's name in exports and attribution.
    pub fn name(self) -> &'static str {
        FEATURE_NAMES[self as usize]
    }

    /// The column called `name`.
    pub fn from_name(name: &str) -> Option<Col> {
        FEATURE_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Col::ALL[i])
    }
}

/// One GPU's features at one event time.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureRow {
    pub ts_ms: i64,
    pub gpu: GpuId,
    pub topo: Topology,
    pub phase: Phase,
    /// Indexed by [`Col`]; NaN = missing.
    pub values: [f32; FEATURE_COUNT],
}

impl FeatureRow {
    /// The value of `col` (NaN when missing).
    #[inline]
    pub fn get(&self, col: Col) -> f32 {
        self.values[col as usize]
    }

    /// Bitwise equality, NaN included: for determinism checks.
    pub fn same_bits(&self, other: &FeatureRow) -> bool {
        self.ts_ms == other.ts_ms
            && self.gpu == other.gpu
            && self.topo == other.topo
            && self.phase == other.phase
            && self
                .values
                .iter()
                .zip(other.values.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, c) in Col::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert_eq!(Col::from_name(c.name()), Some(*c));
        }
        let mut names = FEATURE_NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FEATURE_COUNT);
    }
}
