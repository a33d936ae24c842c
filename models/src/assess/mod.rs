//! GPU assessment: one [`FeatureRow`] (plus the feature stage's events) →
//! one [`Assessment`]: a risk in [0, 1], a state, the cause (`kind`) and the
//! reasons an operator acts on.
//!
//! Components, each a risk in [0, 1] for one alert kind:
//! - hard-failure rules ([`rules`]): double-bit ECC, uncontained or fatal
//!   XIDs, row-remap failure, a GPU that stopped reporting;
//! - degradation signals ([`rules`]): memory-error rates and remaps, thermal
//!   residual, NVLink / PCIe error rates, straggling behind job peers;
//! - change tests on the same signals ([`change`]): a GPU departing from
//!   its own baseline, thresholds from the alert budgets;
//! - a hot reading under load held through idle spells
//!   ([`thermal_hold`]): idle is no news about the cooling;
//! - a PCIe link narrower than the GPU has run at ([`link`]);
//! - readings that stopped changing while samples keep coming
//!   ([`frozen`]): an exporter repeating its last sample, a stuck sensor;
//! - the anomaly grade of a streaming random cut forest over the
//!   workload-aware columns ([`anomaly`]).
//!
//! - the supervised failure model's calibrated probability and the
//!   memory-error trend forecast's ETA ([`predict`]).
//!
//! Risk is the strongest component (the components already read the same
//! signals, so adding them would count evidence twice); the state follows
//! from the risk, and reasons are ranked by their component's risk.

pub mod anomaly;
pub mod anomaly_repeat;
pub mod change;
pub mod frozen;
pub mod link;
pub mod predict;
pub mod rules;
pub mod thermal_hold;

use features::{FeatureRow, Topology};
use serde::{Deserialize, Serialize};

/// Alert kinds forewarn raises for a GPU: stable machine names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Failing now: DBE, fatal XID, remap failure.
    HardFailure,
    /// Stopped reporting while the fleet goes on.
    GpuLost,
    /// HBM degrading: correctable ECC rate, remapped rows.
    HbmEccTrend,
    /// Hotter than expected at this load.
    ThermalDegradation,
    NvlinkErrors,
    PcieErrors,
    /// Slower than its job peers.
    Straggler,
    /// Unlike itself and its peers, by the random cut forest; or its
    /// readings froze ([`frozen`]).
    Anomaly,
    /// The supervised failure model expects a failure within its horizon
    /// and no degradation signal corroborates a cause.
    FailurePredicted,
}

/// How many kinds there are: the length of [`Assessment::components`].
pub const KINDS: usize = 9;

impl Kind {
    pub const ALL: [Kind; KINDS] = [
        Kind::HardFailure,
        Kind::GpuLost,
        Kind::HbmEccTrend,
        Kind::ThermalDegradation,
        Kind::NvlinkErrors,
        Kind::PcieErrors,
        Kind::Straggler,
        Kind::Anomaly,
        Kind::FailurePredicted,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::HardFailure => "gpu_hard_failure",
            Kind::GpuLost => "gpu_lost",
            Kind::HbmEccTrend => "hbm_ecc_trend",
            Kind::ThermalDegradation => "thermal_degradation",
            Kind::NvlinkErrors => "nvlink_errors",
            Kind::PcieErrors => "pcie_errors",
            Kind::Straggler => "straggler",
            Kind::Anomaly => "anomaly",
            Kind::FailurePredicted => "failure_predicted",
        }
    }

    /// Hard failures page; degradations warn until they are near certain.
    pub const fn pages_at(self) -> f64 {
        match self {
            Kind::HardFailure | Kind::GpuLost => 0.5,
            Kind::HbmEccTrend => 0.85,
            _ => 2.0, // never: a channel, not a pager
        }
    }

    pub fn from_index(i: usize) -> Option<Kind> {
        Kind::ALL.get(i).copied()
    }
}

/// Operator-facing health states, by risk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    Healthy,
    Watch,
    Degraded,
    Failing,
    /// Not reporting.
    Silent,
}

impl HealthState {
    pub fn from_risk(risk: f64) -> Self {
        match risk {
            r if r >= 0.85 => HealthState::Failing,
            r if r >= 0.6 => HealthState::Degraded,
            r if r >= 0.3 => HealthState::Watch,
            _ => HealthState::Healthy,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            HealthState::Healthy => "healthy",
            HealthState::Watch => "watch",
            HealthState::Degraded => "degraded",
            HealthState::Failing => "failing",
            HealthState::Silent => "silent",
        }
    }
}

/// One piece of evidence, in the alert contract's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub signal: String,
    pub detail: String,
}

/// What the models say about one GPU at one event time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    pub ts_ms: i64,
    pub gpu: features::GpuId,
    #[serde(skip)]
    pub topo: Topology,
    pub risk: f64,
    pub state: HealthState,
    /// The strongest component's kind.
    pub kind: Kind,
    /// Risk per kind, indexed like [`Kind::ALL`].
    pub components: [f32; KINDS],
    /// Calibrated anomaly grade of the forest.
    pub anomaly_grade: f32,
    pub eta_hours: Option<f64>,
    /// Evidence of the strongest component first.
    pub reasons: Vec<Evidence>,
    /// Kinds (bit `k` for `Kind::ALL[k]`) whose component is a change
    /// test's risk past its warning threshold and nothing stronger: the
    /// test's statistic is evidence held over time already, so the alert
    /// stage fires it without waiting out the kind's `for` (which stays
    /// for level readings, one sample of which proves little).
    #[serde(default)]
    pub confirmed: u16,
}

impl Assessment {
    pub fn component(&self, k: Kind) -> f64 {
        f64::from(self.components[k as usize])
    }

    /// Marks the kinds whose component is no more than what the change
    /// tests past their threshold gave it (`crossed`, per kind; see
    /// [`change::ChangeDetector::assess`]).
    pub fn confirm(&mut self, crossed: &[f32; KINDS]) {
        self.confirmed = 0;
        for (i, (c, x)) in self.components.iter().zip(crossed).enumerate() {
            if *x > 0.0 && c <= x {
                self.confirmed |= 1 << i;
            }
        }
    }

    /// Whether kind `k`'s component is confirmed ([`Self::confirmed`]).
    pub fn is_confirmed(&self, k: Kind) -> bool {
        self.confirmed >> (k as u16) & 1 == 1
    }
}

/// Fuses component risks into an assessment. `reasons[k]` holds the
/// evidence of component `k`; `crossed`, per kind, the risk of the
/// change tests past their warning threshold ([`Assessment::confirm`]).
pub fn fuse(
    row: &FeatureRow,
    components: [f32; KINDS],
    mut reasons: Vec<(Kind, Evidence)>,
    grade: f32,
    eta_hours: Option<f64>,
    crossed: &[f32; KINDS],
) -> Assessment {
    let (best, risk) =
        components.iter().enumerate().fold(
            (0, 0.0f32),
            |(bi, bv), (i, v)| if *v > bv { (i, *v) } else { (bi, bv) },
        );
    let kind = Kind::from_index(best).unwrap_or(Kind::Anomaly);
    // Strongest component's evidence first, then the others by their risk.
    reasons.sort_by(|a, b| {
        let ka = if a.0 == kind {
            f32::INFINITY
        } else {
            components[a.0 as usize]
        };
        let kb = if b.0 == kind {
            f32::INFINITY
        } else {
            components[b.0 as usize]
        };
        kb.total_cmp(&ka)
    });
    let risk = f64::from(risk);
    let mut a = Assessment {
        ts_ms: row.ts_ms,
        gpu: row.gpu.clone(),
        topo: row.topo.clone(),
        risk,
        state: HealthState::from_risk(risk),
        kind,
        components,
        anomaly_grade: grade,
        eta_hours: if kind == Kind::HbmEccTrend {
            eta_hours
        } else {
            None
        },
        reasons: reasons.into_iter().map(|(_, e)| e).collect(),
        confirmed: 0,
    };
    a.confirm(crossed);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_component_the_change_tests_drive_is_confirmed() {
        let mut components = [0.0f32; KINDS];
        components[Kind::PcieErrors as usize] = 0.55;
        components[Kind::HbmEccTrend as usize] = 0.9;
        components[Kind::NvlinkErrors as usize] = 0.3;
        let mut a = Assessment {
            ts_ms: 0,
            gpu: "GPU-a".into(),
            topo: Topology::default(),
            risk: 0.9,
            state: HealthState::Failing,
            kind: Kind::HbmEccTrend,
            components,
            anomaly_grade: 0.0,
            eta_hours: None,
            reasons: Vec::new(),
            confirmed: 0,
        };
        let mut crossed = [0.0f32; KINDS];
        crossed[Kind::PcieErrors as usize] = 0.55;
        // A level reading at page level beside a test just past warning:
        // the page is the reading's, and waits out `for`.
        crossed[Kind::HbmEccTrend as usize] = 0.6;
        a.confirm(&crossed);
        assert!(a.is_confirmed(Kind::PcieErrors));
        assert!(!a.is_confirmed(Kind::HbmEccTrend));
        assert!(!a.is_confirmed(Kind::NvlinkErrors));
        a.confirm(&[0.0; KINDS]);
        assert_eq!(a.confirmed, 0);
    }
}
