//! Change detection on the degradation signals (issue #29): per GPU,
//! sequential tests of "this GPU has departed from its own baseline",
//! beside the level rules of [`super::rules`] in the shard's assessment.
//!
//! Each signal is read in five-minute buckets (so that neighbouring
//! samples, which share a thermal time constant or a burst, count once):
//! - counters (correctable ECC, NVLink CRC / replay / recovery, PCIe
//!   replays): a Poisson CUSUM of the bucket's count against `λ0 · t`,
//!   where `λ0` is the GPU's own long-run rate, shrunk towards its SKU's
//!   background in the shard while the GPU's history is short; the
//!   alternative is `ρ · λ0`;
//! - the temperature residual (`gpu_temp_resid`: actual minus expected at
//!   this load and the host's air, so a warmer room moves every GPU's
//!   expectation, not its residual): a Gaussian CUSUM of the bucket mean
//!   for a one-σ shift, standardised by the GPU's own mean and spread in
//!   the same workload phase (the expectation fits some phases better than
//!   others), corrected for the buckets' lag-1 correlation; buckets that
//!   span a change of phase are not judged.
//!
//! Each bucket adds its log-likelihood ratio, clipped so that one burst
//! cannot decide alone; the statistic is floored at 0. The thresholds come
//! from the alert budgets, not from a fit: a CUSUM of log-likelihood ratios
//! raises a false alarm no more than once in `e^h` buckets on average
//! (Lorden), so `h = ln(buckets per day · 1,000 / (budget per 1,000
//! GPU-days / signals))`, one `h` for warnings and a higher one for pages.
//! The statistic maps to a risk: 0.6 (a warning's `fire_at`) at the warning
//! threshold, 0.85 (where `hbm_ecc_trend` pages) at the page threshold.
//!
//! Baselines learn with a half-life of three days (a day absorbed
//! precursors that grow over 10–20 h), and only at a tenth of that pace
//! while the statistic stands above a quarter of the warning threshold, so
//! a slow precursor is not absorbed as the new normal.
//!
//! Not done, on purpose: a test against the SKU's mean background (which
//! would see precursors already under way when a GPU's history begins).
//! Healthy GPUs' own backgrounds are heavy-tailed — 16–20 × the SKU's mean
//! on the simulator's quiet fleets — so such a test raised 34–41 false
//! warnings per 1,000 GPU-days against a budget of 10.

use std::sync::Arc;

use features::hash::FxBuild;
use features::{Col, FeatureRow, GpuId};
use serde::{Deserialize, Serialize};

use super::{Evidence, KINDS, Kind};

/// Bucket length, event time.
pub const BUCKET_MS: i64 = 300_000;
const BUCKETS_PER_DAY: f64 = 86_400_000.0 / BUCKET_MS as f64;
/// GPU-hours a SKU's background rate remembers.
const BACKGROUND_CAP_H: f64 = 10_000.0;

/// One signal under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Ecc,
    Nvlink,
    Pcie,
    Thermal,
}

impl Signal {
    pub const ALL: [Signal; 4] = [Signal::Ecc, Signal::Nvlink, Signal::Pcie, Signal::Thermal];

    /// The alert kind the signal's evidence belongs to.
    pub const fn kind(self) -> Kind {
        match self {
            Signal::Ecc => Kind::HbmEccTrend,
            Signal::Nvlink => Kind::NvlinkErrors,
            Signal::Pcie => Kind::PcieErrors,
            Signal::Thermal => Kind::ThermalDegradation,
        }
    }

    const fn counts(self) -> bool {
        !matches!(self, Signal::Thermal)
    }

    /// Background rate per hour assumed before anything is known (a
    /// healthy GPU's order of magnitude; the SKU's measured background
    /// replaces it within hours).
    const fn prior_rate_h(self) -> f64 {
        match self {
            Signal::Ecc => 0.5,
            Signal::Nvlink => 2.0,
            Signal::Pcie => 2.0,
            Signal::Thermal => 0.0,
        }
    }

    /// This row's value: a count since the previous sample, or a gauge
    /// (NaN: no information).
    fn value(self, row: &FeatureRow) -> f64 {
        let g = |c: Col| {
            let v = f64::from(row.get(c));
            if v.is_finite() && v >= 0.0 { v } else { 0.0 }
        };
        match self {
            Signal::Ecc => g(Col::EccSbeDelta),
            Signal::Nvlink => {
                g(Col::NvlinkCrcFlitDelta)
                    + g(Col::NvlinkCrcDataDelta)
                    + g(Col::NvlinkReplayDelta)
                    + g(Col::NvlinkRecoveryDelta)
            }
            Signal::Pcie => g(Col::PcieReplayDelta),
            Signal::Thermal => f64::from(row.get(Col::GpuTempResid)),
        }
    }

    fn signal_name(self) -> &'static str {
        match self {
            Signal::Ecc => "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            Signal::Nvlink => "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            Signal::Pcie => "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
            Signal::Thermal => "DCGM_FI_DEV_GPU_TEMP",
        }
    }
}

/// The tests' settings; thresholds follow from the budgets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChangeConfig {
    /// False warnings allowed per 1,000 GPU-days, all signals together.
    pub warn_budget: f64,
    /// False pages allowed per 1,000 GPU-days, all signals together: a
    /// tenth of the fleet's page budget, whose rest belongs to the hard
    /// failure rules.
    pub page_budget: f64,
    /// The counters' alternative rate, as a multiple of the baseline.
    pub rate_ratio: f64,
    /// The gauge's alternative shift, in its own standard deviations.
    pub shift_sd: f64,
    /// Largest log-likelihood ratio one bucket adds.
    pub clip: f64,
    /// Baseline half-life, hours of the GPU's own data.
    pub half_life_h: f64,
    /// Hours of a GPU's own data before its tests count.
    pub warm_up_h: f64,
    /// The smallest spread assumed for a temperature residual, °C: below
    /// it a steady GPU's tenths of a degree would look like changes.
    #[serde(default = "default_min_sd")]
    pub min_sd: f64,
}

fn default_min_sd() -> f64 {
    1.5
}

impl Default for ChangeConfig {
    fn default() -> Self {
        ChangeConfig {
            warn_budget: 10.0,
            page_budget: 0.1,
            rate_ratio: 3.0,
            shift_sd: 2.0,
            clip: 4.0,
            half_life_h: 72.0,
            warm_up_h: 4.0,
            min_sd: default_min_sd(),
        }
    }
}

impl ChangeConfig {
    /// The CUSUM threshold at which false alarms stay within `budget` per
    /// 1,000 GPU-days, shared by every signal.
    pub fn threshold(&self, budget: f64) -> f64 {
        let per_signal = budget.max(1e-6) / Signal::ALL.len() as f64;
        (BUCKETS_PER_DAY * 1000.0 / per_signal).ln()
    }

    /// The risk of a statistic `s`: 0.6 at the warning threshold, 0.85 at
    /// the page threshold, 0.95 at most.
    pub fn risk(&self, s: f64) -> f32 {
        let (w, p) = (
            self.threshold(self.warn_budget),
            self.threshold(self.page_budget),
        );
        let r = if s < w {
            0.6 * s / w
        } else {
            0.6 + 0.25 * (s - w) / (p - w).max(1e-9)
        };
        r.clamp(0.0, 0.95) as f32
    }
}

/// One signal of one GPU.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Stat {
    bucket: i64,
    /// The open bucket: sum of values, rows, hours covered.
    sum: f64,
    n: u32,
    hours: f64,
    /// Baseline: decayed sums (counts and hours; or mean and variance of
    /// bucket means).
    base_a: f64,
    base_b: f64,
    base_h: f64,
    /// The CUSUM statistic and when it last rose from 0.
    s: f64,
    since_ms: i64,
    /// Counts (or buckets) since it rose, for the reason.
    excess: f64,
    /// Gauges: the previous bucket's standardised value and the lag-1
    /// autocorrelation of the standardised values.
    prev_u: f64,
    lag1: f64,
    /// Counters: buckets learned from and their dispersion (var / mean).
    nb: u32,
    disp: f64,
    /// The temperature: the open bucket's workload phase ([`MIXED`] when
    /// it changed within), and per phase the mean, variance and hours of
    /// the bucket means.
    phase: u8,
    phases: [(f64, f64, f64); 4],
}

/// A bucket whose rows are not all of one workload phase.
const MIXED: u8 = u8::MAX;

/// Counts and hours per counter signal of one SKU's GPUs.
type SkuBackground = [(f64, f64); 3];

/// Per-GPU change state and the shard's background rates per SKU.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ChangeDetector {
    #[serde(default)]
    config: ChangeConfig,
    gpus: std::collections::HashMap<GpuId, [Stat; 4], FxBuild>,
    /// Per SKU (a handful: searched in order) and counter signal: counts
    /// and hours of every GPU.
    background: Vec<(Option<Arc<str>>, SkuBackground)>,
}

impl ChangeDetector {
    pub fn new(config: ChangeConfig) -> Self {
        ChangeDetector {
            config,
            ..ChangeDetector::default()
        }
    }

    pub fn evict(&mut self, gpu: &str) {
        self.gpus.remove(gpu);
    }

    pub fn heap_bytes(&self) -> usize {
        self.gpus.len() * (std::mem::size_of::<[Stat; 4]>() + 48)
    }

    /// Feeds one row; when a bucket closes, updates the tests and, past
    /// warm-up, raises the components of signals that departed.
    pub fn assess(
        &mut self,
        row: &FeatureRow,
        warm: bool,
        components: &mut [f32; KINDS],
        reasons: &mut Vec<(Kind, Evidence)>,
    ) {
        let cfg = self.config;
        let bucket = row.ts_ms.div_euclid(BUCKET_MS);
        let interval_h = {
            let s = f64::from(row.get(Col::IntervalS));
            if s.is_finite() && s > 0.0 && s < 600.0 {
                s / 3600.0
            } else {
                0.0
            }
        };
        let sku = &row.topo.model;
        let at = match self.background.iter().position(|(m, _)| m == sku) {
            Some(i) => i,
            None => {
                self.background.push((sku.clone(), [(0.0, 0.0); 3]));
                self.background.len() - 1
            }
        };
        let bg = &mut self.background[at].1;
        let stats = match self.gpus.get_mut(&row.gpu) {
            Some(s) => s,
            None => self
                .gpus
                .entry(row.gpu.clone())
                .or_insert_with(|| std::array::from_fn(|_| Stat::default())),
        };
        for (i, sig) in Signal::ALL.iter().copied().enumerate() {
            let st = &mut stats[i];
            if st.bucket != bucket {
                if st.n > 0 {
                    let b = if sig.counts() { Some(&mut bg[i]) } else { None };
                    close_bucket(&cfg, sig, st, b, row.ts_ms);
                }
                st.bucket = bucket;
                (st.sum, st.n, st.hours) = (0.0, 0, 0.0);
            }
            if sig == Signal::Thermal {
                // The bucket's workload phase; a bucket that spans a
                // change of phase is not judged.
                let ph = row.get(Col::PhaseCode);
                let ph = if ph.is_finite() && (0.0..4.0).contains(&ph) {
                    ph as u8
                } else {
                    MIXED
                };
                st.phase = if st.n == 0 || st.phase == ph {
                    ph
                } else {
                    MIXED
                };
            }
            let v = sig.value(row);
            if v.is_finite() {
                st.sum += v;
                st.n += 1;
                st.hours += interval_h;
            }
            if !warm || st.base_h < cfg.warm_up_h || st.s <= 0.0 {
                continue;
            }
            let r = cfg.risk(st.s);
            if r < 0.2 {
                continue;
            }
            let k = sig.kind();
            let c = &mut components[k as usize];
            *c = c.max(r);
            reasons.push((k, evidence(&cfg, sig, st, row.ts_ms)));
        }
    }
}

/// Closes a bucket: the test's step, then the baselines.
fn close_bucket(
    cfg: &ChangeConfig,
    sig: Signal,
    st: &mut Stat,
    bg: Option<&mut (f64, f64)>,
    now_ms: i64,
) {
    let decay_of = |h: f64, slow: bool| {
        let hl = if slow {
            cfg.half_life_h * 10.0
        } else {
            cfg.half_life_h
        };
        0.5f64.powf(h / hl)
    };
    let quarter = cfg.threshold(cfg.warn_budget) / 4.0;
    let llr = if sig.counts() {
        if st.hours <= 0.0 {
            return;
        }
        let bg = bg.as_deref().map_or((0.0, 0.0), |b| *b);
        let sku_rate = if bg.1 > 1.0 {
            bg.0 / bg.1
        } else {
            sig.prior_rate_h()
        }
        .max(sig.prior_rate_h() / 20.0);
        // The GPU's own rate, with its SKU's background worth 2 h.
        let prior_h = 2.0;
        let lambda0 = (st.base_a + sku_rate * prior_h) / (st.base_h + prior_h);
        let rho = cfg.rate_ratio;
        // Quasi-Poisson: counts that come in bursts (var/mean = D > 1)
        // carry 1/D of a Poisson count's evidence. D is the mean squared
        // Pearson residual of the GPU's own buckets, learned while it
        // shows no change.
        let expected = (lambda0 * st.hours).max(1e-9);
        let dispersion = st.disp.max(1.0);
        let llr = (st.sum * rho.ln() - (rho - 1.0) * expected) / dispersion;
        if st.s <= quarter {
            st.nb = st.nb.saturating_add(1);
            let a = 1.0 / f64::from(st.nb.min(288));
            let r2 = ((st.sum - expected).powi(2) / expected).min(400.0);
            st.disp = if st.nb == 1 {
                r2.max(1.0)
            } else {
                st.disp * (1.0 - a) + a * r2
            };
        }
        let d = decay_of(st.hours, st.s > quarter);
        st.base_a = st.base_a * d + st.sum;
        st.base_b = 0.0;
        st.base_h = st.base_h * d + st.hours;
        llr
    } else {
        // The temperature residual's usual level differs by workload
        // (the expected-temperature model fits some phases better): one
        // baseline per phase, judged once that phase has an hour of data.
        let Some(base) = st.phases.get_mut(usize::from(st.phase)) else {
            return;
        };
        let x = st.sum / f64::from(st.n.max(1));
        let h = BUCKET_MS as f64 / 3.6e6;
        let (mean, var, seen_h) = *base;
        let sd = var.max(0.0).sqrt().max(cfg.min_sd);
        let u = if seen_h >= 1.0 { (x - mean) / sd } else { 0.0 };
        let delta = cfg.shift_sd;
        // Neighbouring buckets of a temperature are correlated (lag-1 φ,
        // learned per GPU): n of them carry the evidence of n(1−φ)/(1+φ)
        // independent ones, so each bucket counts for that much.
        let d = decay_of(h, st.s > quarter);
        if st.base_h > 0.0 {
            // A prior of 0.6 until ~50 buckets have been seen.
            const A: f64 = 1.0 / 50.0;
            st.lag1 = st.lag1 * (1.0 - A) + A * (u * st.prev_u).clamp(-4.0, 4.0);
        } else {
            st.lag1 = 0.6;
        }
        st.prev_u = u.clamp(-4.0, 4.0);
        let phi = st.lag1.clamp(0.0, 0.9);
        let llr = delta * (u - delta / 2.0) * (1.0 - phi) / (1.0 + phi);
        // Exponentially weighted mean and variance of bucket means.
        let w_old = seen_h * d;
        let w = w_old + h;
        let new_mean = (mean * w_old + x * h) / w;
        let new_var = if seen_h > 0.0 {
            (w_old * (var + (mean - new_mean).powi(2)) + h * (x - new_mean).powi(2)) / w
        } else {
            1.0
        };
        *base = (new_mean, new_var, w);
        st.base_a = new_mean;
        st.base_h = st.base_h * d + h;
        llr
    };
    if let Some(b) = bg {
        // The SKU's background: every GPU's buckets, the oldest scaled
        // away past 10,000 GPU-hours so that it follows the fleet.
        b.0 += st.sum;
        b.1 += st.hours;
        if b.1 > BACKGROUND_CAP_H {
            let f = BACKGROUND_CAP_H / b.1;
            b.0 *= f;
            b.1 *= f;
        }
    }
    let llr = llr.min(cfg.clip);
    if st.base_h < cfg.warm_up_h {
        // Still learning what is usual: no evidence accumulates yet.
        st.s = 0.0;
        return;
    }
    if st.s <= 0.0 && llr > 0.0 {
        st.since_ms = now_ms;
        st.excess = 0.0;
    }
    st.s = (st.s + llr).max(0.0);
    if st.s > 0.0 {
        st.excess += if sig.counts() { st.sum } else { 1.0 };
    }
}

fn evidence(cfg: &ChangeConfig, sig: Signal, st: &Stat, now_ms: i64) -> Evidence {
    let hours = (now_ms - st.since_ms).max(0) as f64 / 3.6e6;
    let warn = cfg.threshold(cfg.warn_budget);
    let detail = if sig.counts() {
        let base = st.base_a / st.base_h.max(1e-9);
        format!(
            "{} {:.0} in the last {hours:.1} h against this GPU's usual {base:.2}/h \
             (change test {:.1}, warns at {warn:.1})",
            match sig {
                Signal::Ecc => "correctable ECC errors",
                Signal::Nvlink => "NVLink CRC/replay errors",
                _ => "PCIe replays",
            },
            st.excess,
            st.s
        )
    } else {
        format!(
            "hotter than expected at this load for {hours:.1} h: {:+.1} °C against its usual \
             {:+.1} °C in this workload (change test {:.1}, warns at {warn:.1})",
            st.sum / f64::from(st.n.max(1)),
            st.base_a,
            st.s
        )
    };
    Evidence {
        signal: sig.signal_name().into(),
        detail,
    }
}

#[cfg(test)]
#[path = "change_tests.rs"]
mod tests;
