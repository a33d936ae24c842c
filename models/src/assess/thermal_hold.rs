//! Thermal readings under load, remembered through idle spells: the step
//! after [`super::rules`] and [`super::change`] in a shard's assessment.
//!
//! A GPU that runs hot because its cooling degrades shows it in proportion
//! to its power: under load it reads degrees above what its SKU reads at
//! that load, idle it reads almost nothing. An idle spell is therefore no
//! news about the cooling, not a recovery, and it must not resolve a
//! thermal warning that the next training step raises again. At held-back
//! seed 109 of the randomised-precursor family one hot GPU's warning
//! resolved in each idle spell and fired six times in four days.
//!
//! So while a GPU is idle or lightly loaded after being flagged hot under
//! load, its thermal component is [`THERMAL_HOLD`]: between the default
//! `resolve_below` and `fire_at`, it keeps a firing warning and never
//! starts one. Loaded again, the reading decides: still warm refreshes it,
//! cool under load (below [`COOL`]) for half an hour forgets it. After [`HOLD_MAX_MS`]
//! without a loaded reading the memory lapses. "Loaded" is busy training
//! or inference (utilisation ≥ 50 %): a job's checkpoint spell is idle for
//! the cooling, too.

use features::hash::FxBuild;
use features::{Col, FeatureRow, GpuId};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use super::rules::THERMAL_FLAGS;
use super::{Evidence, KINDS, Kind};

/// The thermal value held through an idle spell (the default policy's
/// `resolve_below` is 0.25 and `fire_at` 0.5).
pub const THERMAL_HOLD: f32 = 0.3;

/// A loaded reading whose thermal value is below this is cool: the
/// memory is forgotten.
const COOL: f32 = 0.2;

/// How long a GPU must read cool under load to end the memory.
const COOL_FOR_MS: i64 = 30 * 60_000;

/// Utilisation, %, from which a training or inference row is under load.
const LOADED_UTIL: f32 = 50.0;

/// How long an idle spell may hold a reading.
pub const HOLD_MAX_MS: i64 = 12 * 3_600_000;

/// The last loaded reading that flagged the GPU hot.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Loaded {
    ts_ms: i64,
    /// Smoothed residual then, °C.
    resid: f32,
    /// Since when the GPU reads cool under load.
    #[serde(default)]
    cool_since_ms: Option<i64>,
}

/// Per GPU: its last hot reading under load.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ThermalHold {
    hot: HashMap<GpuId, Loaded, FxBuild>,
}

impl ThermalHold {
    /// Applies the hold to a row's components (after the rules and the
    /// change tests have set them).
    pub fn apply(
        &mut self,
        row: &FeatureRow,
        components: &mut [f32; KINDS],
        reasons: &mut Vec<(Kind, Evidence)>,
    ) {
        let phase = row.get(Col::PhaseCode);
        if !phase.is_finite() {
            return;
        }
        let thermal = components[Kind::ThermalDegradation as usize];
        // Busy training or inference: the reading counts. (A job's
        // low-utilisation spells — checkpoints, evaluation — are idle for
        // the cooling.)
        let util = row.get(Col::GpuUtil);
        if phase >= 2.0 && util >= LOADED_UTIL {
            let reading = Loaded {
                ts_ms: row.ts_ms,
                resid: row.get(Col::GpuTempResidEwma),
                cool_since_ms: None,
            };
            if thermal >= THERMAL_FLAGS {
                self.hot.insert(row.gpu.clone(), reading);
                return;
            }
            let Some(last) = self.hot.get_mut(&row.gpu) else {
                return;
            };
            if thermal >= COOL {
                // Still warm under load (a firing warning's hysteresis).
                *last = reading;
                return;
            }
            // Cool under load: the smoothed residual and the heat sink lag
            // a return to load by some minutes, so only a cool half hour
            // ends the memory; until then the reading is no news either.
            let since = *last.cool_since_ms.get_or_insert(row.ts_ms);
            if row.ts_ms - since >= COOL_FOR_MS {
                self.hot.remove(&row.gpu);
                return;
            }
        }
        let Some(last) = self.hot.get(&row.gpu).copied() else {
            return;
        };
        if row.ts_ms - last.ts_ms > HOLD_MAX_MS {
            self.hot.remove(&row.gpu);
            return;
        }
        if thermal < THERMAL_HOLD {
            components[Kind::ThermalDegradation as usize] = THERMAL_HOLD;
            let h = (row.ts_ms - last.ts_ms) as f64 / 3_600_000.0;
            reasons.push((
                Kind::ThermalDegradation,
                Evidence {
                    signal: "DCGM_FI_DEV_GPU_TEMP".to_string(),
                    detail: format!(
                        "{:+.1} °C vs expected when last hot under load, {h:.1} h ago (held while idle or settling)",
                        last.resid
                    ),
                },
            ));
        }
    }

    /// Forgets a GPU (evicted or replaced).
    pub fn evict(&mut self, gpu: &str) {
        self.hot.remove(gpu);
    }

    pub fn heap_bytes(&self) -> usize {
        self.hot.capacity() * 48
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use features::{FEATURE_COUNT, Phase};

    fn row(ts_ms: i64, phase: f32, resid: f32) -> FeatureRow {
        let mut values = [f32::NAN; FEATURE_COUNT];
        values[Col::PhaseCode as usize] = phase;
        values[Col::GpuTempResidEwma as usize] = resid;
        values[Col::GpuUtil as usize] = if phase >= 2.0 { 97.0 } else { 0.0 };
        FeatureRow {
            ts_ms,
            gpu: "GPU-h".into(),
            topo: Default::default(),
            phase: Phase::Training,
            values,
        }
    }

    /// The thermal component after the rules and the hold.
    fn thermal(hold: &mut ThermalHold, r: &FeatureRow) -> f32 {
        let (mut c, mut reasons) = ([0.0; KINDS], Vec::new());
        super::super::rules::evaluate(r, None, true, &mut c, &mut reasons);
        hold.apply(r, &mut c, &mut reasons);
        c[Kind::ThermalDegradation as usize]
    }

    #[test]
    fn an_idle_spell_holds_a_hot_reading_and_a_cool_loaded_one_ends_it() {
        let mut hold = ThermalHold::default();
        // Idle with nothing remembered: nothing.
        assert_eq!(thermal(&mut hold, &row(0, 0.0, 0.5)), 0.0);
        // Hot under load (+10.3 °C: the rule's 0.5), then idle: held.
        assert!(thermal(&mut hold, &row(1_000, 2.0, 10.3)) >= THERMAL_FLAGS);
        assert_eq!(thermal(&mut hold, &row(60_000, 0.0, 0.4)), THERMAL_HOLD);
        assert_eq!(thermal(&mut hold, &row(3_600_000, 1.0, 1.0)), THERMAL_HOLD);
        // Loaded and still warm (between): the rule's own value, kept.
        let warm = thermal(&mut hold, &row(7_200_000, 3.0, 7.0));
        assert!(warm > COOL && warm < THERMAL_FLAGS);
        assert_eq!(thermal(&mut hold, &row(7_260_000, 0.0, 0.4)), THERMAL_HOLD);
        // A job's checkpoint spell (training, 8 % busy): idle, held.
        let mut spell = row(7_270_000, 2.0, 0.0);
        spell.values[Col::GpuUtil as usize] = 8.0;
        assert_eq!(thermal(&mut hold, &spell), THERMAL_HOLD);
        // Back under load, the residual still catching up: held...
        assert_eq!(thermal(&mut hold, &row(7_300_000, 2.0, 2.0)), THERMAL_HOLD);
        assert_eq!(thermal(&mut hold, &row(8_000_000, 2.0, 2.0)), THERMAL_HOLD);
        // ...until it has read cool under load for half an hour: forgotten,
        // and the next idle row is not held.
        assert_eq!(
            thermal(&mut hold, &row(7_300_000 + COOL_FOR_MS, 2.0, 2.0)),
            0.0
        );
        assert_eq!(thermal(&mut hold, &row(9_500_000, 0.0, 0.4)), 0.0);
    }

    #[test]
    fn a_long_idle_spell_lets_the_reading_lapse() {
        let mut hold = ThermalHold::default();
        thermal(&mut hold, &row(0, 2.0, 11.0));
        assert_eq!(
            thermal(&mut hold, &row(HOLD_MAX_MS, 0.0, 0.0)),
            THERMAL_HOLD
        );
        assert_eq!(thermal(&mut hold, &row(HOLD_MAX_MS + 1, 0.0, 0.0)), 0.0);
        // Lapsed for good.
        assert_eq!(thermal(&mut hold, &row(HOLD_MAX_MS + 2, 0.0, 0.0)), 0.0);
        hold.evict("GPU-h");
        assert!(hold.hot.is_empty());
    }
}
