//! Expected vs actual: online models of what a healthy GPU of a SKU shows in
//! a workload phase given its load, whose residuals are features. Part of
//! the feature stage, shared by all GPUs of a shard.
//!
//! One set of four recursive-least-squares regressions ([`rls::Rls`], on
//! ndarray) per (SKU, phase):
//! - GPU temperature given power smoothed with the thermal time constant
//!   (a first-order thermal model) and the inlet proxy ([`inlet`]);
//! - memory (HBM) temperature given the same;
//! - SM clock given utilization (clock under load: throttling shows as a
//!   negative residual);
//! - power given utilization (power per unit of utilization).
//!
//! Models learn only from GPUs that have settled in their phase, from every
//! `rls_update_stride`-th sample, and never from outliers (the gate in
//! `rls`), so a few degrading GPUs cannot teach them that hot is normal.

pub mod inlet;
pub mod rack;
pub mod rls;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::FeatureConfig;
use crate::peers::slab::KeyedSlab;
use crate::phase::{PHASE_COUNT, Phase};
use crate::state::smooth::Ewma;
use rls::{MAX_DIM, Rls};

/// Ambient used when neither a host proxy nor a model mean exists, °C.
const DEFAULT_INLET_C: f64 = 30.0;

/// The four models of one (SKU, phase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectedModels {
    temp: Rls,
    mem_temp: Rls,
    clock: Rls,
    power: Rls,
    /// Mean inlet proxy seen, used when a GPU has no host peers.
    proxy_mean: Ewma,
}

impl Default for ExpectedModels {
    fn default() -> Self {
        ExpectedModels {
            temp: Rls::new(3),
            mem_temp: Rls::new(3),
            clock: Rls::new(2),
            power: Rls::new(2),
            proxy_mean: Ewma::default(),
        }
    }
}

/// What one sample offers the models (NaN = missing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpectedInputs {
    pub gpu_temp: f32,
    pub memory_temp: f32,
    pub power_w: f32,
    pub power_ewma_w: f32,
    pub util: f32,
    pub sm_clock: f32,
    pub inlet_proxy: f32,
}

/// Expected values and residuals (actual − expected); NaN until the model
/// has warmed up or when an input is missing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expected {
    pub temp_expected: f32,
    pub temp_resid: f32,
    pub mem_temp_resid: f32,
    pub clock_resid: f32,
    pub power_resid: f32,
}

impl Expected {
    /// Nothing known.
    pub fn missing() -> Self {
        Expected {
            temp_expected: f32::NAN,
            temp_resid: f32::NAN,
            mem_temp_resid: f32::NAN,
            clock_resid: f32::NAN,
            power_resid: f32::NAN,
        }
    }
}

/// Largest variance of a temperature model's prediction
/// ([`Rls::prediction_var`]), °C²: beyond it the inputs lie where
/// the model has not learnt (a SKU's first host to go idle in a shard read
/// 6 °C expected at 34 °C, a +28 °C residual, the minute before its model
/// had seen that air), and the residual is missing rather than made up.
const MAX_PRED_VAR_C2: f64 = 4.0;

fn f(x: f32) -> f64 {
    f64::from(x)
}

/// Predicts with `model`, then (when `learn`) updates it; returns the
/// prediction and the residual against the pre-update weights.
fn step(
    model: &mut Rls,
    x: &[f64; MAX_DIM],
    y: f32,
    learn: bool,
    cfg: &FeatureConfig,
    max_pred_var: Option<f64>,
) -> (f32, f32) {
    let ready = model.ready(cfg.rls_warmup)
        && max_pred_var.is_none_or(|max| model.prediction_var(x) <= max);
    let pred = model.predict(x);
    if learn && y.is_finite() {
        model.update(x, f(y), cfg.rls_lambda, cfg.rls_warmup);
    }
    if ready && y.is_finite() && x.iter().all(|v| v.is_finite()) {
        (pred as f32, (f(y) - pred) as f32)
    } else {
        (f32::NAN, f32::NAN)
    }
}

/// The models of every SKU, keyed by `modelName` (`None` = unknown SKU).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelBank {
    skus: KeyedSlab<Option<Arc<str>>, Vec<ExpectedModels>>,
}

impl ModelBank {
    /// The id of a SKU's models. SKUs are never dropped, so ids are stable.
    pub fn resolve(&mut self, sku: &Option<Arc<str>>) -> u32 {
        self.skus
            .resolve(sku, || vec![ExpectedModels::default(); PHASE_COUNT])
    }

    /// Residuals of one sample; updates the models when `learn`.
    pub fn evaluate(
        &mut self,
        sku: u32,
        phase: Phase,
        inp: &ExpectedInputs,
        learn: bool,
        cfg: &FeatureConfig,
    ) -> Expected {
        let nan = Expected::missing();
        let Some(m) = self
            .skus
            .get_mut(sku)
            .and_then(|v| v.get_mut(phase as usize))
        else {
            return nan;
        };
        let proxy = if inp.inlet_proxy.is_finite() {
            if learn {
                m.proxy_mean.update(inp.inlet_proxy, 0.01);
            }
            f(inp.inlet_proxy)
        } else if m.proxy_mean.value.is_finite() {
            f(m.proxy_mean.value)
        } else {
            DEFAULT_INLET_C
        };
        let thermal = [1.0, f(inp.power_ewma_w) / 100.0, proxy / 10.0, 0.0];
        let load = [1.0, f(inp.util) / 100.0, 0.0, 0.0];
        let c2 = Some(MAX_PRED_VAR_C2);
        let (temp_expected, temp_resid) = step(&mut m.temp, &thermal, inp.gpu_temp, learn, cfg, c2);
        let (_, mem_temp_resid) = step(&mut m.mem_temp, &thermal, inp.memory_temp, learn, cfg, c2);
        let (_, clock_resid) = step(&mut m.clock, &load, inp.sm_clock, learn, cfg, None);
        let (_, power_resid) = step(&mut m.power, &load, inp.power_w, learn, cfg, None);
        Expected {
            temp_expected,
            temp_resid,
            mem_temp_resid,
            clock_resid,
            power_resid,
        }
    }

    /// Approximate heap bytes held.
    pub fn approx_heap_bytes(&self) -> usize {
        self.skus.table_heap_bytes()
            + self.skus.len() * PHASE_COUNT * std::mem::size_of::<ExpectedModels>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_is_normal_under_load_and_abnormal_at_idle() {
        let cfg = FeatureConfig::default();
        let mut bank = ModelBank::default();
        let sku = bank.resolve(&Some("H100".into()));
        for i in 0..400 {
            let wobble = (i % 7) as f32;
            // The air varies on its own (not with this GPU's power).
            let air = (i % 5) as f32 / 4.0;
            let idle = ExpectedInputs {
                gpu_temp: 32.0 + 0.02 * wobble * 10.0 + air,
                memory_temp: 35.0,
                power_w: 70.0 + wobble,
                power_ewma_w: 70.0 + wobble,
                util: 0.0,
                sm_clock: 345.0,
                inlet_proxy: 31.0 + air,
            };
            bank.evaluate(sku, Phase::Idle, &idle, true, &cfg);
            let busy = ExpectedInputs {
                gpu_temp: 70.0 + 0.05 * wobble * 10.0 + 4.0 * air,
                power_w: 650.0 + 10.0 * wobble,
                power_ewma_w: 650.0 + 10.0 * wobble,
                util: 95.0 + wobble / 2.0,
                sm_clock: 1980.0,
                memory_temp: 75.0,
                inlet_proxy: 68.0 + 4.0 * air,
            };
            bank.evaluate(sku, Phase::Training, &busy, true, &cfg);
        }
        let hot = ExpectedInputs {
            gpu_temp: 72.0,
            memory_temp: 75.0,
            power_w: 655.0,
            power_ewma_w: 655.0,
            util: 96.0,
            sm_clock: 1980.0,
            inlet_proxy: 70.0,
        };
        let train = bank.evaluate(sku, Phase::Training, &hot, false, &cfg);
        assert!(train.temp_resid.abs() < 3.0, "{train:?}");
        let idle_hot = ExpectedInputs {
            power_w: 72.0,
            power_ewma_w: 72.0,
            util: 0.0,
            sm_clock: 345.0,
            inlet_proxy: 31.0,
            ..hot
        };
        let idle = bank.evaluate(sku, Phase::Idle, &idle_hot, false, &cfg);
        assert!(idle.temp_resid > 30.0, "{idle:?}");
    }

    /// A model that has only seen one air (the first host of its SKU to go
    /// idle in a shard) cannot say what another air gives: no residual,
    /// where it had made up a +28 °C one; the air it knows still predicts.
    #[test]
    fn air_the_model_never_saw_vary_gives_no_residual() {
        let cfg = FeatureConfig::default();
        let mut bank = ModelBank::default();
        let sku = bank.resolve(&Some("H100".into()));
        let at = |power: f32, air: f32| ExpectedInputs {
            gpu_temp: 0.9 * air + 0.02 * power + 3.0,
            memory_temp: 35.0,
            power_w: power,
            power_ewma_w: power,
            util: 0.0,
            sm_clock: 345.0,
            inlet_proxy: air,
        };
        for i in 0..200 {
            let power = 70.0 + (i % 7) as f32;
            bank.evaluate(sku, Phase::Idle, &at(power, 31.0), true, &cfg);
        }
        let known = bank.evaluate(sku, Phase::Idle, &at(73.0, 31.0), false, &cfg);
        assert!(known.temp_resid.abs() < 0.5, "{known:?}");
        let other = bank.evaluate(sku, Phase::Idle, &at(73.0, 37.0), false, &cfg);
        assert!(other.temp_resid.is_nan(), "{other:?}");
    }
}
