//! The reference's two sequential statistics, pure and per GPU: a Poisson
//! CUSUM on a counter's increments against a known background rate, and a
//! one-sided Gaussian CUSUM on a standardised residual (temperature minus
//! the host peers' median) whose baseline the GPU learns per load level.

/// Poisson CUSUM for a rise of the event rate from `λ0` to `ρ·λ0`:
/// `S ← max(0, S + k·ln ρ − (ρ − 1)·λ0·Δt)` for `k` events in `Δt` hours
/// (the log-likelihood ratio of the two rates, reset at zero).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PoissonCusum {
    pub s: f64,
}

impl PoissonCusum {
    /// Adds `count` events seen over `dt_h` hours; returns the statistic.
    pub fn step(&mut self, count: f64, dt_h: f64, lambda0_per_h: f64, rho: f64) -> f64 {
        self.s = (self.s + count * rho.ln() - (rho - 1.0) * lambda0_per_h * dt_h).max(0.0);
        self.s
    }
}

/// Settings of the temperature statistic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TempSettings {
    /// CUSUM slack, in standard deviations.
    pub k: f64,
    /// Half-life of the baseline's mean and variance, hours.
    pub half_life_h: f64,
    /// Samples a load level's baseline needs before it is used.
    pub warm_samples: u32,
    /// Floor of the residual's standard deviation, °C (readings are whole
    /// degrees).
    pub sd_floor_c: f64,
    /// A single sample's z is clamped to ±this.
    pub z_clamp: f64,
}

impl Default for TempSettings {
    fn default() -> Self {
        TempSettings {
            k: 1.5,
            half_life_h: 6.0,
            warm_samples: 20,
            sd_floor_c: 1.0,
            z_clamp: 5.0,
        }
    }
}

/// A load level's baseline of the residual: exponentially weighted mean
/// and variance (plain averages over the first samples).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Baseline {
    n: u32,
    mean: f64,
    var: f64,
}

impl Baseline {
    fn push(&mut self, x: f64, alpha: f64) {
        self.n = self.n.saturating_add(1);
        let a = alpha.max(1.0 / f64::from(self.n));
        let d = x - self.mean;
        self.mean += a * d;
        self.var = (1.0 - a) * (self.var + a * d * d);
    }
}

/// Load levels the temperature baseline is kept for: power draw in
/// tenths of the power limit (the residual to peers grows with power).
pub const LOAD_LEVELS: usize = 10;

/// The load level of a power draw: `power / limit` in tenths, 0..=9.
pub fn load_level(power_w: f64, limit_w: f64) -> usize {
    if !(power_w.is_finite() && limit_w > 0.0) {
        return 0;
    }
    ((power_w / limit_w * 10.0).max(0.0) as usize).min(LOAD_LEVELS - 1)
}

/// One-sided Gaussian CUSUM on `residual` standardised by the GPU's own
/// baseline at the current load level: `S ← max(0, S + z − k)`. The
/// baseline keeps learning, slowly (half-life hours), with outliers
/// winsorised at 3 σ.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TempCusum {
    base: [Baseline; LOAD_LEVELS],
    pub s: f64,
}

impl TempCusum {
    /// One sample's residual (°C) at `level`, `dt_h` after the last.
    pub fn step(&mut self, residual: f64, level: usize, dt_h: f64, cfg: &TempSettings) -> f64 {
        let alpha = 1.0 - (-dt_h * std::f64::consts::LN_2 / cfg.half_life_h).exp();
        let b = &mut self.base[level.min(LOAD_LEVELS - 1)];
        if b.n < cfg.warm_samples {
            b.push(residual, alpha);
            return self.s;
        }
        let sd = b.var.sqrt().max(cfg.sd_floor_c);
        let z = ((residual - b.mean) / sd).clamp(-cfg.z_clamp, cfg.z_clamp);
        self.s = (self.s + z - cfg.k).max(0.0);
        // The baseline follows slowly (its half-life), an outlier counting
        // as 3 σ: a lasting shift is found long before it is learnt.
        b.push(b.mean + sd * z.clamp(-3.0, 3.0), alpha);
        self.s
    }
}

/// The median of `v` (sorted in place); `None` when empty.
pub fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    })
}

/// The increment of a cumulative counter from `prev` to `cur`: a value
/// that went down was reset (a driver reload) and counts from 0.
pub fn increment(prev: f64, cur: f64) -> f64 {
    if cur >= prev {
        cur - prev
    } else {
        cur.max(0.0)
    }
}
