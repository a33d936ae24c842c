//! Cumulative DCGM counters → per-interval deltas and rates, part of the
//! per-GPU state of the feature stage.
//!
//! A counter only grows until the driver resets it (driver reload, GPU
//! reset, reboot): a decrease is a reset event, never a negative rate. The
//! interval that contains the reset has no rate (NaN, "unknown") because the
//! counter's value before the reset is lost; the next interval counts from
//! the new base. Rates are per hour for error counts, a time fraction for
//! violation counters (DCGM reports them in nanoseconds: `dcgm_fields.h`,
//! "Power Violation time in ns") and watts for the
//! energy counter (millijoules).

use serde::{Deserialize, Serialize};

use crate::field::Field;

/// How a counter's rate is expressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateUnit {
    /// Events per hour (ECC errors, retired pages, remapped rows, replays).
    PerHour,
    /// Nanoseconds of violation per nanosecond of interval: 0..1.
    TimeFraction,
    /// Millijoules per millisecond = watts.
    Watts,
}

impl RateUnit {
    /// Converts a delta over `dt_ms` into this unit.
    fn rate(self, delta: f64, dt_ms: f64) -> f64 {
        match self {
            RateUnit::PerHour => delta * 3_600_000.0 / dt_ms,
            RateUnit::TimeFraction => delta / (dt_ms * 1_000_000.0),
            RateUnit::Watts => delta / dt_ms,
        }
    }
}

/// The counters the feature stage tracks, in slot order, with their units.
pub const TRACKED: [(Field, RateUnit); 16] = [
    (Field::EccSbeVolTotal, RateUnit::PerHour),
    (Field::EccDbeVolTotal, RateUnit::PerHour),
    (Field::RetiredSbe, RateUnit::PerHour),
    (Field::RetiredDbe, RateUnit::PerHour),
    (Field::CorrectableRemappedRows, RateUnit::PerHour),
    (Field::UncorrectableRemappedRows, RateUnit::PerHour),
    (Field::PcieReplayCounter, RateUnit::PerHour),
    (Field::NvlinkCrcFlitErrors, RateUnit::PerHour),
    (Field::NvlinkCrcDataErrors, RateUnit::PerHour),
    (Field::NvlinkReplayErrors, RateUnit::PerHour),
    (Field::NvlinkRecoveryErrors, RateUnit::PerHour),
    (Field::PowerViolation, RateUnit::TimeFraction),
    (Field::ThermalViolation, RateUnit::TimeFraction),
    (Field::TotalEnergy, RateUnit::Watts),
    (Field::EccSbeAggTotal, RateUnit::PerHour),
    (Field::EccDbeAggTotal, RateUnit::PerHour),
];

/// Number of tracked counters.
pub const COUNTERS: usize = TRACKED.len();

/// Slot of the first error counter that has a delta column and of the last.
/// The first eleven slots are the error counters.
pub const ERROR_COUNTERS: usize = 11;

/// One counter of one GPU: 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    /// Last raw value (f64: energy in mJ exceeds f32's exact range).
    last: f64,
    /// Event time of `last`; `i64::MIN` before the first value.
    last_ts_ms: i64,
    /// Delta of the latest interval (NaN at first value and at a reset).
    pub delta: f32,
    /// Rate of the latest interval in its [`RateUnit`]; never negative.
    pub rate: f32,
}

impl Default for Counter {
    fn default() -> Self {
        Counter {
            last: 0.0,
            last_ts_ms: i64::MIN,
            delta: f32::NAN,
            rate: f32::NAN,
        }
    }
}

/// What one new counter value meant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CounterUpdate {
    /// The first value seen: a base, no delta yet.
    First,
    /// A normal interval.
    Delta,
    /// The counter went down: reset from `from` to `to`.
    Reset { from: f64, to: f64 },
}

impl Counter {
    /// Feeds a value at `ts_ms` (which is after the previous one).
    pub fn update(&mut self, value: f64, ts_ms: i64, unit: RateUnit) -> CounterUpdate {
        if self.last_ts_ms == i64::MIN {
            self.last = value;
            self.last_ts_ms = ts_ms;
            return CounterUpdate::First;
        }
        let from = self.last;
        let dt = (ts_ms - self.last_ts_ms) as f64;
        self.last = value;
        self.last_ts_ms = ts_ms;
        if value < from {
            self.delta = f32::NAN;
            self.rate = f32::NAN;
            return CounterUpdate::Reset { from, to: value };
        }
        let delta = value - from;
        self.delta = delta as f32;
        self.rate = if dt > 0.0 {
            unit.rate(delta, dt) as f32
        } else {
            f32::NAN
        };
        debug_assert!(
            self.rate.is_nan() || self.rate >= 0.0,
            "a counter rate is never negative"
        );
        CounterUpdate::Delta
    }

    /// The last raw value, if any.
    pub fn total(&self) -> Option<f64> {
        (self.last_ts_ms != i64::MIN).then_some(self.last)
    }

    /// Forgets the latest interval (the counter was absent from a sample):
    /// a stale delta must not be reported twice.
    pub fn clear_interval(&mut self) {
        self.delta = f32::NAN;
        self.rate = f32::NAN;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn deltas_rates_and_resets() {
        let mut c = Counter::default();
        assert_eq!(c.update(10.0, 0, RateUnit::PerHour), CounterUpdate::First);
        assert!(c.rate.is_nan());
        assert_eq!(
            c.update(13.0, 1_800_000, RateUnit::PerHour),
            CounterUpdate::Delta
        );
        assert_eq!((c.delta, c.rate), (3.0, 6.0));
        assert_eq!(
            c.update(1.0, 3_600_000, RateUnit::PerHour),
            CounterUpdate::Reset {
                from: 13.0,
                to: 1.0
            }
        );
        assert!(c.rate.is_nan());
        c.update(2.0, 7_200_000, RateUnit::PerHour);
        assert_eq!(c.rate, 1.0);
        let mut e = Counter::default();
        e.update(1e12, 0, RateUnit::Watts);
        e.update(1e12 + 30_000.0 * 500.0, 30_000, RateUnit::Watts);
        assert_eq!(e.rate, 500.0);
        let mut v = Counter::default();
        v.update(0.0, 0, RateUnit::TimeFraction);
        v.update(15e9, 30_000, RateUnit::TimeFraction);
        assert_eq!(v.rate, 0.5);
    }

    proptest! {
        #[test]
        fn rates_are_never_negative(
            values in proptest::collection::vec(0.0f64..1e9, 1..60),
            steps in proptest::collection::vec(0i64..100_000, 1..60),
        ) {
            let mut c = Counter::default();
            let mut ts = 0;
            for (v, dt) in values.iter().zip(steps.iter().cycle()) {
                ts += dt;
                c.update(*v, ts, RateUnit::PerHour);
                prop_assert!(c.rate.is_nan() || c.rate >= 0.0, "rate {}", c.rate);
                prop_assert!(c.delta.is_nan() || c.delta >= 0.0, "delta {}", c.delta);
            }
        }
    }
}
