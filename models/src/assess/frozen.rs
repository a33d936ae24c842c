//! Frozen telemetry: readings that stopped changing while samples keep
//! arriving. A step of a shard's assessment after [`super::thermal_hold`],
//! on the same feature rows.
//!
//! Two faults make a GPU look healthy while nothing is measured:
//! - an exporter (or DCGM behind it) that serves its last values again and
//!   again: every reading repeats, with fresh timestamps. The energy
//!   counter shows it beyond doubt: a powered GPU's grows at every sample,
//!   busy or idle, so its rate reads exactly 0 only when nothing is read.
//!   Without an energy counter, the board power does, when DCGM reports it
//!   finer than a watt (milliwatts on data-centre boards: it moves at every
//!   sample); a reading in whole watts can hold still on an idle board, so
//!   it is not judged;
//! - a temperature sensor stuck at one reading while the GPU's power swings
//!   by [`POWER_SWING_W`] or more: a cooling fault would not show.
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

/// The power swing, W, over which a temperature reading cannot hold still
/// (a liquid-cooled board's 0.03 °C/W makes it 3 °C).
pub const POWER_SWING_W: f32 = 100.0;

/// The anomaly component of a frozen GPU: over the default policy's
/// `fire_at` (0.45), so it warns once that holds for the rule's `for`.
pub const FROZEN_RISK: f32 = 0.6;

/// One reading's current run of equal values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Run {
    /// The value's bits (exact equality; no NaN is ever stored).
    bits: u32,
    start_ms: i64,
    last_ms: i64,
    samples: u32,
    /// Times the value changed, saturating.
    changes: u32,
    /// Whether a run has begun.
    live: bool,
}

impl Run {
    /// Takes `v` at `ts`; false when it is missing.
    fn push(&mut self, v: f32, ts: i64) -> bool {
        if !v.is_finite() {
            return false;
        }
        let bits = v.to_bits();
        let gap = ts - self.last_ms > GAP_MS;
        if !self.live || gap || bits != self.bits {
            if self.live && !gap && bits != self.bits {
                self.changes = self.changes.saturating_add(1);
            }
            *self = Run {
                bits,
                start_ms: ts,
                last_ms: ts,
                samples: 1,
                changes: self.changes,
                live: true,
            };
        } else {
            self.last_ms = ts;
            self.samples = self.samples.saturating_add(1);
        }
        true
    }

    fn frozen(&self) -> bool {
        self.live
            && self.changes >= MIN_CHANGES
            && self.samples >= MIN_SAMPLES
            && self.last_ms - self.start_ms >= FROZEN_MS
    }

    fn value(&self) -> f32 {
        f32::from_bits(self.bits)
    }

    fn minutes(&self) -> i64 {
        (self.last_ms - self.start_ms) / 60_000
    }
}

/// One GPU's runs, and the power range seen during the temperature's run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Runs {
    /// The energy counter's rate, W (0 exactly when the counter stands).
    energy: Run,
    power: Run,
    temp: Run,
    power_lo: f32,
    power_hi: f32,
    /// The power has been read finer than a watt.
    fine_power: bool,
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
        let r = self.gpus.entry(row.gpu.clone()).or_default();
        r.energy.push(energy, row.ts_ms);
        if r.power.push(power, row.ts_ms) && power.fract() != 0.0 {
            r.fine_power = true;
        }
        if r.temp.push(temp, row.ts_ms) {
            // The power range over the temperature's run (`f32::min` and
            // `max` pass over a missing reading).
            if r.temp.samples == 1 {
                (r.power_lo, r.power_hi) = (power, power);
            } else {
                r.power_lo = r.power_lo.min(power);
                r.power_hi = r.power_hi.max(power);
            }
        }
        let stopped = "the GPU's telemetry has stopped updating";
        let evidence = if r.energy.frozen() && r.energy.value() == 0.0 {
            Evidence {
                signal: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION".to_string(),
                detail: format!(
                    "energy counter unchanged over {} samples in {} min (power reads {power:.1} W): {stopped}",
                    r.energy.samples,
                    r.energy.minutes()
                ),
            }
        } else if !r.energy.live && r.fine_power && r.power.frozen() {
            Evidence {
                signal: "DCGM_FI_DEV_POWER_USAGE".to_string(),
                detail: format!(
                    "power {:.3} W unchanged over {} samples in {} min: {stopped}",
                    r.power.value(),
                    r.power.samples,
                    r.power.minutes()
                ),
            }
        } else if r.temp.frozen() && r.power_hi - r.power_lo >= POWER_SWING_W {
            Evidence {
                signal: "DCGM_FI_DEV_GPU_TEMP".to_string(),
                detail: format!(
                    "temperature stuck at {:.0} °C for {} min while power moved {:.0}–{:.0} W: the sensor is not reading",
                    r.temp.value(),
                    r.temp.minutes(),
                    r.power_lo,
                    r.power_hi
                ),
            }
        } else {
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
