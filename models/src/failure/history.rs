//! Per-GPU history columns of the failure model's input: what one feature
//! row cannot show but a failure precursor does — error rates over several
//! windows and their acceleration, hours since the last error of each
//! stream, and slow thermal drift (thermal resistance now vs. the GPU's own
//! past, smoothed temperature residual and peer z-scores).
//!
//! Fed every feature row of a GPU in event-time order, in training
//! (`forewarn train` replays the file), evaluation and the pipeline
//! (`detector::assess::predict`), so the model sees the same values
//! everywhere. ~150 bytes per GPU, a handful of `exp` per row.
//!
//! Every column is relative (a rate, a ratio, a time since) rather than a
//! running total: totals grow with the time a GPU has been watched, and a
//! booster learns "late in the file" from them instead of "degrading".

use features::{Col, FEATURE_COUNT};
use serde::{Deserialize, Serialize};

/// Error streams followed: correctable ECC, NVLink (CRC flit + data +
/// replay + recovery), PCIe replays, correctable row remaps.
const STREAMS: usize = 4;

/// Short and long windows of the rate EWMAs, hours.
const TAU_SHORT_H: f64 = 1.0;
const TAU_LONG_H: f64 = 6.0;
/// Window of the slow thermal averages, hours.
const TAU_THERMAL_H: f64 = 2.0;
/// The GPU's own thermal baseline, hours.
const TAU_BASELINE_H: f64 = 12.0;
/// "Hours since the last error" saturates here (and is this for a GPU
/// never seen to err), so it does not count the hours watched.
pub const SINCE_CAP_H: f32 = 24.0;
/// Thermal resistance is estimated only under this much load (power over
/// the limit): at idle the fixed offsets dominate.
const LOADED_POWER_FRAC: f32 = 0.4;

/// Column names, in order.
pub const HISTORY_NAMES: [&str; 20] = [
    "hist_sbe_per_h_1h",
    "hist_sbe_per_h_6h",
    "hist_sbe_accel",
    "hist_sbe_since_h",
    "hist_nvlink_per_h_1h",
    "hist_nvlink_per_h_6h",
    "hist_nvlink_accel",
    "hist_nvlink_since_h",
    "hist_pcie_per_h_1h",
    "hist_pcie_per_h_6h",
    "hist_pcie_accel",
    "hist_pcie_since_h",
    "hist_remap_per_h_6h",
    "hist_remap_since_h",
    "hist_temp_resid_2h",
    "hist_temp_peer_z_2h",
    "hist_throttle_thermal_2h",
    "hist_clock_resid_2h",
    "hist_rth_2h",
    "hist_rth_drift",
];

/// Number of history columns.
pub const HISTORY_WIDTH: usize = HISTORY_NAMES.len();

/// An exponentially weighted mean that starts at its first value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Ewma {
    v: f32,
    seen: bool,
}

impl Ewma {
    #[inline]
    fn push(&mut self, x: f32, keep: f32) {
        if !x.is_finite() {
            return;
        }
        if self.seen {
            self.v = keep * self.v + (1.0 - keep) * x;
        } else {
            self.v = x;
            self.seen = true;
        }
    }

    #[inline]
    fn get(&self) -> f32 {
        if self.seen { self.v } else { f32::NAN }
    }
}

/// One GPU's history state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    last_ms: i64,
    /// Error rates per hour, short and long window.
    rate: [[f32; 2]; STREAMS],
    /// Last event time per stream (0: none yet).
    event_ms: [i64; STREAMS],
    temp_resid: Ewma,
    temp_peer_z: Ewma,
    throttle: Ewma,
    clock_resid: Ewma,
    rth_fast: Ewma,
    rth_slow: Ewma,
}

#[inline]
fn count(v: f32) -> f32 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
}

impl History {
    pub fn new() -> Self {
        History::default()
    }

    /// Advances with one feature row (event-time order; an older row is
    /// ignored).
    pub fn update(&mut self, ts_ms: i64, values: &[f32; FEATURE_COUNT]) {
        let v = |c: Col| values[c as usize];
        if self.last_ms != 0 && ts_ms <= self.last_ms {
            return;
        }
        let dt_h = if self.last_ms == 0 {
            0.0
        } else {
            (ts_ms - self.last_ms) as f64 / 3.6e6
        };
        self.last_ms = ts_ms;
        let counts = [
            count(v(Col::EccSbeDelta)),
            count(v(Col::NvlinkCrcFlitDelta))
                + count(v(Col::NvlinkCrcDataDelta))
                + count(v(Col::NvlinkReplayDelta))
                + count(v(Col::NvlinkRecoveryDelta)),
            count(v(Col::PcieReplayDelta)),
            count(v(Col::RemapCorrDelta)),
        ];
        if dt_h > 0.0 {
            // Rate EWMA: decay, then add this interval's count spread
            // over the window (an unbiased rate once warm).
            for (k, tau) in [TAU_SHORT_H, TAU_LONG_H].into_iter().enumerate() {
                let keep = (-dt_h / tau).exp() as f32;
                for (s, c) in counts.iter().enumerate() {
                    self.rate[s][k] = keep * self.rate[s][k] + c / tau as f32;
                }
            }
        }
        for (s, c) in counts.iter().enumerate() {
            if *c > 0.0 {
                self.event_ms[s] = ts_ms;
            }
        }
        let keep_th = if dt_h > 0.0 {
            (-dt_h / TAU_THERMAL_H).exp() as f32
        } else {
            1.0
        };
        self.temp_resid.push(v(Col::GpuTempResid), keep_th);
        self.temp_peer_z.push(v(Col::GpuTempPeerZ), keep_th);
        self.throttle.push(v(Col::ThrottleThermal), keep_th);
        self.clock_resid.push(v(Col::SmClockResid), keep_th);
        // Thermal resistance: °C above the host's other GPUs per watt,
        // under load only.
        let (temp, inlet, power) = (v(Col::GpuTemp), v(Col::InletProxy), v(Col::PowerW));
        if v(Col::PowerFrac) >= LOADED_POWER_FRAC && power > 1.0 {
            let rth = (temp - inlet) / power;
            let keep_slow = if dt_h > 0.0 {
                (-dt_h / TAU_BASELINE_H).exp() as f32
            } else {
                1.0
            };
            self.rth_fast.push(rth, keep_th);
            self.rth_slow.push(rth, keep_slow);
        }
    }

    /// Writes the [`HISTORY_WIDTH`] columns at `ts_ms` into `out`.
    pub fn write(&self, ts_ms: i64, out: &mut [f32]) {
        let since = |s: usize| {
            if self.event_ms[s] == 0 {
                SINCE_CAP_H
            } else {
                (((ts_ms - self.event_ms[s]) as f64 / 3.6e6) as f32).clamp(0.0, SINCE_CAP_H)
            }
        };
        let accel = |s: usize| ((self.rate[s][0] + 0.5) / (self.rate[s][1] + 0.5)).ln();
        let mut k = 0;
        let mut put = |x: f32| {
            out[k] = x;
            k += 1;
        };
        for s in 0..3 {
            put(self.rate[s][0]);
            put(self.rate[s][1]);
            put(accel(s));
            put(since(s));
        }
        put(self.rate[3][1]);
        put(since(3));
        put(self.temp_resid.get());
        put(self.temp_peer_z.get());
        put(self.throttle.get());
        put(self.clock_resid.get());
        put(self.rth_fast.get());
        put(self.rth_fast.get() - self.rth_slow.get());
        debug_assert_eq!(k, HISTORY_WIDTH);
    }

    pub fn heap_bytes(&self) -> usize {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sbe: f32) -> [f32; FEATURE_COUNT] {
        let mut v = [f32::NAN; FEATURE_COUNT];
        v[Col::EccSbeDelta as usize] = sbe;
        v
    }

    #[test]
    fn rates_track_a_steady_stream_and_since_saturates() {
        let mut h = History::new();
        let mut out = [0f32; HISTORY_WIDTH];
        // 10 errors every 30 s for 12 h = 1200 / h.
        let mut ts = 1_000_000;
        for _ in 0..(12 * 120) {
            ts += 30_000;
            h.update(ts, &row(10.0));
        }
        h.write(ts, &mut out);
        assert!((out[0] - 1200.0).abs() < 30.0, "short rate {}", out[0]);
        assert!(out[1] > 1000.0 && out[1] < 1200.0, "long rate {}", out[1]);
        assert_eq!(out[3], 0.0);
        // Quiet for two days: rates decay, "since" saturates at the cap.
        for _ in 0..(48 * 120) {
            ts += 30_000;
            h.update(ts, &row(0.0));
        }
        h.write(ts, &mut out);
        assert!(out[0] < 0.01 && out[3] == SINCE_CAP_H, "{out:?}");
        // A GPU never seen to err reads the cap too, not its hours watched.
        let mut fresh = History::new();
        fresh.update(ts, &row(0.0));
        fresh.write(ts, &mut out);
        assert_eq!(out[7], SINCE_CAP_H);
    }

    #[test]
    fn a_growing_stream_accelerates() {
        let mut h = History::new();
        let mut out = [0f32; HISTORY_WIDTH];
        let mut ts = 1_000_000;
        for i in 0..(8 * 120) {
            ts += 30_000;
            let c = if i > 7 * 120 { 20.0 } else { 1.0 };
            h.update(ts, &row(c));
        }
        h.write(ts, &mut out);
        assert!(out[2] > 0.5, "acceleration {}", out[2]);
    }
}
