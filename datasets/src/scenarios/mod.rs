//! # The scenario suite
//!
//! Named, seeded simulator runs that `forewarn evaluate --scenario` scores
//! the live pipeline against: each is a [`SimConfig`] (so telemetry and its
//! ground truth — [`FailureLabel`]s, benign [`SimEvent`]s, GPU identities —
//! come from the [`Simulator`]) plus what the evaluator should expect of it
//! ([`Expect`]).
//!
//! Every scenario has a full size and a reduced size (`reduced = true`, for
//! CI); the seed shifts every random choice, so a scenario can be tuned on
//! some seeds and judged on others. Sizes (GPUs × hours at 30 s samples):
//!
//! | scenario | full | reduced |
//! |---|---|---|
//! | `quiet` | 256 × 72 h (768 GPU-days) | 64 × 24 h |
//! | `hbm_ecc`, `thermal`, `nvlink`, `pcie`, `sudden_death`, `straggler` | 128 × 48 h, 0.04 failures / GPU-day | 64 × 30 h |
//! | `mixed_month` | 128 × 30 days (3,840 GPU-days) | 64 × 4 days |
//! | `rack_cooling` | 128 × 12 h | 64 × 8 h |
//! | `ambient_change` | 256 × 24 h | 64 × 12 h |
//! | `driver_reload_wave`, `app_xid_storm` | 128 × 12 h | 64 × 8 h |
//! | `dirty_stream` | 128 × 48 h, mixed failures, dirty data | 64 × 24 h |
//! | `replacement` | 128 × 36 h | 64 × 24 h |
//! | `random_precursors` | 256 × 96 h, `gpus / 32` failures of each GPU mode | 96 × 48 h |
//!
//! The mixed month is scaled down in GPUs, not in time: 128 GPUs over 30
//! days keep the month's slow processes (HBM precursors of up to two days,
//! week-long jobs, rack incidents at ~1 per 50 rack-days) at a run time of
//! a few minutes.
//!
//! `random_precursors` (issue #29) is not in [`suite`]: precursors of
//! random onset, shape and size, for tuning detection on seeds 1–3 and
//! judging it on seeds from 100 that are held back until the code is final.

use crate::simulator::{FailureKind, Scenario, SimConfig};

/// What a scenario is for: which targets the evaluator checks on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Benign only: every page is false.
    Quiet,
    /// Labelled failures (recall, lead time, false pages).
    Failures,
    /// One rack cooling incident: one rack-scope page.
    RackIncident,
    /// Benign events that must give no page at all (XID storm, reload
    /// wave, ambient change).
    NoPages,
    /// Newcomers degrading beside incumbent twins.
    Replacement,
}

/// One named scenario at one seed and size.
#[derive(Debug, Clone)]
pub struct ScenarioRun {
    pub name: &'static str,
    pub about: &'static str,
    pub expect: Expect,
    pub config: SimConfig,
}

/// Every scenario name, in suite order.
pub const NAMES: [&str; 16] = [
    "quiet",
    "hbm_ecc",
    "thermal",
    "nvlink",
    "pcie",
    "sudden_death",
    "straggler",
    "mixed_month",
    "rack_cooling",
    "ambient_change",
    "driver_reload_wave",
    "app_xid_storm",
    "dirty_stream",
    "replacement",
    "mixed_day",
    "random_precursors",
];

/// Scenarios that `suite` leaves out: the smoke test, and the
/// randomised-precursor family (issue #29: scored on its own, tuning seeds
/// 1–3, seeds from 100 held back; not in the nine targets' suite).
pub const NOT_IN_SUITE: [&str; 2] = ["mixed_day", "random_precursors"];

/// Failure rate of the single-mode scenarios: enough failures in 128 GPUs
/// × 48 h (~10) to measure recall per kind.
const SINGLE_MODE_RATE: f64 = 0.04;

/// The scenario `name` at `seed`, full or reduced size; `None` for an
/// unknown name.
pub fn scenario(name: &str, seed: u64, reduced: bool) -> Option<ScenarioRun> {
    let size = |full: (usize, f64), small: (usize, f64)| if reduced { small } else { full };
    let single = |kind: FailureKind| {
        (
            Scenario::Only(kind),
            size((128, 48.0), (64, 30.0)),
            SINGLE_MODE_RATE,
        )
    };
    let (about, expect, (scenario, (gpus, hours), rate), dirty) = match name {
        "quiet" => (
            "no failures: jobs, checkpoints, idle gaps, app XIDs, reloads, maintenance",
            Expect::Quiet,
            (Scenario::Quiet, size((256, 72.0), (64, 24.0)), 0.0),
            false,
        ),
        "hbm_ecc" => (
            "HBM degradation alone",
            Expect::Failures,
            single(FailureKind::HbmEcc),
            false,
        ),
        "thermal" => (
            "cooling-path degradation alone",
            Expect::Failures,
            single(FailureKind::Thermal),
            false,
        ),
        "nvlink" => (
            "NVLink degradation alone",
            Expect::Failures,
            single(FailureKind::Nvlink),
            false,
        ),
        "pcie" => (
            "PCIe link degradation alone",
            Expect::Failures,
            single(FailureKind::Pcie),
            false,
        ),
        "sudden_death" => (
            "GPUs that stop reporting with no precursor",
            Expect::Failures,
            single(FailureKind::SuddenDeath),
            false,
        ),
        "straggler" => (
            "GPUs slower than their training-job peers",
            Expect::Failures,
            single(FailureKind::Straggler),
            false,
        ),
        "mixed_month" => (
            "every failure mode and rack incidents at the fleet's rate, 30 days",
            Expect::Failures,
            (Scenario::Mixed, size((128, 720.0), (64, 96.0)), 0.006),
            false,
        ),
        "mixed_day" => (
            "every failure mode at 5x the fleet's rate, one day (smoke test)",
            Expect::Failures,
            (Scenario::Mixed, size((128, 24.0), (64, 24.0)), 0.03),
            false,
        ),
        "rack_cooling" => (
            "one rack's inlet air heats 8-14 °C for 1-2 h",
            Expect::RackIncident,
            (Scenario::RackCooling, size((128, 12.0), (64, 8.0)), 0.0),
            false,
        ),
        "ambient_change" => (
            "the whole fleet's inlet air warms 4-7 °C and stays",
            Expect::NoPages,
            (Scenario::AmbientChange, size((256, 24.0), (64, 12.0)), 0.0),
            false,
        ),
        "driver_reload_wave" => (
            "every host reloads its driver within two hours",
            Expect::NoPages,
            (
                Scenario::DriverReloadWave,
                size((128, 12.0), (64, 8.0)),
                0.0,
            ),
            false,
        ),
        "app_xid_storm" => (
            "every job takes application XIDs on all its GPUs",
            Expect::NoPages,
            (Scenario::AppXidStorm, size((128, 12.0), (64, 8.0)), 0.0),
            false,
        ),
        "dirty_stream" => (
            "mixed failures through drops, duplicates, reorders and malformed messages",
            Expect::Failures,
            (Scenario::Mixed, size((128, 48.0), (64, 24.0)), 0.02),
            true,
        ),
        "replacement" => (
            "GPUs replaced by new UUIDs mid-run; newcomers degrade beside incumbent twins",
            Expect::Replacement,
            (Scenario::Replacement, size((128, 36.0), (64, 24.0)), 0.0),
            false,
        ),
        "random_precursors" => (
            "every mode with randomised precursors (onset 2-48 h, exponential / linear / \
             step / bursty, amplitudes down to background), per-GPU background rates over \
             100x, mixed SKUs",
            Expect::Failures,
            (
                Scenario::RandomPrecursors,
                size((256, 96.0), (96, 48.0)),
                0.0,
            ),
            false,
        ),
        _ => return None,
    };
    let name = NAMES.iter().copied().find(|n| *n == name)?;
    Some(ScenarioRun {
        name,
        about,
        expect,
        config: SimConfig {
            gpus,
            hours,
            seed: scenario_seed(name, seed),
            failure_rate_per_gpu_day: rate,
            dirty,
            scenario,
            // One rack per cluster: even a small fleet mixes the three SKUs.
            racks_per_cluster: if scenario == Scenario::RandomPrecursors {
                1
            } else {
                SimConfig::default().racks_per_cluster
            },
            ..SimConfig::default()
        },
    })
}

/// The suite: every scenario except [`NOT_IN_SUITE`]'s (the mixed month
/// covers the `mixed_day` smoke test).
pub fn suite(seed: u64, reduced: bool) -> Vec<ScenarioRun> {
    NAMES
        .iter()
        .filter(|n| !NOT_IN_SUITE.contains(n))
        .filter_map(|n| scenario(n, seed, reduced))
        .collect()
}

/// Each scenario draws from its own seed, so two scenarios at one suite
/// seed do not share a fleet: FNV-1a of the name mixed with the seed.
pub fn scenario_seed(name: &str, seed: u64) -> u64 {
    features::hash::fnv1a(name.as_bytes()) ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

#[cfg(test)]
mod tests;
