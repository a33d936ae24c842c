//! Memory-error trend forecasts: per GPU, how many hours until the HBM's
//! error budget runs out, with an interval, or none when nothing is trending.
//!
//! Sits beside the failure model in the models stage. Fed once per accepted
//! sample with a few counters read off the feature row; keeps ~200 bytes per
//! GPU (a ring of half-hour counts), and refits only when a bucket closes.
//!
//! Limits (each an ETA; the earliest wins):
//! - **correctable-ECC rate**: the single-bit rate is fitted as a Poisson
//!   process with a log-linear (exponential) rate over the last 16 h, by
//!   iteratively reweighted least squares (its growth judged against a
//!   standard error widened by the counts' overdispersion: bursts are not
//!   a trend); the ETA is when the fitted rate
//!   reaches [`TrendConfig::critical_sbe_per_h`], the rate at which HBM
//!   degradation turns into double-bit errors. There is no published NVIDIA
//!   figure for it: the default is the level at which the simulator's HBM
//!   degradation ends in a DBE; tune it on a fleet's own history.
//! - **row-remap budget** (A100 / H100 / H200 and later): "supports up to
//!   512 remappings for the frame buffer" (NVIDIA GPU Memory Error
//!   Management, Row Remapping, docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt).
//! - **retired-page limit** (older GPUs): "a maximum of 64 retirements for
//!   the frame buffer" (same table).
//!
//! Remapped rows and retired pages are assumed to grow at the same
//! exponential rate as the correctable errors that cause them (a remap is
//! triggered by repeated errors in a row), at their own current level.
//!
//! Change detection: the fit only uses buckets since the last counter
//! reset, and drops buckets older than the last quiet stretch (four quiet
//! buckets) before a run of errors, so an old burst does not flatten a new trend.

use serde::{Deserialize, Serialize};

/// Bucket length.
pub const BUCKET_MS: i64 = 30 * 60 * 1000;
/// Buckets kept (16 h).
pub const BUCKETS: usize = 32;
const BUCKET_H: f64 = BUCKET_MS as f64 / 3_600_000.0;

/// Limits and thresholds of the forecasts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrendConfig {
    /// Correctable (single-bit) ECC errors per hour at which HBM degradation
    /// is expected to produce an uncorrectable error.
    pub critical_sbe_per_h: f64,
    /// Remapped rows (correctable + uncorrectable) at which the remapper is
    /// out of spare rows.
    pub remap_budget_rows: f64,
    /// Retired pages at which page retirement is exhausted.
    pub retired_page_limit: f64,
    /// Forecasts further out than this are reported as none.
    pub horizon_h: f64,
}

impl Default for TrendConfig {
    fn default() -> Self {
        TrendConfig {
            critical_sbe_per_h: 400.0,
            remap_budget_rows: 512.0,
            retired_page_limit: 64.0,
            horizon_h: 7.0 * 24.0,
        }
    }
}

/// Which budget a forecast is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    SbeRate,
    RemapBudget,
    RetiredPages,
}

impl Limit {
    /// Operator words.
    pub const fn describe(self) -> &'static str {
        match self {
            Limit::SbeRate => "correctable ECC rate reaches the double-bit danger level",
            Limit::RemapBudget => "spare rows for row remapping run out",
            Limit::RetiredPages => "page retirement limit (64 pages) is reached",
        }
    }
}

/// A forecast: hours until `limit`, with a ~90% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Forecast {
    pub eta_h: f64,
    pub low_h: f64,
    pub high_h: f64,
    pub limit: Limit,
    /// Fitted correctable-ECC rate now, per hour.
    pub sbe_per_h: f64,
    /// Fitted growth of that rate, per hour (ln units).
    pub growth_per_h: f64,
}

/// Counters of one sample the trend reads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TrendInput {
    pub ts_ms: i64,
    /// Single-bit errors since the previous sample (NaN at a reset).
    pub sbe_delta: f64,
    /// Remapped rows so far (correctable + uncorrectable; NaN when absent).
    pub remapped_rows: f64,
    /// Retired pages so far (NaN when absent).
    pub retired_pages: f64,
}

/// One GPU's trend state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// Start of the open bucket; 0 before the first sample.
    open_ms: i64,
    open_count: u32,
    /// Closed buckets, oldest first, at most [`BUCKETS`].
    counts: Vec<u32>,
    /// Remapped rows and retired pages when each bucket closed.
    levels: Vec<[f32; 2]>,
    /// Fitted (log rate per bucket at the newest closed bucket, growth per
    /// bucket, its standard error); None when nothing is trending.
    fit: Option<(f64, f64, f64)>,
    remapped: f64,
    retired: f64,
}

impl Trend {
    pub fn new() -> Self {
        Trend::default()
    }

    /// Heap bytes held (the ring).
    pub fn heap_bytes(&self) -> usize {
        self.counts.capacity() * std::mem::size_of::<u32>()
            + self.levels.capacity() * std::mem::size_of::<[f32; 2]>()
    }

    /// Feeds one sample (in event-time order).
    pub fn update(&mut self, x: &TrendInput) {
        if self.open_ms == 0 {
            self.open_ms = x.ts_ms - x.ts_ms.rem_euclid(BUCKET_MS);
        }
        let mut closed = false;
        // A long silence (or a clock jump): start afresh rather than push
        // empty buckets. Checked first and in saturating arithmetic, so no
        // timestamp, however absurd, can overflow or spin this loop.
        if x.ts_ms.saturating_sub(self.open_ms) > BUCKET_MS * (BUCKETS as i64 + 1) {
            self.counts.clear();
            self.levels.clear();
            self.open_count = 0;
            self.open_ms = x.ts_ms - x.ts_ms.rem_euclid(BUCKET_MS);
            closed = true;
        }
        while let Some(end) = self.open_ms.checked_add(BUCKET_MS)
            && x.ts_ms >= end
        {
            if self.counts.len() == BUCKETS {
                self.counts.remove(0);
                self.levels.remove(0);
            }
            self.counts.push(self.open_count);
            self.levels
                .push([self.remapped as f32, self.retired as f32]);
            self.open_count = 0;
            self.open_ms = end;
            closed = true;
        }
        if x.sbe_delta.is_nan() {
            // Counter reset: the history no longer lines up with the counter.
            self.counts.clear();
            self.levels.clear();
            self.fit = None;
        } else if x.sbe_delta > 0.0 {
            self.open_count = self
                .open_count
                .saturating_add(x.sbe_delta.min(f64::from(u32::MAX)) as u32);
        }
        if x.remapped_rows.is_finite() {
            self.remapped = x.remapped_rows;
        }
        if x.retired_pages.is_finite() {
            self.retired = x.retired_pages;
        }
        if closed {
            self.fit = fit_counts(self.window());
        }
    }

    /// The buckets since the last quiet stretch before the current errors.
    fn window(&self) -> &[u32] {
        &self.counts[self.window_start()..]
    }

    fn window_start(&self) -> usize {
        let c = &self.counts;
        let mut quiet = 0;
        for i in (0..c.len()).rev() {
            if c[i] == 0 {
                quiet += 1;
                if quiet == 4 {
                    return i + 4;
                }
            } else {
                quiet = 0;
            }
        }
        0
    }

    /// The earliest limit's forecast at `now_ms`, or None.
    pub fn forecast(&self, cfg: &TrendConfig, now_ms: i64) -> Option<Forecast> {
        let (log_now, k, se) = self.fit?;
        // Buckets since the newest closed bucket's midpoint.
        let newest_mid = self.open_ms - BUCKET_MS / 2;
        let dt = (now_ms - newest_mid) as f64 / BUCKET_MS as f64;
        let log_rate = log_now + k * dt.max(0.0);
        let rate_h = log_rate.exp() / BUCKET_H;
        let k_h = k / BUCKET_H;
        let (k_lo, k_hi) = ((k - 1.645 * se) / BUCKET_H, (k + 1.645 * se) / BUCKET_H);
        let mut best: Option<Forecast> = None;
        let mut consider = |eta: Option<f64>, lo: Option<f64>, hi: Option<f64>, limit| {
            let Some(eta) = eta else { return };
            if eta > cfg.horizon_h {
                return;
            }
            let f = Forecast {
                eta_h: eta,
                low_h: lo.unwrap_or(0.0).min(eta),
                high_h: hi.unwrap_or(f64::INFINITY).max(eta),
                limit,
                sbe_per_h: rate_h,
                growth_per_h: k_h,
            };
            if best.is_none_or(|b| f.eta_h < b.eta_h) {
                best = Some(f);
            }
        };
        // Rate limit: ln(R*/r) / k.
        let to_rate = |k: f64| {
            if rate_h >= cfg.critical_sbe_per_h {
                Some(0.0)
            } else if k > 0.0 {
                Some((cfg.critical_sbe_per_h / rate_h).ln() / k)
            } else {
                None
            }
        };
        consider(to_rate(k_h), to_rate(k_hi), to_rate(k_lo), Limit::SbeRate);
        // Budgets that grow with the error rate: a count c growing at
        // dc/dt = v e^{kt} reaches B at t = ln(1 + k (B − c) / v) / k.
        let start = self.window_start();
        let span_h = (self.counts.len() - start) as f64 * BUCKET_H;
        for (j, level, budget, limit) in [
            (0, self.remapped, cfg.remap_budget_rows, Limit::RemapBudget),
            (1, self.retired, cfg.retired_page_limit, Limit::RetiredPages),
        ] {
            if level <= 0.0 {
                continue;
            }
            if level >= budget {
                consider(Some(0.0), Some(0.0), Some(0.0), limit);
                continue;
            }
            // Growth over the window: Δ = (v/k)(1 − e^{−kW}) → v now.
            let Some(first) = self.levels.get(start) else {
                continue;
            };
            let delta = level - f64::from(first[j]);
            if delta <= 0.0 || span_h <= 0.0 {
                continue;
            }
            let v = delta * k_h / (1.0 - (-k_h * span_h).exp());
            let to_budget =
                |k: f64| (k > 0.0 && v > 0.0).then(|| (1.0 + k * (budget - level) / v).ln() / k);
            consider(to_budget(k_h), to_budget(k_hi), to_budget(k_lo), limit);
        }
        best
    }
}

/// Fits counts[i] ~ Poisson(exp(a + k·i)) by IRLS; returns (a + k·last,
/// k, se(k)) when the growth is significant (k > 2 se, the standard error
/// scaled by the counts' overdispersion) and the newest rate is not
/// negligible, else None.
fn fit_counts(counts: &[u32]) -> Option<(f64, f64, f64)> {
    let n = counts.len();
    let total: u64 = counts.iter().map(|c| u64::from(*c)).sum();
    if n < 4 || total < 8 {
        return None;
    }
    let y: Vec<f64> = counts.iter().map(|c| f64::from(*c)).collect();
    // Start from a least-squares fit of log(count + 0.5).
    let (mut a, mut k) = wls(&y, |i| (y[i] + 0.5).ln(), |_| 1.0)?;
    let mut info = 0.0;
    for _ in 0..25 {
        let mu: Vec<f64> = (0..n)
            .map(|i| (a + k * i as f64).clamp(-30.0, 30.0).exp())
            .collect();
        // Working response z = η + (y − μ)/μ, weights μ.
        let eta = |i: usize| a + k * i as f64;
        let (na, nk) = wls(&y, |i| eta(i) + (y[i] - mu[i]) / mu[i], |i| mu[i])?;
        let (w_sum, wx, wxx) = (0..n).fold((0.0, 0.0, 0.0), |(s, sx, sxx), i| {
            let x = i as f64;
            (s + mu[i], sx + mu[i] * x, sxx + mu[i] * x * x)
        });
        info = wxx - wx * wx / w_sum;
        let done = (na - a).abs() < 1e-9 && (nk - k).abs() < 1e-9;
        a = na;
        k = nk;
        if done {
            break;
        }
    }
    if info.is_nan() || info <= 0.0 || !k.is_finite() {
        return None;
    }
    // Quasi-Poisson: errors that come in bursts (a weak cell read again
    // and again) scatter more than Poisson counts, and a few bursts in a
    // quiet window read as growth against the Poisson standard error. The
    // Pearson statistic over its degrees of freedom (never below 1)
    // widens it.
    // (Means floored at half an error: one stray error where the fit
    // expects 0.01 is a Pearson term of 100, and would hide a real trend.)
    let pearson: f64 = (0..n)
        .map(|i| {
            let mu = (a + k * i as f64).clamp(-30.0, 30.0).exp();
            (y[i] - mu).powi(2) / mu.max(0.5)
        })
        .sum();
    let dispersion = (pearson / (n - 2) as f64).max(1.0);
    let se = (dispersion / info).sqrt();
    (k > 2.0 * se).then_some((a + k * (n - 1) as f64, k, se))
}

/// Weighted least squares of z on the bucket index: (intercept, slope).
fn wls(y: &[f64], z: impl Fn(usize) -> f64, w: impl Fn(usize) -> f64) -> Option<(f64, f64)> {
    let (mut s, mut sx, mut sz, mut sxx, mut sxz) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for i in 0..y.len() {
        let (x, wi, zi) = (i as f64, w(i), z(i));
        s += wi;
        sx += wi * x;
        sz += wi * zi;
        sxx += wi * x * x;
        sxz += wi * x * zi;
    }
    let d = s * sxx - sx * sx;
    if d.is_nan() || d.abs() <= 1e-12 {
        return None;
    }
    let k = (s * sxz - sx * sz) / d;
    Some(((sz - k * sx) / s, k))
}

#[cfg(test)]
mod tests;
