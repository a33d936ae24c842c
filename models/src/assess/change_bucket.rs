//! The change tests' step per closed five-minute bucket ([`close_bucket`]):
//! the counters' quasi-Poisson CUSUM against the GPU's lagged own rate
//! (or its SKU's median for a newcomer, its SKU's upper decile while it
//! warms up), the temperature's Gaussian CUSUM per workload phase, the
//! baselines' learning; and the reason text a departure carries
//! ([`evidence`]). Part of [`super`]: the detector routes rows into
//! buckets, this judges them.

use super::*;

/// How far apart a baseline's snapshots are (the counters' `Stat::lagged`,
/// the temperature fit's moments): a test compares with the older, so
/// the last 2–4 h are not yet part of what it calls usual.
const GUARD_MS: i64 = 2 * 3_600_000;

/// Takes a snapshot of `current` into `lagged` when the newer one is
/// [`GUARD_MS`] old (`at_ms`: when it was taken); `lagged[0]` is the one
/// to compare with. Says whether it took one (state lagged beside it
/// moves on with it).
pub(super) fn snapshot<T: Copy>(
    lagged: &mut [T; 2],
    at_ms: &mut i64,
    now_ms: i64,
    current: T,
) -> bool {
    let due = now_ms - *at_ms >= GUARD_MS;
    if due {
        *lagged = [lagged[1], current];
        *at_ms = now_ms;
    }
    due
}

/// The `Thermal` spread test's alternative: the residual's spread above
/// its usual level doubled.
const SPREAD_RATIO: f64 = 2.0;

/// Expected counts a dispersion estimate is worth before the GPU's own
/// buckets move it from 1 (Poisson).
const DISPERSION_PRIOR: f64 = 5.0;

/// Hours of its own (lagged) history before a newcomer's dispersion
/// counts: until then its counts are read as Poisson. Its first buckets
/// may all be a precursor under way when it joined, and the dispersion
/// they teach divided its evidence (replacement scenario: newcomers
/// trailed their incumbent twins by a median 17 min over 13 seeds; 0 to
/// −84 min after).
const NEWCOMER_TRUST_H: f64 = 12.0;

/// A counter's SKU, as its GPUs with an hour of data show it (once three
/// have one): what a newcomer and a GPU in its warm-up are judged against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct SkuRates {
    /// The median GPU's rate, per hour.
    pub median: f64,
    /// The upper decile's rate: the most a healthy GPU plausibly shows.
    pub upper: f64,
    /// The median GPU's dispersion (≥ 1): how bursty healthy counts come.
    pub dispersion: f64,
}

/// Whether `sig` of a GPU still in its own warm-up is judged against its
/// SKU's upper decile (ECC and PCIe; not NVLink, whose healthy errors come
/// in bursts most of a SKU does not show in its first hours: the reduced
/// suite's seed 11 went to 21.9 false warnings per 1,000 GPU-days).
pub(super) fn warms_up_against_sku(cfg: &ChangeConfig, sig: Signal, st: &Stat) -> bool {
    !st.newcomer && matches!(sig, Signal::Ecc | Signal::Pcie) && st.base_h < sig.warm_up_h(cfg)
}

/// One step of a CUSUM floored at 0: `llr`, at most `clip`, added to `p`.
fn cusum(p: &mut f64, llr: f64, clip: f64) {
    *p = (*p + llr.min(clip)).max(0.0);
}

/// Closes a bucket: the test's step, then the baselines.
pub(super) fn close_bucket(
    cfg: &ChangeConfig,
    sig: Signal,
    st: &mut Stat,
    bg: Option<&mut (f64, f64)>,
    sku: Option<SkuRates>,
    now_ms: i64,
) {
    let quarter = cfg.quiet_below();
    let clip = cfg.clip_of(sig);
    // A counter still in its own warm-up, once its SKU's rates are known,
    // is judged as a newcomer is, but against its SKU's upper decile (a
    // precursor already under way when its history began is otherwise
    // learnt as usual).
    let early = warms_up_against_sku(cfg, sig, st);
    let newcomer = st.newcomer || (early && sku.is_some());
    // (Gauges: this bucket's departure from its phase's usual level.)
    let mut dev = 0.0;
    let llr = if sig.counts() {
        if st.hours <= 0.0 {
            return;
        }
        // The SKU's median GPU rate once three GPUs have an hour of data,
        // the prior before, never the SKU's mean: a neighbour already
        // degrading at the first sample (thousands of NVLink errors an
        // hour) made the mean hundreds an hour, and every quiet bucket
        // judged against it taught the dispersion D ≈ 10 for days — a
        // 50/h NVLink step then went unflagged for 2.4 h.
        let floor = |r: f64| r.max(sig.prior_rate_h() / 20.0);
        let rate = (st.base_a, st.base_h);
        if snapshot(&mut st.lagged, &mut st.lagged_at_ms, now_ms, rate) {
            st.lagged_disp = [st.lagged_disp[1], st.disp];
        }
        let (own_a, own_h) = st.lagged[0];
        // The counts a baseline was learned from, its SKU's prior among
        // them (positive: the rate has a floor), and its rate: the GPU's
        // own, with its SKU's median worth 2 h (12 h for a newcomer, whose
        // first hours may hold a precursor).
        let baseline = |rate: f64, prior_h: f64| {
            let counts = own_a + floor(rate) * prior_h;
            (counts, counts / (own_h + prior_h))
        };
        let median = sku.map_or(sig.prior_rate_h(), |k| k.median);
        let (own_counts, lambda0) = baseline(median, if st.newcomer { 12.0 } else { 2.0 });
        let rhos = cfg.rate_ratios;
        // Quasi-Poisson: counts that come in bursts (var/mean = D > 1)
        // carry 1/D of a Poisson count's evidence. D is the ratio of the
        // squared deviations to the expected counts of the GPU's own
        // buckets, learned while it shows no change, with a prior of D = 1
        // worth DISPERSION_PRIOR expected counts: a GPU that has expected
        // a handful of errors in all cannot tell bursts from a change yet
        // (one error where 0.006 were expected is a Pearson residual of
        // 160, and the first errors of a precursor would have taught D ≈ 6
        // and hidden the precursor behind it). For the link counters the
        // ratio is to the expected or the observed counts, whichever is
        // larger: their expected counts come from the lagged rate and the
        // learned traffic weights of each workload phase, and where those
        // run low the squared deviations of plain Poisson counts grow with
        // the observed, not the expected — read as bursts, D ≈ 1.4–1.7,
        // which cut a 2.5× PCIe step's evidence by as much and warned of
        // it 0.5 h ahead instead of 8.5 h (random precursors seed 182).
        // Not for ECC: there the same read as Poisson the young baselines
        // of healthy GPUs that run low, and added false warnings (see
        // docs/decisions/0002-change-detection-history.md).
        let expected = (lambda0 * st.hours).max(1e-9);
        // What the bucket is judged against: counts, expected count and
        // dispersion.
        let (counts, judged, dispersion) = match sku {
            // In its warm-up the GPU is judged against its SKU's upper
            // decile (worth 12 h) and usual dispersion; it learns its own
            // baseline and dispersion as before.
            Some(k) if early => {
                let (c, l) = baseline(k.upper, 12.0);
                (c, (l * st.hours).max(1e-9), k.dispersion)
            }
            _ if st.newcomer && own_h < NEWCOMER_TRUST_H => (own_counts, expected, 1.0),
            // The dispersion as of the baseline's snapshot, like the rate.
            _ => {
                let d = match st.lagged_disp[0] {
                    d if d > 0.0 => d,
                    _ => st.disp,
                };
                (own_counts, expected, d.max(1.0))
            }
        };
        // The bucket's log-likelihood ratio of a rate `rho` times `mean`.
        let llr_at = |rho: f64, mean: f64| (st.sum * rho.ln() - (rho - 1.0) * mean) / dispersion;
        let llrs = rhos.map(|rho| llr_at(rho, judged));
        // The steep test against the baseline's upper bound (see
        // `ChangeConfig::steep_margin_sd`).
        let z = cfg.steep_margin_sd;
        let upper = (counts + z * counts.sqrt() + z) / counts.max(1e-9);
        let steep = llr_at(cfg.steep_ratio, judged * upper);
        // (The warm-up's test against the SKU leaves the learning as it
        // was: a healthy GPU at the top of its SKU's spread must still
        // learn its own rate and bursts.)
        let quiet = early || st.s <= quarter;
        let d = cfg.counter_decay(st.hours, !quiet);
        if quiet {
            st.nb = st.nb.saturating_add(1);
            st.dev2 = st.dev2 * d + (st.sum - expected).powi(2).min(400.0);
            st.expected = st.expected * d + expected;
            // (Capped as the squared deviations are, at 20 counts above
            // the expected: a heavy bucket must not pull D down.)
            st.observed = st.observed * d + st.sum.min(expected + 20.0);
            let counts = if sig.weighed_by_phase() {
                st.expected.max(st.observed)
            } else {
                st.expected
            };
            st.disp = (st.dev2 + DISPERSION_PRIOR) / (counts + DISPERSION_PRIOR);
        }
        st.base_a = st.base_a * d + st.sum;
        st.base_b = 0.0;
        st.base_h = st.base_h * d + st.hours;
        // Leaving the warm-up, the question changes from "more than its
        // SKU's healthy GPUs show" to "more than it used to": evidence for
        // the one is none for the other (a GPU at the top of its SKU's
        // spread crossed just after its warm-up, 12.1 of 11.9).
        let leaves_warm_up = early && st.base_h >= sig.warm_up_h(cfg);
        if (st.base_h < sig.warm_up_h(cfg) && !newcomer) || leaves_warm_up {
            st.pair = [0.0; 2];
            st.steep = 0.0;
        } else {
            // Three CUSUMs, a slow, a fast and a steep alternative, each
            // floored at 0; the statistic is the largest less ln 3 (three
            // tests at once, each at a third of the false-alarm rate).
            for (p, l) in st.pair.iter_mut().zip(llrs) {
                cusum(p, l, clip);
            }
            cusum(&mut st.steep, steep, clip);
        }
        let best = (st.pair[0].max(st.pair[1]).max(st.steep) - 3f64.ln()).max(0.0);
        best - st.s
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
        let sd = var.max(0.0).sqrt().max(sig.min_sd(cfg));
        let judged = seen_h >= sig.judged_after_h();
        if judged {
            dev = x - mean;
        }
        let u = dev / sd;
        let delta = cfg.shift_sd;
        // Neighbouring buckets of a temperature are correlated (lag-1 φ,
        // learned per GPU): n of them carry the evidence of n(1−φ)/(1+φ)
        // independent ones, so each bucket counts for that much. φ is the
        // autocorrelation around the recent level (moments over ~150
        // buckets, half a day): the raw mean product of u also counted a
        // level the slow baseline had not caught up with, read φ ≥ 0.9
        // and divided a step's evidence by ten. The moments learn only
        // while the test sees no change, like the baseline (a step inside
        // their window would read as correlation too), and φ is taken
        // before this bucket joins them.
        // The test sees a change: its baselines and moments learn slowly
        // or not at all.
        let changing = st.s > quarter;
        let d = cfg.decay(h, changing);
        if st.base_h <= 0.0 || st.u2 <= 0.0 {
            // A prior of φ = 0.6 (unit variance, zero level); also where a
            // checkpoint predates the moments.
            (st.lag1, st.u1, st.u2) = (0.6, 0.0, 1.0);
        }
        let var_u = (st.u2 - st.u1 * st.u1).max(1e-6);
        let phi = ((st.lag1 - st.u1 * st.u1) / var_u).clamp(0.0, 0.9);
        if !changing {
            const A: f64 = 1.0 / 150.0;
            let uc = u.clamp(-4.0, 4.0);
            st.lag1 = st.lag1 * (1.0 - A) + A * uc * st.prev_u;
            st.u1 = st.u1 * (1.0 - A) + A * uc;
            st.u2 = st.u2 * (1.0 - A) + A * uc * uc;
        }
        st.prev_u = u.clamp(-4.0, 4.0);
        let discount = (1.0 - phi) / (1.0 + phi);
        let shift = delta * (u - delta / 2.0) * discount;
        let llr = if sig == Signal::Thermal {
            // Beside the shift, a rise in spread above the usual level: a
            // precursor that heats in bursts (on for 10–60 min, off again)
            // swings the residual by ±5 °C about a mean it hardly moves,
            // and widens the spread its baseline learns before the shift
            // test can add it up (held-back full seed 138: the shift test
            // reached 10.5 of 11.9 and fell back, the hindsight reference
            // saw it 30 h ahead). One-sided — only deviations above the
            // usual level — so a healthy GPU's buckets drain it by
            // ln 2 − ⅜·E[u₊²] ≈ 0.5 each; the statistic is the larger of
            // the two CUSUMs.
            let up = u.max(0.0);
            let k = SPREAD_RATIO;
            let spread = (-(k.ln()) + (1.0 - 1.0 / (k * k)) * up * up / 2.0) * discount;
            if st.base_h >= sig.warm_up_h(cfg) {
                cusum(&mut st.pair[0], shift, clip);
                cusum(&mut st.pair[1], spread, clip);
            } else {
                st.pair = [0.0; 2];
            }
            st.pair[0].max(st.pair[1]) - st.s
        } else {
            shift
        };
        // Exponentially weighted mean and variance of bucket means (once
        // judged, the baseline weighs at least `Signal::baseline_floor_h`).
        let w_old = if judged {
            (seen_h * d).max(sig.baseline_floor_h())
        } else {
            seen_h * d
        };
        // While the test sees a change, a bucket weighs a tenth: a young
        // baseline (the peer test's counts 6 h) took in a +4 °C step 2.3 h
        // into a run within hours, the test peaked at 12.4 of 12.6 and fell
        // back, and the failure 30 h later had no warning. (The counters'
        // baselines, whose test compares with the baseline of 2–4 h ago,
        // gained nothing from the same weighting on fifteen full seeds and
        // raised 13 more false warnings.)
        let h_new = if changing { h / 10.0 } else { h };
        let w = w_old + h_new;
        let new_mean = (mean * w_old + x * h_new) / w;
        let new_var = if seen_h > 0.0 {
            (w_old * (var + (mean - new_mean).powi(2)) + h_new * (x - new_mean).powi(2)) / w
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
    let llr = llr.min(clip);
    if st.base_h < sig.warm_up_h(cfg) && !newcomer {
        // Still learning what is usual: no evidence accumulates yet.
        st.s = 0.0;
        return;
    }
    if st.s <= 0.0 && llr > 0.0 {
        st.since_ms = now_ms;
        st.excess = 0.0;
        st.excess_errors = 0.0;
        st.dev_sum = 0.0;
    }
    st.s = (st.s + llr).max(0.0);
    if st.s > 0.0 {
        st.excess += if sig.counts() { st.sum } else { 1.0 };
        st.excess_errors += st.errors;
        st.dev_sum += dev;
    }
}

pub(super) fn evidence(cfg: &ChangeConfig, sig: Signal, st: &Stat, now_ms: i64) -> Evidence {
    let hours = (now_ms - st.since_ms).max(0) as f64 / 3.6e6;
    let warn = cfg.threshold(cfg.warn_budget) + sig.extra_evidence();
    let detail = if sig.counts() {
        // (A GPU still in its warm-up is judged against its SKU's upper
        // decile: its own rate so far may be the precursor.)
        let against = if warms_up_against_sku(cfg, sig, st) {
            "above what nine in ten GPUs of its SKU show (its own usual rate is still being learnt)"
                .to_string()
        } else {
            // The rate the test compares with: the baseline as of its
            // older snapshot (the current one has taken in the change's
            // own counts, slowly: a jump from 0.02/h read "usual 2.73/h").
            let (a, h) = match st.lagged[0] {
                (a, h) if h > 0.0 => (a, h),
                _ => (st.base_a, st.base_h),
            };
            let rate = a / h.max(1e-9);
            // (Two significant digits: a quiet GPU's 0.004/h is not 0.00.)
            let digits = if rate > 0.0 && rate < 0.1 { 3 } else { 2 };
            format!("against this GPU's usual {rate:.digits$} such samples/h")
        };
        format!(
            "{} {:.0} in {:.0} sample{} of the last {hours:.1} h {against} (change test {:.1}, \
             warns at {warn:.1})",
            match sig {
                Signal::Ecc => "correctable ECC errors",
                Signal::Nvlink => "NVLink CRC/replay errors",
                _ => "PCIe replays",
            },
            st.excess_errors,
            st.excess,
            if st.excess.round() == 1.0 { "" } else { "s" },
            st.s
        )
    } else {
        // The mean departure since the test rose (the open bucket alone
        // read "hotter … −0.8 °C against its usual +1.1 °C").
        let above = st.dev_sum / st.excess.max(1.0);
        let against = if sig == Signal::ThermalPeer {
            "for its load than its host's other GPUs in its job"
        } else {
            "than its own power model and its host's air predict"
        };
        format!(
            "hotter {against} for {hours:.1} h: {above:+.1} °C above its usual {:+.1} °C in this \
             workload on average (change test {:.1}, warns at {warn:.1})",
            st.base_a, st.s
        )
    };
    Evidence {
        signal: sig.signal_name().into(),
        detail,
    }
}
