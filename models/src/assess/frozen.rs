//! Frozen telemetry: readings that stopped changing while samples keep
//! arriving. A step of a shard's assessment after [`super::thermal_hold`],
//! on the same feature rows.
//!
//! Two faults make a GPU look healthy while nothing is measured:
//! - an exporter (or DCGM behind it) that serves its last values again and
//!   again: every reading repeats, with fresh timestamps. Judged by the
//!   energy counter standing still (a powered GPU's grows between two
//!   collections, busy or idle) while the power repeats one reading over
//!   the same span — energy alone can stall on its own (MIG instances have
//!   reported stale energy while the power moved). Without a recent energy
//!   reading, by the board power alone, when DCGM reports it finer than a
//!   watt (milliwatts on data-centre boards: it moves at every sample); a
//!   reading in whole watts can hold still on an idle board, so it is not
//!   judged alone;
//! - a temperature sensor stuck at one reading while the GPU's power, smoothed
//!   over [`SMOOTH_MS`], has risen by [`SWING_OF_LIMIT`] of its power limit
//!   (at least [`MIN_SWING_W`]; [`SWING_W`] when the limit is unknown) over
//!   its lowest since the reading began and stayed up for [`SETTLE_MS`]:
//!   a cooling fault would not show. Only a held rise counts (a burst is
//!   smoothed away; after a fall a cooling GPU's reading rests at its idle
//!   floor), and rows with a thermal clock event start afresh (a GPU held
//!   at its temperature target by its clocks reads flat).
//!
//! A reading is judged only once it has changed [`MIN_CHANGES`] times on
//! this GPU (a field an exporter fills with a constant, such as a power
//! reading the board does not support, never is), and frozen once one
//! value has held for [`FROZEN_MS`] of event time over at least
//! [`MIN_SAMPLES`] samples. A frozen GPU raises an `anomaly` (a warning,
//! never a page: the GPU may be fine; forewarn is blind to it) whose reason
//! names the reading; it resolves once the reading moves again. A gap of
//! more than [`GAP_MS`] between two readings starts the run afresh.

use std::collections::HashMap;

use features::hash::FxBuild;
use features::{Col, FeatureRow, GpuId};
use serde::{Deserialize, Serialize};

use super::{Evidence, KINDS, Kind};

/// Event time one value must hold to count as frozen.
pub const FROZEN_MS: i64 = 15 * 60_000;

/// Samples one value must hold to count as frozen (a sparse exporter's
/// quarter hour is not enough to tell).
pub const MIN_SAMPLES: u32 = 10;

/// Changes of a reading on this GPU before it is judged at all.
pub const MIN_CHANGES: u32 = 16;

/// A longer gap between readings ends a run without counting a change.
pub const GAP_MS: i64 = 5 * 60_000;

/// The smoothed power's swing, as a share of the board's power limit, over
/// which a temperature reading cannot hold still (30 % of a 700 W board is
/// 210 W: 6 °C at a liquid-cooled 0.03 °C/W).
pub const SWING_OF_LIMIT: f32 = 0.3;

/// The smallest swing judged, W (a 70 W board's 30 % is 21 W).
pub const MIN_SWING_W: f32 = 20.0;

/// The swing judged when the power limit is unknown, W.
pub const SWING_W: f32 = 100.0;

/// Time constant of the power smoothing: a burst of a minute moves it by a
/// fifth of its height, a new load level by two thirds in 5 min.
pub const SMOOTH_MS: i64 = 5 * 60_000;

/// How long a temperature must hold after the swing: its heat sink settles
/// in minutes.
pub const SETTLE_MS: i64 = 10 * 60_000;

/// The anomaly component of a frozen GPU: over the default policy's
/// `fire_at` (0.45), so it warns once that holds for the rule's `for`.
pub const FROZEN_RISK: f32 = 0.6;

/// One reading's current run of equal values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Run {
    /// The value's bits (exact equality; no NaN is ever stored).
    bits: u32,
    start_ms: i64,
    last_ms: i64,
    samples: u32,
    /// Times the value changed, saturating.
    changes: u32,
}

impl Run {
    /// Takes `v` at `ts`; false when it is missing.
    fn push(&mut self, v: f32, ts: i64) -> bool {
        if !v.is_finite() {
            return false;
        }
        let bits = v.to_bits();
        let gap = ts - self.last_ms > GAP_MS;
        if !self.live() || gap || bits != self.bits {
            if self.live() && !gap && bits != self.bits {
                self.changes = self.changes.saturating_add(1);
            }
            *self = Run {
                bits,
                start_ms: ts,
                last_ms: ts,
                samples: 1,
                changes: self.changes,
            };
        } else {
            self.last_ms = ts;
            self.samples = self.samples.saturating_add(1);
        }
        true
    }

    /// A run has begun (every run holds its first sample).
    fn live(&self) -> bool {
        self.samples > 0
    }

    /// One value has held for [`FROZEN_MS`] over [`MIN_SAMPLES`] samples.
    fn held(&self) -> bool {
        self.samples >= MIN_SAMPLES && self.last_ms - self.start_ms >= FROZEN_MS
    }

    /// Held, on a reading that moves on this GPU.
    fn frozen(&self) -> bool {
        self.changes >= MIN_CHANGES && self.held()
    }

    fn value(&self) -> f32 {
        f32::from_bits(self.bits)
    }

    fn minutes(&self) -> i64 {
        (self.last_ms - self.start_ms) / 60_000
    }

    /// The reading moves on this GPU and was read lately.
    fn known(&self, ts: i64) -> bool {
        self.changes >= MIN_CHANGES && self.live() && ts - self.last_ms <= GAP_MS
    }
}

/// One GPU's runs, and its smoothed power over the temperature's run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
struct Runs {
    /// The energy counter's rate, W (0 exactly when the counter stands).
    energy: Run,
    power: Run,
    temp: Run,
    /// The power has been read finer than a watt.
    fine_power: bool,
    /// Smoothed power, W, and the time of its last reading.
    smooth: f32,
    smooth_ms: i64,
    /// The smoothed power's lowest since the temperature's run (or the
    /// last thermal clock event) began, and since when it has stood the
    /// swing above that.
    lo: f32,
    swung_ms: Option<i64>,
}

impl Runs {
    /// Smooths `power` in and follows its rise over the run's lowest;
    /// `need` is the swing, W.
    fn track_power(&mut self, power: f32, ts: i64, restart: bool, need: f32) {
        if power.is_finite() {
            let dt = (ts - self.smooth_ms).max(0) as f32;
            let keep = if self.smooth_ms == 0 || !self.smooth.is_finite() {
                0.0
            } else {
                (-dt / SMOOTH_MS as f32).exp()
            };
            self.smooth = keep * self.smooth + (1.0 - keep) * power;
            self.smooth_ms = ts;
        }
        if restart {
            // No power read yet: the range starts with the first reading.
            let at = if self.smooth_ms == 0 {
                f32::NAN
            } else {
                self.smooth
            };
            (self.lo, self.swung_ms) = (at, None);
        } else if self.smooth_ms != 0 {
            self.lo = self.lo.min(self.smooth);
        }
        // A rise held, not a burst (smoothed) nor a fall (a cooling GPU's
        // reading settles at its idle floor).
        if self.smooth - self.lo >= need {
            self.swung_ms.get_or_insert(ts);
        } else {
            self.swung_ms = None;
        }
    }
}

/// Per GPU: its power and temperature readings' runs.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct FrozenWatch {
    gpus: HashMap<GpuId, Runs, FxBuild>,
}

impl FrozenWatch {
    /// Takes `row`'s readings and, when one is frozen, sets the anomaly
    /// component and its reason.
    pub fn apply(
        &mut self,
        row: &FeatureRow,
        components: &mut [f32; KINDS],
        reasons: &mut Vec<(Kind, Evidence)>,
    ) {
        let (power, temp) = (row.get(Col::PowerW), row.get(Col::GpuTemp));
        let energy = row.get(Col::EnergyPowerW);
        if !power.is_finite() && !temp.is_finite() && !energy.is_finite() {
            return;
        }
        let ts = row.ts_ms;
        let r = self.gpus.entry(row.gpu.clone()).or_default();
        r.energy.push(energy, ts);
        if r.power.push(power, ts) && power.fract() != 0.0 {
            r.fine_power = true;
        }
        let new_temp_run = r.temp.push(temp, ts) && r.temp.samples == 1;
        let throttled = row.get(Col::ThrottleThermal) >= 1.0;
        // The board's limit from the power and its share of it.
        let frac = row.get(Col::PowerFrac);
        let need = if frac.is_finite() && frac > 0.0 && power.is_finite() {
            (SWING_OF_LIMIT * power / frac).max(MIN_SWING_W)
        } else {
            SWING_W
        };
        r.track_power(power, ts, new_temp_run || throttled, need);
        let stopped = "the GPU's telemetry has stopped updating";
        // Each reading judged on a row that carries it.
        let (power_now, temp_now) = (r.power.last_ms == ts, r.temp.last_ms == ts);
        let evidence = if r.energy.known(ts) {
            (r.energy.frozen() && r.energy.value() == 0.0 && power_now && r.power.held()).then(|| {
                Evidence {
                    signal: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION".to_string(),
                    detail: format!(
                        "energy counter unchanged over {} samples in {} min (power reads {power:.1} W): {stopped}",
                        r.energy.samples,
                        r.energy.minutes()
                    ),
                }
            })
        } else {
            (r.fine_power && r.power.frozen() && power_now).then(|| Evidence {
                signal: "DCGM_FI_DEV_POWER_USAGE".to_string(),
                detail: format!(
                    "power {:.3} W unchanged over {} samples in {} min: {stopped}",
                    r.power.value(),
                    r.power.samples,
                    r.power.minutes()
                ),
            })
        };
        let evidence = evidence.or_else(|| {
            let settled = r.swung_ms.is_some_and(|at| ts - at >= SETTLE_MS);
            (r.temp.frozen() && temp_now && settled).then(|| Evidence {
                signal: "DCGM_FI_DEV_GPU_TEMP".to_string(),
                detail: format!(
                    "temperature stuck at {:.0} °C for {} min while power rose from {:.0} to {:.0} W: the sensor is not reading",
                    r.temp.value(),
                    r.temp.minutes(),
                    r.lo,
                    r.smooth
                ),
            })
        });
        let Some(evidence) = evidence else {
            return;
        };
        let c = &mut components[Kind::Anomaly as usize];
        *c = c.max(FROZEN_RISK);
        reasons.push((Kind::Anomaly, evidence));
    }

    /// Forgets a GPU (evicted or replaced).
    pub fn evict(&mut self, gpu: &str) {
        self.gpus.remove(gpu);
    }

    pub fn heap_bytes(&self) -> usize {
        self.gpus.capacity() * (std::mem::size_of::<Runs>() + 24)
    }
}

#[cfg(test)]
#[path = "frozen_tests.rs"]
mod tests;
