//! The DCGM fields forewarn understands: one enum variant per field, with the
//! name dcgm-exporter writes, the old `--use-old-namespace` name, DCGM's newer
//! canonical name, and whether the value is a gauge, a cumulative counter or a
//! state flag.
//!
//! Everything downstream (samples, features, Parquet columns, attribution)
//! indexes metrics by `Field as usize`, so the order here is part of the
//! feature-schema version: append new fields at the end only.
//!
//! Names and semantics come from NVIDIA DCGM `dcgm_fields.h` (see
//! `shared/reference/dcgm/health-fields.md`) and dcgm-exporter's counter lists.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use crate::hash::FxBuild;

/// How a field's value behaves over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FieldKind {
    /// An instantaneous reading (temperature, power, utilization).
    Gauge,
    /// A cumulative total that only grows until the driver resets it.
    Counter,
    /// A flag or code: its change is the event (XID, remap pending).
    State,
}

macro_rules! fields {
    ($( $variant:ident => $name:literal, $kind:ident, [$($alias:literal),*] ;)*) => {
        /// A known DCGM field. `Field as usize` indexes metric arrays.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[repr(u8)]
        pub enum Field { $($variant,)* }

        impl Field {
            /// Every field, in index order.
            pub const ALL: &'static [Field] = &[$(Field::$variant,)*];

            /// The name dcgm-exporter and the native JSON format use.
            pub const fn name(self) -> &'static str {
                match self { $(Field::$variant => $name,)* }
            }

            /// Gauge, counter or state.
            pub const fn kind(self) -> FieldKind {
                match self { $(Field::$variant => FieldKind::$kind,)* }
            }

            /// Every accepted name (primary and aliases) with its field.
            const NAMES: &'static [(&'static str, Field)] = &[
                $(($name, Field::$variant), $(($alias, Field::$variant),)*)*
            ];
        }
    };
}

fields! {
    GpuTemp => "DCGM_FI_DEV_GPU_TEMP", Gauge, ["dcgm_gpu_temp", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"];
    MemoryTemp => "DCGM_FI_DEV_MEMORY_TEMP", Gauge, ["dcgm_memory_temp", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS"];
    PowerUsage => "DCGM_FI_DEV_POWER_USAGE", Gauge, ["dcgm_power_usage", "DCGM_FI_DEV_BOARD_POWER_WATTS"];
    PowerLimit => "DCGM_FI_DEV_POWER_MGMT_LIMIT", Gauge, ["dcgm_power_mgmt_limit"];
    GpuUtil => "DCGM_FI_DEV_GPU_UTIL", Gauge, ["dcgm_gpu_utilization", "DCGM_FI_DEV_GPU_UTIL_RATIO"];
    MemCopyUtil => "DCGM_FI_DEV_MEM_COPY_UTIL", Gauge, ["dcgm_mem_copy_utilization"];
    EncUtil => "DCGM_FI_DEV_ENC_UTIL", Gauge, ["dcgm_enc_utilization"];
    DecUtil => "DCGM_FI_DEV_DEC_UTIL", Gauge, ["dcgm_dec_utilization"];
    SmClock => "DCGM_FI_DEV_SM_CLOCK", Gauge, ["dcgm_sm_clock"];
    MemClock => "DCGM_FI_DEV_MEM_CLOCK", Gauge, ["dcgm_memory_clock"];
    FbFree => "DCGM_FI_DEV_FB_FREE", Gauge, ["dcgm_fb_free"];
    FbUsed => "DCGM_FI_DEV_FB_USED", Gauge, ["dcgm_fb_used"];
    FbReserved => "DCGM_FI_DEV_FB_RESERVED", Gauge, [];
    FanSpeed => "DCGM_FI_DEV_FAN_SPEED", Gauge, ["dcgm_fan_speed"];
    ClocksEventReasons => "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", State, ["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "dcgm_clock_throttle_reasons"];
    XidErrors => "DCGM_FI_DEV_XID_ERRORS", State, ["dcgm_xid_errors", "DCGM_FI_DEV_XID_ERROR"];
    EccSbeVolTotal => "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", Counter, ["dcgm_ecc_sbe_volatile_total"];
    EccDbeVolTotal => "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", Counter, ["dcgm_ecc_dbe_volatile_total"];
    EccSbeAggTotal => "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", Counter, ["dcgm_ecc_sbe_aggregate_total"];
    EccDbeAggTotal => "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", Counter, ["dcgm_ecc_dbe_aggregate_total"];
    RetiredSbe => "DCGM_FI_DEV_RETIRED_SBE", Counter, ["dcgm_retired_pages_sbe", "DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL"];
    RetiredDbe => "DCGM_FI_DEV_RETIRED_DBE", Counter, ["dcgm_retired_pages_dbe", "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL"];
    RetiredPending => "DCGM_FI_DEV_RETIRED_PENDING", State, ["dcgm_retired_pages_pending", "DCGM_FI_DEV_PAGE_RETIRED_PENDING"];
    CorrectableRemappedRows => "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", Counter, ["DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL"];
    UncorrectableRemappedRows => "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", Counter, ["DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL"];
    RowRemapFailure => "DCGM_FI_DEV_ROW_REMAP_FAILURE", State, ["DCGM_FI_DEV_ROW_REMAP_FAILED"];
    RowRemapPending => "DCGM_FI_DEV_ROW_REMAP_PENDING", State, [];
    PcieReplayCounter => "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", Counter, ["dcgm_pcie_replay_counter", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL"];
    NvlinkCrcFlitErrors => "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", Counter, ["dcgm_nvlink_flit_crc_error_count_total", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL"];
    NvlinkCrcDataErrors => "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", Counter, ["dcgm_nvlink_data_crc_error_count_total", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL"];
    NvlinkReplayErrors => "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", Counter, ["dcgm_nvlink_replay_error_count_total", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL"];
    NvlinkRecoveryErrors => "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", Counter, ["dcgm_nvlink_recovery_error_count_total", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL"];
    NvlinkBandwidthTotal => "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", Counter, ["dcgm_nvlink_bandwidth_total"];
    PowerViolation => "DCGM_FI_DEV_POWER_VIOLATION", Counter, ["dcgm_power_violation"];
    ThermalViolation => "DCGM_FI_DEV_THERMAL_VIOLATION", Counter, ["dcgm_thermal_violation"];
    SyncBoostViolation => "DCGM_FI_DEV_SYNC_BOOST_VIOLATION", Counter, ["dcgm_sync_boost_violation"];
    BoardLimitViolation => "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", Counter, ["dcgm_board_limit_violation"];
    LowUtilViolation => "DCGM_FI_DEV_LOW_UTIL_VIOLATION", Counter, ["dcgm_low_util_violation"];
    ReliabilityViolation => "DCGM_FI_DEV_RELIABILITY_VIOLATION", Counter, ["dcgm_reliability_violation"];
    TotalEnergy => "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Counter, ["dcgm_total_energy_consumption"];
    GrEngineActive => "DCGM_FI_PROF_GR_ENGINE_ACTIVE", Gauge, ["dcgm_fi_prof_gr_engine_active"];
    SmActive => "DCGM_FI_PROF_SM_ACTIVE", Gauge, ["dcgm_fi_prof_sm_active"];
    SmOccupancy => "DCGM_FI_PROF_SM_OCCUPANCY", Gauge, ["dcgm_fi_prof_sm_occupancy"];
    TensorActive => "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", Gauge, ["dcgm_fi_prof_pipe_tensor_active"];
    DramActive => "DCGM_FI_PROF_DRAM_ACTIVE", Gauge, ["dcgm_fi_prof_dram_active"];
    PcieTxBytes => "DCGM_FI_PROF_PCIE_TX_BYTES", Gauge, ["dcgm_fi_prof_pcie_tx_bytes"];
    PcieRxBytes => "DCGM_FI_PROF_PCIE_RX_BYTES", Gauge, ["dcgm_fi_prof_pcie_rx_bytes"];
    PcieLinkGen => "DCGM_FI_DEV_PCIE_LINK_GEN", Gauge, [];
    PcieLinkWidth => "DCGM_FI_DEV_PCIE_LINK_WIDTH", Gauge, [];
}

/// Number of known fields; the length of every metric array.
pub const FIELD_COUNT: usize = Field::ALL.len();
const _: () = assert!(FIELD_COUNT <= 64, "metric presence is a u64 bitmask");

type NameTable = HashMap<&'static str, Field, FxBuild>;

fn name_table() -> &'static NameTable {
    static TABLE: OnceLock<NameTable> = OnceLock::new();
    TABLE.get_or_init(|| Field::NAMES.iter().copied().collect())
}

impl Field {
    /// Looks a field up by its dcgm-exporter name, its old-namespace name or
    /// its canonical DCGM name. Exact, case-sensitive match.
    pub fn from_name(name: &str) -> Option<Field> {
        name_table().get(name).copied()
    }

    /// Index into metric arrays.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The field at `index`, if any.
    pub fn from_index(index: usize) -> Option<Field> {
        Field::ALL.get(index).copied()
    }
}

impl std::fmt::Display for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_indices_are_dense() {
        for (i, f) in Field::ALL.iter().enumerate() {
            assert_eq!(f.index(), i);
            assert_eq!(Field::from_name(f.name()), Some(*f));
            assert_eq!(Field::from_index(i), Some(*f));
        }
    }

    #[test]
    fn aliases_resolve() {
        assert_eq!(Field::from_name("dcgm_gpu_temp"), Some(Field::GpuTemp));
        assert_eq!(
            Field::from_name("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL"),
            Some(Field::CorrectableRemappedRows)
        );
        assert_eq!(Field::from_name("DCGM_FI_DEV_NOPE"), None);
    }
}
