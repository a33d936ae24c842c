//! Simulator configuration: what fleet to build, for how long, at which
//! sampling interval, with which failure mix ([`Scenario`]), and its
//! validation. `validate()` does no IO and names the field behind each
//! problem, so a bad `forewarn simulate` flag is reported precisely.

use thiserror::Error;

use super::failures::FailureKind;

/// 2026-11-01T00:00:00Z: the default start of a simulated run.
pub const DEFAULT_START_MS: i64 = 1_793_491_200_000;

/// Why a simulator could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimError {
    /// A config field is out of range; `field` is its name in [`SimConfig`].
    #[error("invalid simulator config: `{field}` {reason}")]
    InvalidConfig { field: &'static str, reason: String },
}

fn invalid(field: &'static str, reason: impl Into<String>) -> SimError {
    SimError::InvalidConfig {
        field,
        reason: reason.into(),
    }
}

/// Which failures and incidents a run contains. Benign look-alikes (job
/// transitions, checkpoints, driver reloads, application XIDs, maintenance,
/// ambient drift) are present in every scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Scenario {
    /// Failures of every kind at `failure_rate_per_gpu_day`, drawn from the
    /// power-law propensity, plus the occasional rack cooling incident.
    #[default]
    Mixed,
    /// No failures and no incidents: benign behaviour only (false-positive
    /// runs).
    Quiet,
    /// Only failures of this kind, at the configured rate; when none falls
    /// in the run, one is planted with its whole precursor inside the run
    /// if it fits (else failing late in the run), so that even a small run
    /// shows the mode. `Only(RackCooling)` plants one rack incident and no
    /// GPU failures.
    Only(FailureKind),
    /// One rack cooling incident and nothing else: same as
    /// `Only(FailureKind::RackCooling)`.
    RackCooling,
    /// Benign only, but every job takes at least one application XID (13, 31,
    /// 43, 45) on all of its GPUs at once.
    AppXidStorm,
    /// Benign only, plus a rolling driver upgrade: every host reloads its
    /// driver (volatile counters reset) within a two-hour window.
    DriverReloadWave,
    /// Benign only, plus a fleet-wide inlet change: at 40 % of the run every
    /// rack's inlet air warms by 4–7 °C over two hours and stays there (a
    /// chiller setpoint change, a hot day). Every GPU runs hotter at equal
    /// load, together: not a GPU failure.
    AmbientChange,
    /// GPUs replaced mid-run, and degrading newcomers: in pairs, one GPU dies
    /// suddenly and a new UUID takes its slot 30 min later; an hour after
    /// joining, the newcomer starts degrading (HBM, NVLink or PCIe). A GPU
    /// present from the start (on another host) degrades the same way on
    /// the same clock, so their detection times compare directly.
    Replacement,
    /// Failures of every GPU mode (`gpus / 32` of each) with randomised
    /// precursors: onset 2–48 h before the failure, exponential, linear,
    /// step or bursty growth, amplitudes from barely above background up;
    /// every GPU's background error rates drawn over 100×; SKUs mixed (see
    /// `random_precursors`). All of it from its own RNG stream.
    RandomPrecursors,
}

impl Scenario {
    /// The failure kind this scenario restricts to, if any.
    pub fn only_kind(self) -> Option<FailureKind> {
        match self {
            Scenario::Only(k) => Some(k),
            Scenario::RackCooling => Some(FailureKind::RackCooling),
            _ => None,
        }
    }

    /// Whether GPU failures and incidents happen at all.
    pub fn has_failures(self) -> bool {
        matches!(
            self,
            Scenario::Mixed
                | Scenario::Only(_)
                | Scenario::RackCooling
                | Scenario::Replacement
                | Scenario::RandomPrecursors
        )
    }
}

/// Everything that defines a simulated run. Same config → identical samples.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Number of GPU slots; hosts hold `gpus_per_host`, the last may hold
    /// fewer.
    pub gpus: usize,
    /// GPUs per host: 8 (HGX / DGX servers) by default; 4 for many PCIe
    /// servers. Fewer GPUs share a host's air and its job.
    pub gpus_per_host: usize,
    /// Simulated duration in hours.
    pub hours: f64,
    /// Sampling interval in seconds (dcgm-exporter's default is 30 s).
    pub interval_s: u32,
    /// Root of every random choice.
    pub seed: u64,
    /// Event time of the first tick, epoch milliseconds (UTC).
    pub start_ms: i64,
    /// Mean GPU failure rate over the fleet. The default, 0.006, gives a
    /// 1,000-GPU day about five labelled failures of mixed kinds: far above a
    /// real fleet (Meta's Llama 3 run saw ~0.0005 per GPU-day), so that short
    /// runs have something to detect.
    pub failure_rate_per_gpu_day: f64,
    /// Drops, duplicates, small reorders and malformed messages.
    pub dirty: bool,
    /// The failure mix.
    pub scenario: Scenario,
    /// A failed GPU is replaced by a new UUID in the same slot 4–12 h later.
    pub replace_failed: bool,
    /// Hosts per rack: 4 eight-GPU servers is a ~40 kW air-cooled rack.
    pub hosts_per_rack: usize,
    /// Racks per cluster; each cluster is one SKU.
    pub racks_per_cluster: usize,
    /// Plant exactly one rack cooling incident (as `Scenario::RackCooling`
    /// does) on top of the scenario's failures, instead of the mixed
    /// scenario's ~1 per 50 rack-days.
    pub rack_incident: bool,
    /// Samples name the job their GPU runs (`job`). Off: no job label at
    /// all, as from a dcgm-exporter without a scheduler mapping (the
    /// label is optional in the input contract).
    pub job_labels: bool,
    /// Job labels name no workload (`job-…`, as Slurm job ids and many pod
    /// names do) instead of `train-…` / `infer-…`: phases then come from
    /// the load alone, as without labels, while the job peers remain.
    pub opaque_job_names: bool,
    /// Mean size of a healthy GPU's background error bursts: 1 (the
    /// default) logs background errors one at a time (Poisson counts);
    /// above 1 they come in bursts of that mean size (geometric: a PCIe
    /// link retrain's replays, a weak cell read again and again) at the
    /// same long-run rate, so counts are overdispersed (variance ≈ 2m − 1
    /// times the mean). Precursors are untouched.
    pub background_burst: f64,
    /// Each host reports at its own fixed offset within the interval, a
    /// little early or late each time (Prometheus spreads its scrapes);
    /// off, every sample carries its tick's time.
    pub spread_scrapes: bool,
    /// `RandomPrecursors` only: each counter precursor (HBM, NVLink, PCIe)
    /// grows from its GPU's own background rate to 5–500 times it at the
    /// failure (log-uniform), instead of to an absolute rate drawn
    /// regardless of the background. A quiet GPU's precursor is then as
    /// quiet in absolute terms as its background, as on a generator whose
    /// precursors scale the GPU's own rate. Off by default.
    pub relative_precursors: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            gpus: 1_000,
            gpus_per_host: super::GPUS_PER_HOST,
            hours: 24.0,
            interval_s: 30,
            seed: 17,
            start_ms: DEFAULT_START_MS,
            failure_rate_per_gpu_day: 0.006,
            dirty: false,
            scenario: Scenario::Mixed,
            replace_failed: false,
            hosts_per_rack: 4,
            racks_per_cluster: 8,
            rack_incident: false,
            job_labels: true,
            opaque_job_names: false,
            background_burst: 1.0,
            spread_scrapes: false,
            relative_precursors: false,
        }
    }
}

/// Upper bounds that keep a typo from asking for a simulation that never ends.
const MAX_GPUS: usize = 1_000_000;
const MAX_HOURS: f64 = 24.0 * 366.0 * 5.0;
/// 2100-01-01T00:00:00Z.
const MAX_START_MS: i64 = 4_102_444_800_000;

impl SimConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.gpus == 0 || self.gpus > MAX_GPUS {
            return Err(invalid(
                "gpus",
                format!("must be in 1..={MAX_GPUS}, got {}", self.gpus),
            ));
        }
        if !self.hours.is_finite() || self.hours <= 0.0 || self.hours > MAX_HOURS {
            return Err(invalid(
                "hours",
                format!("must be in (0, {MAX_HOURS}], got {}", self.hours),
            ));
        }
        if !(1..=16).contains(&self.gpus_per_host) {
            return Err(invalid(
                "gpus_per_host",
                format!("must be in 1..=16, got {}", self.gpus_per_host),
            ));
        }
        if self.interval_s == 0 || self.interval_s > 3_600 {
            return Err(invalid(
                "interval_s",
                format!("must be in 1..=3600, got {}", self.interval_s),
            ));
        }
        if self.hours * 3_600.0 < f64::from(self.interval_s) {
            return Err(invalid(
                "hours",
                "must cover at least one sampling interval",
            ));
        }
        if !(0..=MAX_START_MS).contains(&self.start_ms) {
            return Err(invalid(
                "start_ms",
                format!("must be in 0..={MAX_START_MS}, got {}", self.start_ms),
            ));
        }
        let r = self.failure_rate_per_gpu_day;
        if !r.is_finite() || !(0.0..=1.0).contains(&r) {
            return Err(invalid(
                "failure_rate_per_gpu_day",
                format!("must be in [0, 1], got {r}"),
            ));
        }
        if self.hosts_per_rack == 0 || self.hosts_per_rack > 64 {
            return Err(invalid(
                "hosts_per_rack",
                format!("must be in 1..=64, got {}", self.hosts_per_rack),
            ));
        }
        let b = self.background_burst;
        if !b.is_finite() || !(1.0..=1_000.0).contains(&b) {
            return Err(invalid(
                "background_burst",
                format!("must be in [1, 1000], got {b}"),
            ));
        }
        if self.racks_per_cluster == 0 || self.racks_per_cluster > 10_000 {
            return Err(invalid(
                "racks_per_cluster",
                format!("must be in 1..=10000, got {}", self.racks_per_cluster),
            ));
        }
        Ok(())
    }

    /// Sampling interval in milliseconds.
    pub fn interval_ms(&self) -> i64 {
        i64::from(self.interval_s) * 1_000
    }

    /// Number of ticks (samples per GPU slot) in the run.
    pub fn ticks(&self) -> u64 {
        (self.hours * 3_600.0 / f64::from(self.interval_s)).ceil() as u64
    }

    /// Event time just after the last tick.
    pub fn end_ms(&self) -> i64 {
        self.start_ms + self.ticks() as i64 * self.interval_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid_and_starts_in_november() {
        let c = SimConfig::default();
        assert_eq!(c.validate(), Ok(()));
        assert_eq!(
            features::time::format_rfc3339_s(c.start_ms),
            "2026-11-01T00:00:00Z"
        );
        assert_eq!(c.ticks(), 2_880);
    }

    #[test]
    fn errors_name_the_field() {
        let bad = [
            SimConfig {
                gpus: 0,
                ..Default::default()
            },
            SimConfig {
                hours: f64::NAN,
                ..Default::default()
            },
            SimConfig {
                interval_s: 0,
                ..Default::default()
            },
            SimConfig {
                failure_rate_per_gpu_day: -1.0,
                ..Default::default()
            },
            SimConfig {
                hosts_per_rack: 0,
                ..Default::default()
            },
            SimConfig {
                racks_per_cluster: 0,
                ..Default::default()
            },
            SimConfig {
                start_ms: -5,
                ..Default::default()
            },
        ];
        let fields = [
            "gpus",
            "hours",
            "interval_s",
            "failure_rate_per_gpu_day",
            "hosts_per_rack",
            "racks_per_cluster",
            "start_ms",
        ];
        for (c, f) in bad.iter().zip(fields) {
            match c.validate() {
                Err(SimError::InvalidConfig { field, .. }) => assert_eq!(field, f),
                other => panic!("expected error on {f}, got {other:?}"),
            }
        }
    }
}
