use super::*;
use features::rng::Xoshiro256PlusPlus as SimRng;
use features::{FEATURE_COUNT, Phase};

pub(super) const STEP_MS: i64 = 30_000;

pub(super) fn row(ts_ms: i64, sbe: f32, temp_z: f32) -> FeatureRow {
    let mut values = [f32::NAN; FEATURE_COUNT];
    values[Col::IntervalS as usize] = 30.0;
    values[Col::EccSbeDelta as usize] = sbe;
    values[Col::PcieReplayDelta as usize] = 0.0;
    values[Col::GpuTempResid as usize] = temp_z;
    values[Col::PhaseCode as usize] = 2.0;
    FeatureRow {
        ts_ms,
        gpu: "GPU-c".into(),
        topo: Default::default(),
        phase: Phase::Training,
        values,
    }
}

/// Poisson draw by inversion (small means).
pub(super) fn poisson(rng: &mut SimRng, mean: f64) -> f32 {
    let (mut k, mut p, l) = (0u32, 1.0f64, (-mean).exp());
    loop {
        p *= rng.next_f64();
        if p <= l {
            return k as f32;
        }
        k += 1;
    }
}

pub(super) fn normal(rng: &mut SimRng) -> f32 {
    let (u, v) = (rng.next_f64_open0(), rng.next_f64());
    ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
}

/// Runs `hours` of rows, `rate(h)` correctable errors per hour, and a
/// temperature residual of `temp(h)` plus noise whose five-minute means
/// go through the `Thermal` gauge test (as the GPU's own-fit residual
/// would, [`super::fit`]); returns the hour of the first warning (risk ≥
/// the kind's warning level) per kind.
fn run(
    hours: f64,
    seed: u64,
    rate: impl Fn(f64) -> f64,
    temp: impl Fn(f64) -> f64,
) -> (Option<f64>, Option<f64>, ChangeDetector) {
    run_with(ChangeConfig::default(), hours, seed, rate, temp)
}

fn run_with(
    cfg: ChangeConfig,
    hours: f64,
    seed: u64,
    rate: impl Fn(f64) -> f64,
    temp: impl Fn(f64) -> f64,
) -> (Option<f64>, Option<f64>, ChangeDetector) {
    let mut d = ChangeDetector::new(cfg);
    let mut rng = SimRng::seed_from_u64(seed);
    let (mut ecc, mut thermal) = (None, None);
    let mut gauge = Gauge::new(cfg);
    let n = (hours * 120.0) as i64;
    for i in 0..n {
        let h = i as f64 / 120.0;
        let sbe = poisson(&mut rng, rate(h) / 120.0);
        let z = temp(h) as f32 + 0.8 * normal(&mut rng);
        let (mut c, mut r) = ([0.0f32; KINDS], Vec::new());
        d.assess(&row(i * STEP_MS, sbe, z), true, &mut c, &mut r);
        if ecc.is_none() && c[Kind::HbmEccTrend as usize] >= 0.6 {
            ecc = Some(h);
        }
        if gauge.add(i * STEP_MS, f64::from(z), 2) >= 0.5 && thermal.is_none() {
            thermal = Some(h);
        }
    }
    (ecc, thermal, d)
}

/// The `Thermal` gauge test alone, fed rows of a residual: each closed
/// five-minute bucket's mean goes through [`close_bucket`].
pub(super) struct Gauge {
    cfg: ChangeConfig,
    st: Stat,
    risk: f32,
}

impl Gauge {
    pub(super) fn new(cfg: ChangeConfig) -> Self {
        Gauge {
            cfg,
            st: Stat::default(),
            risk: 0.0,
        }
    }

    /// Adds a row in workload phase `phase`; returns the risk as of the
    /// last closed bucket.
    pub(super) fn add(&mut self, ts_ms: i64, x: f64, phase: u8) -> f32 {
        let (st, sig) = (&mut self.st, Signal::Thermal);
        let bucket = ts_ms.div_euclid(BUCKET_MS);
        if bucket != st.bucket {
            if st.n > 0 {
                close_bucket(&self.cfg, sig, st, None, None, ts_ms);
                let warm = st.base_h >= sig.warm_up_h(&self.cfg);
                self.risk = if warm { self.cfg.risk(sig, st.s) } else { 0.0 };
            }
            (st.bucket, st.sum, st.n, st.phase) = (bucket, 0.0, 0, phase);
        }
        st.sum += x;
        st.n += 1;
        if st.phase != phase {
            st.phase = MIXED;
        }
        self.risk
    }
}

#[test]
fn thresholds_follow_the_budgets() {
    let c = ChangeConfig::default();
    let (w, p) = (c.threshold(c.warn_budget), c.threshold(c.page_budget));
    // 288 buckets a day, 1,000 GPU-days, 5 signals sharing 10 warnings.
    assert!((w - (288.0f64 * 1000.0 * 5.0 / 10.0).ln()).abs() < 1e-9);
    assert!(p > w);
    for sig in Signal::ALL {
        let at = sig.warn_risk();
        assert!((c.risk(sig, w) - at).abs() < 1e-6 && (c.risk(sig, p) - 0.85).abs() < 1e-6);
        assert!(c.risk(sig, 0.0) == 0.0 && c.risk(sig, 1e9) <= 0.95);
        assert!(
            c.risk(sig, 0.99 * w) < at,
            "below the threshold it does not warn"
        );
    }
    // A tighter budget waits for more evidence.
    assert!(c.threshold(1.0) > c.threshold(10.0));
}

#[test]
fn steady_background_at_any_level_does_not_warn() {
    // Healthy GPUs whose own rates span two orders of magnitude, and a
    // steady temperature offset: none departs from itself.
    for (seed, rate, offset) in [
        (1, 0.05, 0.0),
        (2, 0.5, 1.0),
        (3, 5.0, -0.5),
        (4, 50.0, 2.0),
    ] {
        let (ecc, thermal, _) = run(72.0, seed, |_| rate, |_| offset);
        assert_eq!(
            (ecc, thermal),
            (None, None),
            "rate {rate}/h offset {offset}"
        );
    }
}

#[test]
fn a_departure_from_the_gpus_own_rate_warns_early() {
    // 2/h for 24 h, then the rate doubles every 3 h: it warns long before
    // the rate reaches the level rule's 60/h (about 15 h later).
    let onset = 24.0;
    let rate = |h: f64| {
        if h < onset {
            2.0
        } else {
            2.0 * 2f64.powf((h - onset) / 3.0)
        }
    };
    let (ecc, _, d) = run(44.0, 7, rate, |_| 0.0);
    let at = ecc.expect("the growing rate is flagged");
    assert!(at > onset && at < onset + 10.0, "warned at {at} h");
    assert!(rate(at) < 60.0, "warned only at {}/h", rate(at));
    // Its reason names the baseline and the threshold.
    let (mut c, mut r) = ([0.0f32; KINDS], Vec::new());
    let mut d = d;
    d.assess(&row(44 * 3_600_000, 1.0, 0.0), true, &mut c, &mut r);
    let e = &r
        .iter()
        .find(|(k, _)| *k == Kind::HbmEccTrend)
        .expect("a reason")
        .1;
    assert!(
        e.detail.contains("usual") && e.detail.contains("warns at"),
        "{}",
        e.detail
    );
}

#[test]
fn a_slow_ramp_and_a_step_both_gain_from_the_pair_of_tests() {
    // Against one test at 3× (which gains nothing until the rate stands
    // 1.8× above the baseline, while the baseline creeps after the ramp):
    // a linear ramp from 2/h, +0.1/h an hour, is flagged hours earlier by
    // the slow test; a step to 10/h no later, by the fast one.
    let single = ChangeConfig {
        rate_ratios: [3.0, 3.0],
        ..ChangeConfig::default()
    };
    let onset = 24.0;
    let ramp = |h: f64| 2.0 + (h - onset).max(0.0) * 0.1;
    let step = |h: f64| if h < onset { 2.0 } else { 10.0 };
    for seed in [3, 5, 8] {
        let warn = |cfg, rate: &dyn Fn(f64) -> f64| {
            run_with(cfg, 100.0, seed, rate, |_| 0.0)
                .0
                .unwrap_or(f64::INFINITY)
        };
        let (pair, one) = (warn(ChangeConfig::default(), &ramp), warn(single, &ramp));
        assert!(
            pair > onset + 20.0 && pair + 3.0 < one,
            "ramp, seed {seed}: pair {pair} h, single {one} h"
        );
        let (pair, one) = (warn(ChangeConfig::default(), &step), warn(single, &step));
        assert!(
            pair > onset && pair <= one && pair < onset + 3.0,
            "step, seed {seed}: pair {pair} h, single {one} h"
        );
    }
}

#[test]
fn heating_in_bursts_warns_through_the_spread() {
    // From hour 20, +5 °C for ten minutes of every hour (a cooling path
    // that fails now and then): the mean moves by 0.8 °C, the spread far
    // more. The shift test alone climbs in each burst and drains between
    // them.
    let burst = |h: f64| {
        if h >= 20.0 && (h * 6.0) as i64 % 6 == 0 {
            5.0
        } else {
            0.0
        }
    };
    let (_, thermal, _) = run(40.0, 13, |_| 0.5, burst);
    let at = thermal.expect("bursts of heat are flagged");
    assert!(at > 20.0 && at < 26.0, "warned at {at} h");
}

#[test]
fn a_step_in_temperature_warns_and_a_hot_spell_does_not() {
    // +3 °C at the same load from hour 20 (a cooling path degrading).
    let (_, thermal, _) = run(30.0, 11, |_| 0.5, |h| if h >= 20.0 { 3.0 } else { 0.0 });
    let at = thermal.expect("a +3 °C step is flagged");
    assert!(at > 20.0 && at < 23.0, "warned at {at} h");
    // Ten minutes at +6 °C (a job's hot phase) is not a change.
    let (_, thermal, _) = run(
        30.0,
        12,
        |_| 0.5,
        |h| if (20.0..20.17).contains(&h) { 6.0 } else { 0.0 },
    );
    assert_eq!(thermal, None);
}

#[test]
fn a_change_of_workload_is_not_a_change_of_temperature() {
    // The residual sits 4 °C higher while idle than while training (the
    // fit misses idle more): alternating every 6 h is not a change.
    let mut g = Gauge::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(5);
    for i in 0..(72 * 120) {
        let idle = (i / (6 * 120)) % 2 == 1;
        let x = if idle { 4.0 } else { 0.0 } + 0.8 * f64::from(normal(&mut rng));
        let risk = g.add(i * STEP_MS, x, if idle { 0 } else { 2 });
        assert!(risk < 0.5, "warned at row {i}");
    }
}

#[test]
fn one_burst_does_not_decide_alone() {
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut warned = false;
    for i in 0..(30 * 120) {
        let sbe = if i == 20 * 120 { 500.0 } else { 0.0 };
        let (mut c, mut r) = ([0.0f32; KINDS], Vec::new());
        d.assess(&row(i * STEP_MS, sbe, 0.0), true, &mut c, &mut r);
        warned |= c[Kind::HbmEccTrend as usize] >= 0.6;
    }
    assert!(!warned);
}

#[test]
fn errors_in_bursts_count_once_and_more_bursts_warn() {
    // A healthy part whose correctable errors come 12 at a time (a weak
    // cell read again and again), a burst every 4 h on average: counted
    // in errors, each burst was a jump of 12 against a rate of 3/h. Counted
    // in samples with errors, it is one event. From hour 40 on, bursts
    // come six times an hour: that is a change.
    let first_warning = |seed: u64, change_at: f64| {
        let mut d = ChangeDetector::new(ChangeConfig::default());
        let mut rng = SimRng::seed_from_u64(seed);
        for i in 0..(60 * 120) {
            let h = i as f64 / 120.0;
            let per_h = if h >= change_at { 6.0 } else { 0.25 };
            let sbe = if rng.next_f64() < per_h / 120.0 {
                12.0
            } else {
                0.0
            };
            let (mut c, mut r) = ([0.0f32; KINDS], Vec::new());
            d.assess(&row(i * STEP_MS, sbe, 0.0), true, &mut c, &mut r);
            if c[Kind::HbmEccTrend as usize] >= 0.6 {
                return Some((h, r));
            }
        }
        None
    };
    for seed in 1..=8 {
        let quiet = first_warning(seed, f64::INFINITY);
        assert!(quiet.is_none(), "seed {seed}: {quiet:?}");
        let (h, reasons) = first_warning(seed, 40.0).expect("more bursts warn");
        assert!((40.0..44.0).contains(&h), "seed {seed}: warned at {h:.2} h");
        let text = &reasons[0].1.detail;
        assert!(text.contains(" samples of the last "), "{text}");
    }
}

#[test]
fn it_is_quiet_while_cold_and_survives_a_snapshot() {
    let rate = |h: f64| if h < 1.0 { 1.0 } else { 200.0 };
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(3);
    for i in 0..240 {
        let (mut c, mut r) = ([0.0f32; KINDS], Vec::new());
        let sbe = poisson(&mut rng, rate(i as f64 / 120.0) / 120.0);
        d.assess(&row(i * STEP_MS, sbe, 0.0), false, &mut c, &mut r);
        assert_eq!(c, [0.0; KINDS], "not warm: nothing raised");
    }
    let bytes = serde_json::to_vec(&d).expect("serialize");
    let back: ChangeDetector = serde_json::from_slice(&bytes).expect("deserialize");
    assert_eq!(back.gpus.len(), 1);
    assert_eq!(back.gpus["GPU-c"][0].s, d.gpus["GPU-c"][0].s);
}

#[test]
fn a_restored_detector_tests_with_this_builds_settings() {
    // A snapshot of an older build (its `config` written out, a clip of 4)
    // and one of a detector built with other settings both restore with
    // the defaults: the settings belong to the running build, the
    // snapshot holds state.
    let custom = ChangeConfig {
        clip: 4.0,
        warn_budget: 1.0,
        ..ChangeConfig::default()
    };
    let mut d = ChangeDetector::new(custom);
    let (mut c, mut r) = ([0.0f32; KINDS], Vec::new());
    d.assess(&row(0, 1.0, 0.0), false, &mut c, &mut r);
    let mut json = serde_json::to_value(&d).expect("serialize");
    assert!(json.get("config").is_none(), "settings are not state");
    let back: ChangeDetector = serde_json::from_value(json.clone()).expect("deserialize");
    assert_eq!(back.config, ChangeConfig::default());
    assert_eq!(back.gpus.len(), 1);
    json["config"] = serde_json::to_value(custom).expect("config");
    let old: ChangeDetector = serde_json::from_value(json).expect("an older build's snapshot");
    assert_eq!(old.config, ChangeConfig::default());
    assert_eq!(old.gpus.len(), 1);
}

#[test]
fn a_level_the_baseline_lags_behind_does_not_hide_a_step() {
    // The residual sits at +2 °C for its first 8 h (the expectation still
    // learning), then at 0 with bucket-to-bucket noise: the three-day
    // baseline still reads well above 0 for days. At 30 h a +3 °C step.
    // Its evidence must not be discounted as "correlated" because the
    // baseline had not caught up with the level: the mean product of the
    // standardised values read φ ≥ 0.9 there and the step went
    // unflagged for the 14 h that follow.
    let mut rng = SimRng::seed_from_u64(5);
    let noise: Vec<f64> = (0..44 * 12)
        .map(|_| 0.7 * f64::from(normal(&mut rng)))
        .collect();
    let temp = |h: f64| {
        let level = match h {
            h if h < 8.0 => 2.0,
            h if h < 30.0 => 0.0,
            _ => 3.0,
        };
        level + noise[((h * 12.0) as usize).min(noise.len() - 1)]
    };
    let (_, thermal, _) = run(44.0, 13, |_| 0.5, temp);
    let at = thermal.expect("the step is flagged");
    assert!(
        at > 30.0 && at < 33.5,
        "flagged {:.1} h after the step",
        at - 30.0
    );
}

#[test]
fn a_snapshot_of_four_signals_loads_into_five() {
    // Builds before the peer signal kept `[Stat; 4]` per GPU; CBOR writes
    // arrays and vectors alike, and the GPU gains the missing one when
    // it is next seen.
    let old: std::collections::HashMap<String, [Stat; 4]> = [(
        "GPU-c".to_string(),
        std::array::from_fn(|_| Stat::default()),
    )]
    .into();
    let mut bytes = Vec::new();
    ciborium::into_writer(&old, &mut bytes).expect("cbor");
    let new: std::collections::HashMap<String, Vec<Stat>> =
        ciborium::from_reader(bytes.as_slice()).expect("loads");
    assert_eq!(new["GPU-c"].len(), 4);
    let mut d = ChangeDetector::new(ChangeConfig::default());
    d.gpus.insert("GPU-c".into(), new["GPU-c"].clone());
    let (mut c, mut r) = ([0.0f32; KINDS], Vec::new());
    d.assess(&row(0, 0.0, 0.0), true, &mut c, &mut r);
    assert_eq!(d.gpus["GPU-c"].len(), Signal::ALL.len());
}

#[test]
fn a_quiet_gpus_jump_is_clear_from_its_first_handful_of_errors() {
    // 0.1 errors an hour for two days, then 6/h (sixty-fold): the fast
    // test gains ln 4 per error and needs about ten of them; the steep
    // test reads the first five or six as clear. Without it (steep ratio
    // equal to the fast one) the warning comes later: by 0.45 h on
    // average over these seeds (0.1–0.9 h each).
    let onset = 48.0;
    let jump = |h: f64| if h < onset { 0.1 } else { 6.0 };
    let without = ChangeConfig {
        steep_ratio: 4.0,
        ..ChangeConfig::default()
    };
    let mut gain = 0.0;
    for seed in [2, 4, 6, 8, 10, 12] {
        let with = run(56.0, seed, jump, |_| 0.0).0.expect("flagged");
        let plain = run_with(without, 56.0, seed, jump, |_| 0.0)
            .0
            .unwrap_or(f64::INFINITY);
        assert!(
            with > onset && with < onset + 2.0 && with <= plain,
            "seed {seed}: {:.2} h after the jump, {:.2} h without the steep test",
            with - onset,
            plain - onset
        );
        gain += (plain - with) / 6.0;
    }
    assert!(gain >= 0.3, "earlier by {gain:.2} h on average");
    // A GPU that learned its baseline from a few errors, low by chance,
    // does not take its usual rate for a jump.
    for seed in 20..30 {
        let (ecc, _, _) = run(72.0, seed, |_| 0.3, |_| 0.0);
        assert_eq!(ecc, None, "seed {seed}");
    }
}

#[test]
fn a_rate_that_grows_over_two_days_is_not_learnt_on_the_way() {
    // Five days at 0.2 correctable errors an hour, then a linear rise to
    // 2/h over 40 h: at three days' half-life the counters' baseline
    // (which weighs ~104 h of history then) takes in more of the rise on
    // the way than at 7.5 days (~260 h) and the warning comes hours later.
    let three_days = ChangeConfig {
        counter_half_life_h: 72.0,
        ..ChangeConfig::default()
    };
    let (onset, len) = (120.0, 40.0);
    let ramp = move |h: f64| 0.2 + ((h - onset).max(0.0) / len).min(1.0) * 1.8;
    for seed in [2, 4] {
        let warn = |cfg| {
            run_with(cfg, onset + len, seed, ramp, |_| 0.0)
                .0
                .map_or(f64::INFINITY, |h| h - onset)
        };
        let (long, short) = (warn(ChangeConfig::default()), warn(three_days));
        // (Measured: 26.3 against 29.8 h, 28.4 against 33.1 h.)
        assert!(
            long + 2.0 < short,
            "seed {seed}: warned {long:.1} h into the rise, at three days {short:.1} h"
        );
    }
}
