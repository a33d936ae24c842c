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
//!
//! A rate is measured over at least [`RATE_SPAN_MS`] (30 s, dcgm-exporter's
//! default cadence), not over the latest interval alone: at a 10 s or 1 s
//! cadence one correctable error in one interval would read 360/h or
//! 3,600/h, and the level rules, which judge rates, would page on a reading
//! the default cadence shows as 120/h. At 30 s and slower (from 27 s: scrape
//! timestamps wobble) the span is the latest interval, as it always was;
//! faster, it is 27 s and up to one interval less than 54 s of readings,
//! and counts over less than that (the first readings after a reset) are
//! spread over 27 s. Deltas stay per interval (the change tests sum them
//! into buckets).

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

/// Slot of the aggregate single-bit ECC count (the double-bit one follows).
pub const AGG_SBE: usize = 14;

/// Number of tracked counters.
pub const COUNTERS: usize = TRACKED.len();

/// Slot of the first error counter that has a delta column and of the last.
/// The first eleven slots are the error counters.
pub const ERROR_COUNTERS: usize = 11;

/// The least time a rate is measured over (see the module docs).
pub const RATE_SPAN_MS: i64 = 30_000;

/// A span counts as reached at 90 % of it: scrape timestamps wobble, and
/// an interval of 29.99 s at a 30 s cadence is a span.
const SPAN_REACHED_MS: i64 = RATE_SPAN_MS * 9 / 10;

/// One counter of one GPU: 40 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Counter {
    /// Last raw value (f64: energy in mJ exceeds f32's exact range).
    last: f64,
    /// Event time of `last`; `i64::MIN` before the first value.
    last_ts_ms: i64,
    /// Delta of the latest interval (NaN at first value and at a reset).
    pub delta: f32,
    /// Rate since the base reading in its [`RateUnit`]; never negative.
    pub rate: f32,
    /// The reading the rate is measured from, as (ms, growth) since it,
    /// and a newer one that takes its place once it is a span old (see
    /// the module docs). Negative ms: none (a snapshot of an older build),
    /// the rate is the latest interval's.
    #[serde(default = "no_mark")]
    base: Mark,
    #[serde(default = "no_mark")]
    next: Mark,
}

/// A reading a rate is measured from: ms and growth since it (relative,
/// so that it fits in 8 bytes).
type Mark = (i32, f32);

fn no_mark() -> Mark {
    (-1, 0.0)
}

impl Default for Counter {
    fn default() -> Self {
        Counter {
            last: 0.0,
            last_ts_ms: i64::MIN,
            delta: f32::NAN,
            rate: f32::NAN,
            base: no_mark(),
            next: no_mark(),
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
            (self.base, self.next) = ((0, 0.0), (0, 0.0));
            return CounterUpdate::First;
        }
        let from = self.last;
        let dt = ts_ms - self.last_ts_ms;
        self.last = value;
        self.last_ts_ms = ts_ms;
        if value < from {
            self.delta = f32::NAN;
            self.rate = f32::NAN;
            (self.base, self.next) = ((0, 0.0), (0, 0.0));
            return CounterUpdate::Reset { from, to: value };
        }
        let delta = value - from;
        self.delta = delta as f32;
        if dt >= SPAN_REACHED_MS {
            // An interval a span long (30 s, give or take the scrape's
            // wobble) or longer: its own rate, exactly, as ever; the
            // previous reading is the base, this one the next candidate.
            self.rate = unit.rate(delta, dt as f64) as f32;
            let dt32 = i32::try_from(dt).unwrap_or(i32::MAX);
            (self.base, self.next) = ((dt32, delta as f32), (0, 0.0));
        } else {
            let age = |m: Mark| {
                if m.0 < 0 {
                    (dt as i32, delta as f32)
                } else {
                    (m.0.saturating_add(dt as i32), m.1 + delta as f32)
                }
            };
            (self.base, self.next) = (age(self.base), age(self.next));
            // The newer mark becomes the base once it is a span old; the
            // current reading is the next candidate then.
            if i64::from(self.next.0) >= SPAN_REACHED_MS {
                (self.base, self.next) = (self.next, (0, 0.0));
            }
            let (span, growth) = self.base;
            // Counts over less than a span (the first readings after the
            // first value or a reset) are spread over the span: one error
            // in 10 s is not 360/h. Averages (watts, fractions) are not.
            let over = match unit {
                RateUnit::PerHour => i64::from(span).max(SPAN_REACHED_MS),
                RateUnit::TimeFraction | RateUnit::Watts => i64::from(span),
            };
            self.rate = if span > 0 {
                unit.rate(f64::from(growth), over as f64) as f32
            } else {
                f32::NAN
            };
        }
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

    #[test]
    fn a_fast_cadence_reads_a_rate_over_thirty_seconds_at_least() {
        // One error in one 10 s interval reads 120/h (one in 30 s), not
        // 360/h; at 30 s and slower the rate is the latest interval's.
        let mut fast = Counter::default();
        fast.update(0.0, 0, RateUnit::PerHour);
        let mut rates = Vec::new();
        for (i, v) in [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0].iter().enumerate() {
            fast.update(*v, 10_000 * (i as i64 + 1), RateUnit::PerHour);
            rates.push(fast.rate);
        }
        assert_eq!(fast.delta, 0.0);
        assert!(rates.iter().all(|r| *r <= 120.0), "{rates:?}");
        assert_eq!(rates[0], 0.0);
        assert_eq!(rates[2], 120.0, "the error, over the 30 s since the base");
        assert_eq!(rates[3], 90.0, "over the 40 s since the same base");
        assert_eq!(rates[7], 0.0, "the error is over a span ago");
        // Right after the first value (or a reset) an error is spread over
        // 27 s, not read over the 10 s it came in.
        let mut first = Counter::default();
        first.update(0.0, 0, RateUnit::PerHour);
        first.update(1.0, 10_000, RateUnit::PerHour);
        assert!(
            first.rate <= 3_600_000.0 / 27_000.0 + 1e-3,
            "{}",
            first.rate
        );
        // A 30 s cadence whose timestamps wobble reads each interval alone.
        let mut wobble = Counter::default();
        wobble.update(0.0, 0, RateUnit::PerHour);
        wobble.update(1.0, 29_990, RateUnit::PerHour);
        wobble.update(1.0, 59_985, RateUnit::PerHour);
        assert_eq!(wobble.rate, 0.0, "the error was in the interval before");
        wobble.update(3.0, 89_990, RateUnit::PerHour);
        assert_eq!(wobble.rate, (2.0 * 3_600_000.0 / 30_005.0) as f32);
        let mut slow = Counter::default();
        slow.update(0.0, 0, RateUnit::PerHour);
        slow.update(1.0, 60_000, RateUnit::PerHour);
        assert_eq!(slow.rate, 60.0);
        slow.update(1.0, 120_000, RateUnit::PerHour);
        assert_eq!(slow.rate, 0.0);
        // After a reset the rate counts from the new base.
        slow.update(0.0, 150_000, RateUnit::PerHour);
        assert!(slow.rate.is_nan());
        slow.update(2.0, 180_000, RateUnit::PerHour);
        assert_eq!(slow.rate, 240.0);
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
