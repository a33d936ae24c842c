//! The change tests' settings (part of [`super`]): the budgets and
//! alternatives, and what follows from them — the CUSUM thresholds
//! (Lorden's bound) and the map from a statistic to its kind's risk.

use serde::{Deserialize, Serialize};

use super::{BUCKETS_PER_DAY, Signal};

/// The tests' settings; thresholds follow from the budgets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChangeConfig {
    /// False warnings allowed per 1,000 GPU-days, all signals together.
    pub warn_budget: f64,
    /// False pages allowed per 1,000 GPU-days, all signals together: a
    /// tenth of the fleet's page budget, whose rest belongs to the hard
    /// failure rules.
    pub page_budget: f64,
    /// The counters' alternative rates, as multiples of the baseline: a
    /// slow and a fast one, each its own CUSUM (see the module docs).
    /// One test at 3× gained nothing on a 4× ramp until the rate stood
    /// 1.8× above the baseline; at 2× it lost leads on steps.
    #[serde(default = "default_rate_ratios")]
    pub rate_ratios: [f64; 2],
    /// A third, steep alternative (a multiple of the baseline): a quiet
    /// GPU whose errors jump fifty-fold gains only ln 4 per error from
    /// the fast test, and its first handful of errors is already clear.
    #[serde(default = "default_steep_ratio")]
    pub steep_ratio: f64,
    /// The steep test judges against the baseline's upper bound, this many
    /// standard errors of a rate learned from its counts above it: its
    /// alternative is so far out that a baseline low by chance (a few
    /// errors in a short history) makes a healthy GPU's usual errors look
    /// like a jump.
    #[serde(default = "default_steep_margin_sd")]
    pub steep_margin_sd: f64,
    /// The gauge's alternative shift, in its own standard deviations.
    pub shift_sd: f64,
    /// Largest log-likelihood ratio one bucket adds to a counter's test:
    /// 6, so that no single bucket decides (three must, with the threshold
    /// near 12) while a jump's first buckets count for what they show. 4
    /// held a quiet GPU's jump to four buckets; with the dispersion lagged
    /// (a burst no longer inflates it at once), 6 warned earlier on most
    /// precursors and an hour ahead on more (docs/decisions/0002).
    pub clip: f64,
    /// The same for the temperature's tests: 4. A job's hot phase is ten
    /// minutes of +6 °C, two buckets; at 6 each they warned.
    #[serde(default = "default_gauge_clip")]
    pub gauge_clip: f64,
    /// Baseline half-life of the temperature's tests, hours of the GPU's
    /// own data.
    pub half_life_h: f64,
    /// Baseline half-life of the counters' tests: 180 h (7.5 days). A
    /// healthy GPU's background holds for weeks, and at three days a
    /// precursor that grows from it over one or two days was partly
    /// learnt as usual on the way (a correctable-ECC rate rising 0.36 →
    /// 2/h over 46 h kept the test at 2–4 of 11.9 throughout). Measured
    /// against 72 h: 27 seen full random-precursor seeds ≥ 1 h ahead 751 →
    /// 752, false warnings 52 → 51, 28 failures earlier and 3 later; the
    /// same ten seeds with precursors relative to the GPU's background 215
    /// → 216; every suite target unchanged (docs/decisions/0002).
    #[serde(default = "default_counter_half_life_h")]
    pub counter_half_life_h: f64,
    /// Hours of a GPU's own data before its tests count.
    pub warm_up_h: f64,
    /// The smallest spread assumed for the `Thermal` signal's bucket
    /// means, °C: half a degree, the readings' resolution (DCGM reports
    /// whole degrees, and a steady temperature near a half degree reads
    /// one or the other for hours). The feature stage's residual needed
    /// 1.5 °C (it wandered with the shared model); against the GPU's own
    /// fit less its host's air ([`super::fit`]) the median healthy GPU's
    /// spread was 0.2 °C.
    #[serde(default = "default_min_sd")]
    pub min_sd: f64,
}

fn default_counter_half_life_h() -> f64 {
    180.0
}

fn default_gauge_clip() -> f64 {
    4.0
}

fn default_min_sd() -> f64 {
    0.5
}

fn default_steep_ratio() -> f64 {
    16.0
}

fn default_steep_margin_sd() -> f64 {
    2.0
}

fn default_rate_ratios() -> [f64; 2] {
    [2.0, 4.0]
}

impl Default for ChangeConfig {
    fn default() -> Self {
        ChangeConfig {
            warn_budget: 10.0,
            page_budget: 0.1,
            rate_ratios: default_rate_ratios(),
            steep_ratio: default_steep_ratio(),
            steep_margin_sd: default_steep_margin_sd(),
            shift_sd: 2.0,
            clip: 6.0,
            gauge_clip: default_gauge_clip(),
            half_life_h: 72.0,
            counter_half_life_h: default_counter_half_life_h(),
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

    /// The largest log-likelihood ratio one bucket adds to `sig`'s test.
    pub fn clip_of(&self, sig: Signal) -> f64 {
        if sig.counts() {
            self.clip
        } else {
            self.gauge_clip
        }
    }

    /// A temperature baseline's decay over `h` hours: its half-life, ten
    /// times that while its test sees a change (`slow`), so a slow
    /// precursor is not learned as usual.
    pub fn decay(&self, h: f64, slow: bool) -> f64 {
        decay(self.half_life_h, h, slow)
    }

    /// The same for a counter's baseline ([`Self::counter_half_life_h`]).
    pub fn counter_decay(&self, h: f64, slow: bool) -> f64 {
        decay(self.counter_half_life_h, h, slow)
    }

    /// The statistic under which a test counts as quiet: its baselines
    /// learn at full pace and its rows teach the counters' weights (a
    /// quarter of the warning threshold).
    pub fn quiet_below(&self) -> f64 {
        self.threshold(self.warn_budget) / 4.0
    }

    /// The risk of a statistic `s` of `sig`: the shipped policy's warning
    /// `fire_at` of its kind at the warning threshold
    /// ([`Signal::warn_risk`]), 0.85 at the page threshold, 0.95 at most.
    /// (A fixed 0.6 at the warning threshold fired the kinds that warn at
    /// the default 0.5 five-sixths of the way there: ~7× the budget's
    /// false alarms by the bound below, and 11.7–12.7 false warnings per
    /// 1,000 GPU-days on full seeds 109 and 115.)
    pub fn risk(&self, sig: Signal, s: f64) -> f32 {
        let (w, p) = (
            self.threshold(self.warn_budget),
            self.threshold(self.page_budget),
        );
        let at = f64::from(sig.warn_risk());
        let r = if s < w {
            at * s / w
        } else {
            at + (PAGE_RISK - at) * (s - w) / (p - w).max(1e-9)
        };
        r.clamp(0.0, 0.95) as f32
    }
}

/// Decay over `h` hours at half-life `half_life_h`, ten times that when
/// `slow`.
fn decay(half_life_h: f64, h: f64, slow: bool) -> f64 {
    let hl = if slow {
        half_life_h * 10.0
    } else {
        half_life_h
    };
    0.5f64.powf(h / hl)
}

/// The risk at the page threshold (where `hbm_ecc_trend` pages).
const PAGE_RISK: f64 = 0.85;
