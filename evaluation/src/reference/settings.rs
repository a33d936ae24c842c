//! What the reference watches and how: the counters and the temperature
//! statistic it keeps per GPU, and its settings.
//!
//! Part of the hindsight reference (`reference/`): a leaf that the
//! reference and its per-GPU watch (`watch`) both read.

use features::Field;

use super::cusum::TempSettings;

/// The counters watched by a Poisson CUSUM each, with their names.
pub const COUNTERS: [(Field, &str); 6] = [
    (Field::EccSbeAggTotal, "ecc_sbe"),
    (Field::PcieReplayCounter, "pcie_replay"),
    (Field::NvlinkCrcFlitErrors, "nvlink_crc_flit"),
    (Field::NvlinkCrcDataErrors, "nvlink_crc_data"),
    (Field::NvlinkReplayErrors, "nvlink_replay"),
    (Field::NvlinkRecoveryErrors, "nvlink_recovery"),
];
/// The temperature statistic's index, after the counters'.
pub const TEMP: usize = COUNTERS.len();
/// Statistics per GPU.
pub const STATS: usize = COUNTERS.len() + 1;

/// The name of statistic `i`.
pub fn stat_name(i: usize) -> &'static str {
    COUNTERS.get(i).map_or("temp_vs_peers", |c| c.1)
}

/// The reference's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The rate rise each Poisson CUSUM is tuned to detect (λ1 = ρ·λ0).
    pub rho: f64,
    /// The least background rate assumed, events per GPU-hour (a counter
    /// that never moves on a healthy GPU).
    pub lambda_floor_per_h: f64,
    pub temp: TempSettings,
    /// The pipeline's warm-up, for the scoring's ≥ 1 h eligibility (the
    /// same rule as `forewarn evaluate`'s).
    pub warm_up_ms: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            rho: 32.0,
            lambda_floor_per_h: 1e-3,
            temp: TempSettings::default(),
            warm_up_ms: 3_600_000,
        }
    }
}
