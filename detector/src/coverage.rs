//! Input coverage: which of the DCGM signals forewarn's detection reads
//! the telemetry actually carries. Fed by the pipeline's feed (every
//! admitted sample's field bitmask, OR-ed per batch), read by `/metrics`
//! (`forewarn_input_signal_present{signal}`) and logged once, as a
//! warning per missing signal, after a quarter hour of event time.
//!
//! Why: dcgm-exporter's default counters list (a copy:
//! `features/tests/fixtures/dcgm-exporter/default-counters.csv`) has no
//! ECC, retired-page or NVLink error counts. On such a fleet HBM and NVLink
//! degradation cannot be seen at all, and nothing else would say so: no
//! alert is what a healthy fleet looks like too.
//! `deploy/dcgm-exporter/forewarn-counters.csv` is a list with every field
//! below.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};

use features::{Field, Sample};

/// Event time of telemetry after which a signal never seen is reported
/// missing: a few scrapes at any sane cadence.
pub const REPORT_AFTER_MS: i64 = 15 * 60_000;

/// One signal detection reads: present when any of `fields` is.
#[derive(Debug, Clone, Copy)]
pub struct Signal {
    /// The `signal` label on `/metrics`.
    pub name: &'static str,
    pub fields: &'static [Field],
    /// What detection cannot do without it (for the log line).
    pub without: &'static str,
}

/// The signals, in the order `/metrics` lists them.
pub const SIGNALS: [Signal; 10] = [
    Signal {
        name: "temperature",
        fields: &[Field::GpuTemp],
        without: "no thermal degradation, rack cooling or temperature anomalies",
    },
    Signal {
        name: "power",
        fields: &[Field::PowerUsage, Field::TotalEnergy],
        without: "no expected temperature at the load: thermal rules and workload phases are blind",
    },
    Signal {
        name: "utilization",
        fields: &[Field::GpuUtil],
        without: "no workload phases (training, inference, idle): every GPU is judged as one",
    },
    Signal {
        name: "sm_clock",
        fields: &[Field::SmClock],
        without: "no stragglers (a GPU slower than its job peers)",
    },
    Signal {
        name: "clock_event_reasons",
        fields: &[Field::ClocksEventReasons],
        without: "slow clocks at a power cap or thermal slowdown look like faults: more anomaly and straggler warnings",
    },
    Signal {
        name: "correctable_ecc",
        fields: &[Field::EccSbeVolTotal, Field::EccSbeAggTotal],
        without: "no HBM degradation warnings (the correctable ECC trend and its ETA)",
    },
    Signal {
        name: "double_bit_ecc",
        fields: &[Field::EccDbeVolTotal, Field::EccDbeAggTotal],
        without: "double-bit ECC errors are seen only through XIDs 48 / 94 / 95",
    },
    Signal {
        name: "retired_memory",
        fields: &[
            Field::CorrectableRemappedRows,
            Field::UncorrectableRemappedRows,
            Field::RowRemapFailure,
            Field::RetiredSbe,
            Field::RetiredDbe,
            Field::RetiredPending,
        ],
        without: "no remapped-row (Ampere on) or retired-page (before) trend, no row-remap failure",
    },
    Signal {
        name: "nvlink_errors",
        fields: &[
            Field::NvlinkCrcFlitErrors,
            Field::NvlinkCrcDataErrors,
            Field::NvlinkReplayErrors,
            Field::NvlinkRecoveryErrors,
        ],
        without: "no NVLink degradation warnings",
    },
    Signal {
        name: "pcie_replays",
        fields: &[Field::PcieReplayCounter],
        without: "no PCIe degradation warnings",
    },
];

impl Signal {
    fn mask(&self) -> u64 {
        self.fields.iter().fold(0, |m, f| m | 1 << f.index())
    }

    /// Its field names, `A or B`.
    pub fn field_names(&self) -> String {
        self.fields
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(" or ")
    }
}

/// Fields seen so far, and where the gate's clock first stood.
#[derive(Debug)]
pub struct Coverage {
    seen: AtomicU64,
    first_ms: AtomicI64,
    /// Some sample has been observed.
    started: AtomicBool,
    reported: AtomicBool,
}

impl Default for Coverage {
    fn default() -> Self {
        Coverage {
            seen: AtomicU64::new(0),
            first_ms: AtomicI64::new(i64::MAX),
            started: AtomicBool::new(false),
            reported: AtomicBool::new(false),
        }
    }
}

impl Coverage {
    /// Takes in a batch of admitted samples and the admission gate's clock
    /// after it; once that clock has moved [`REPORT_AFTER_MS`] past where
    /// it first stood, returns (once) the signals no sample carried. The
    /// gate's clock (the fleet's median claim), not the samples' own
    /// timestamps: one GPU whose clock runs an hour ahead, still inside
    /// the gate's band, must not cut the quarter hour short.
    pub fn observe(&self, samples: &[Sample], clock_ms: Option<i64>) -> Vec<&'static Signal> {
        if samples.is_empty() {
            return Vec::new();
        }
        let bits = samples.iter().fold(0, |b, s| b | s.metrics.presence());
        let seen = self.seen.fetch_or(bits, Relaxed) | bits;
        self.started.store(true, Relaxed);
        let Some(now) = clock_ms else {
            return Vec::new();
        };
        let first = self.first_ms.fetch_min(now, Relaxed).min(now);
        if now.saturating_sub(first) < REPORT_AFTER_MS || self.reported.swap(true, Relaxed) {
            return Vec::new();
        }
        SIGNALS.iter().filter(|s| seen & s.mask() == 0).collect()
    }

    /// Per signal, 1 if some sample carried it; empty before any sample.
    pub fn present(&self) -> Vec<(&'static str, i64)> {
        if !self.started.load(Relaxed) {
            return Vec::new();
        }
        let seen = self.seen.load(Relaxed);
        SIGNALS
            .iter()
            .map(|s| (s.name, i64::from(seen & s.mask() != 0)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ts_ms: i64, fields: &[Field]) -> Sample {
        fields
            .iter()
            .fold(Sample::new("GPU-a", ts_ms), |s, f| s.with(*f, 1.0))
    }

    #[test]
    fn a_default_counters_list_is_reported_missing_ecc_and_nvlink_once() {
        let c = Coverage::default();
        assert!(c.present().is_empty());
        let default_list = [
            Field::GpuTemp,
            Field::PowerUsage,
            Field::GpuUtil,
            Field::SmClock,
            Field::CorrectableRemappedRows,
            Field::PcieReplayCounter,
        ];
        // Before the gate has a clock nothing is judged.
        assert!(c.observe(&[sample(0, &default_list)], None).is_empty());
        assert!(c.observe(&[sample(0, &default_list)], Some(0)).is_empty());
        // Not yet a quarter hour: nothing said.
        assert!(
            c.observe(&[sample(600_000, &default_list)], Some(600_000))
                .is_empty()
        );
        // A GPU an hour ahead does not move the gate's clock.
        let ahead = sample(3_600_000, &default_list);
        assert!(c.observe(&[ahead], Some(610_000)).is_empty());
        let missing: Vec<_> = c
            .observe(
                &[sample(REPORT_AFTER_MS, &[Field::EccSbeAggTotal])],
                Some(REPORT_AFTER_MS),
            )
            .iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(
            missing,
            ["clock_event_reasons", "double_bit_ecc", "nvlink_errors"]
        );
        assert!(
            c.observe(
                &[sample(REPORT_AFTER_MS * 2, &[])],
                Some(REPORT_AFTER_MS * 2)
            )
            .is_empty()
        );
        let present = c.present();
        assert!(present.contains(&("correctable_ecc", 1)));
        assert!(present.contains(&("nvlink_errors", 0)));
        assert_eq!(present.len(), SIGNALS.len());
    }

    #[test]
    fn the_shipped_counters_list_carries_every_signal() {
        let csv = include_str!("../../deploy/dcgm-exporter/forewarn-counters.csv");
        let listed: Vec<&str> = csv
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .filter_map(|l| l.split(',').next())
            .map(str::trim)
            .collect();
        for name in &listed {
            assert!(
                Field::from_name(name).is_some() || *name == "DCGM_FI_DRIVER_VERSION",
                "{name} is no field forewarn reads"
            );
        }
        for s in &SIGNALS {
            assert!(
                s.fields.iter().all(|f| listed.contains(&f.name())),
                "{} is not all in the list",
                s.name
            );
        }
    }
}
