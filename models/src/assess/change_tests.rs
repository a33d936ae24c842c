use super::*;
use features::rng::Xoshiro256PlusPlus as SimRng;
use features::{FEATURE_COUNT, Phase};

const STEP_MS: i64 = 30_000;

fn row(ts_ms: i64, sbe: f32, temp_z: f32) -> FeatureRow {
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
fn poisson(rng: &mut SimRng, mean: f64) -> f32 {
    let (mut k, mut p, l) = (0u32, 1.0f64, (-mean).exp());
    loop {
        p *= rng.next_f64();
        if p <= l {
            return k as f32;
        }
        k += 1;
    }
}

fn normal(rng: &mut SimRng) -> f32 {
    let (u, v) = (rng.next_f64_open0(), rng.next_f64());
    ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
}

/// Runs `hours` of rows, `rate(h)` correctable errors per hour and a
/// temperature z of `temp(h)` plus noise; returns the hour of the first
/// warning (risk ≥ the kind's warning level) per kind.
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
        if thermal.is_none() && c[Kind::ThermalDegradation as usize] >= 0.5 {
            thermal = Some(h);
        }
    }
    (ecc, thermal, d)
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
    // expectation fits idle worse): alternating every 6 h is not a change.
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(5);
    for i in 0..(72 * 120) {
        let idle = (i / (6 * 120)) % 2 == 1;
        let mut r = row(
            i * STEP_MS,
            0.0,
            if idle { 4.0 } else { 0.0 } + 0.8 * normal(&mut rng),
        );
        r.values[Col::PhaseCode as usize] = if idle { 0.0 } else { 2.0 };
        let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
        d.assess(&r, true, &mut c, &mut reasons);
        assert!(
            c[Kind::ThermalDegradation as usize] < 0.5,
            "warned at row {i}"
        );
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
fn a_gpu_that_joins_a_warm_fleet_is_held_to_its_skus_median_from_the_start() {
    // Twenty incumbents at 1 error/h for 6 h; then a newcomer whose rate is
    // 15/h from its first sample (a precursor under way when it joined).
    let names: Vec<String> = (0..20).map(|k| format!("GPU-{k}")).collect();
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(5);
    let mut warned_at = None;
    for i in 0..(10 * 120) {
        let h = i as f64 / 120.0;
        let mut gpus: Vec<(&str, f64)> = names.iter().map(|n| (n.as_str(), 1.0)).collect();
        if h >= 6.0 {
            gpus.push(("GPU-new", 15.0));
        }
        for (g, rate) in gpus {
            let mut r = row(i * STEP_MS, poisson(&mut rng, rate / 120.0), 0.0);
            r.gpu = g.into();
            let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
            d.assess(&r, true, &mut c, &mut reasons);
            if g == "GPU-new" && warned_at.is_none() && c[Kind::HbmEccTrend as usize] >= 0.6 {
                warned_at = Some(h);
            }
        }
    }
    assert!(d.gpus["GPU-new"][0].newcomer && !d.gpus["GPU-0"][0].newcomer);
    let at = warned_at.expect("the newcomer's precursor is flagged");
    // Within 4 h of joining; its own history alone (warm-up 4 h, then a
    // baseline that has learned 15/h as usual) would never flag it.
    assert!(at > 6.0 && at < 10.0, "warned at {at} h");
}

#[test]
fn a_newcomer_is_flagged_no_later_than_its_incumbent_twin() {
    // Twenty incumbents at 1 error/h for 6 h; then GPU-0 and a newcomer
    // both start the same growing precursor (doubling every 1.5 h). The
    // newcomer's first buckets are all precursor: had they taught its
    // dispersion, its evidence would be divided by it and it would trail
    // its twin (the replacement scenario's newcomers trailed by a median
    // 17 min over 13 seeds).
    let names: Vec<String> = (0..20).map(|k| format!("GPU-{k}")).collect();
    for seed in [1, 2, 3, 4] {
        let mut d = ChangeDetector::new(ChangeConfig::default());
        let mut rng = SimRng::seed_from_u64(seed);
        let mut warned: [Option<f64>; 2] = [None, None];
        for i in 0..(14 * 120) {
            let h = i as f64 / 120.0;
            let precursor = 1.0 * 2f64.powf((h - 6.0) / 1.5);
            let mut gpus: Vec<(&str, f64)> = names.iter().map(|n| (n.as_str(), 1.0)).collect();
            if h >= 6.0 {
                gpus[0].1 = precursor;
                gpus.push(("GPU-new", precursor));
            }
            for (g, rate) in gpus {
                let mut r = row(i * STEP_MS, poisson(&mut rng, rate / 120.0), 0.0);
                r.gpu = g.into();
                let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
                d.assess(&r, true, &mut c, &mut reasons);
                let k = match g {
                    "GPU-0" => 0,
                    "GPU-new" => 1,
                    _ => continue,
                };
                if warned[k].is_none() && c[Kind::HbmEccTrend as usize] >= 0.6 {
                    warned[k] = Some(h);
                }
            }
        }
        let [Some(twin), Some(new)] = warned else {
            panic!("seed {seed}: both flagged, got {warned:?}");
        };
        assert!(
            new <= twin + 0.25,
            "seed {seed}: newcomer {new} h, twin {twin} h"
        );
    }
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
fn a_neighbour_degrading_from_the_start_does_not_blunt_the_others() {
    // Twenty GPUs at 0.2 correctable errors/h; one already at 3,000/h at
    // the first sample. At 6 h GPU-1 steps to 30/h. The SKU's mean in the
    // first hour (~150/h) once stood in for every GPU's rate, and the quiet
    // buckets judged against it taught GPU-1 a dispersion of ~10: its step
    // then carried a tenth of its evidence.
    let names: Vec<String> = (0..20).map(|k| format!("GPU-{k}")).collect();
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(9);
    let mut warned_at = None;
    for i in 0..(10 * 120) {
        let h = i as f64 / 120.0;
        for (k, g) in names.iter().enumerate() {
            let rate = match k {
                0 => 3000.0,
                1 if h >= 6.0 => 30.0,
                _ => 0.2,
            };
            let mut r = row(i * STEP_MS, poisson(&mut rng, rate / 120.0), 0.0);
            r.gpu = g.as_str().into();
            let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
            d.assess(&r, true, &mut c, &mut reasons);
            if k == 1 && warned_at.is_none() && c[Kind::HbmEccTrend as usize] >= 0.6 {
                warned_at = Some(h);
            }
        }
    }
    let disp = d.gpus["GPU-1"][0].disp;
    let at = warned_at.expect("the step is flagged");
    assert!(
        at > 6.0 && at < 7.0,
        "warned {:.1} h after the step (D = {disp:.1})",
        at - 6.0
    );
}

/// Runs five GPUs of one host and job for `hours`: residual = the GPU's
/// steady offset + a common swing of the room and workload (±3 °C over
/// 5 h) + noise + `fault(gpu, h)`; `job(gpu, h)` names each GPU's job.
/// Returns the hour of each GPU's first thermal warning and its reason.
fn run_host(
    hours: f64,
    fault: impl Fn(usize, f64) -> f64,
    job: impl Fn(usize, f64) -> &'static str,
) -> Vec<Option<(f64, String)>> {
    const OFFSETS: [f64; 5] = [5.0, 2.0, -3.0, 3.0, -2.0];
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(21);
    let mut warned = vec![None; OFFSETS.len()];
    for i in 0..(hours * 120.0) as i64 {
        let h = i as f64 / 120.0;
        let common = 3.0 * (2.0 * std::f64::consts::PI * h / 5.0).sin();
        for (k, off) in OFFSETS.iter().enumerate() {
            let z = off + common + fault(k, h) + 0.5 * f64::from(normal(&mut rng));
            let mut r = row(i * STEP_MS, 0.0, z as f32);
            r.gpu = format!("GPU-{k}").as_str().into();
            r.topo.host = Some("node-1".into());
            r.topo.job = Some(job(k, h).into());
            let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
            d.assess(&r, true, &mut c, &mut reasons);
            if warned[k].is_none() && c[Kind::ThermalDegradation as usize] >= 0.5 {
                let why = reasons.iter().map(|(_, e)| e.detail.clone()).collect();
                warned[k] = Some((h, why));
            }
        }
    }
    warned
}

#[test]
fn a_cooling_fault_early_in_training_is_seen_against_the_hosts_other_gpus() {
    // GPU-0 steps +3 °C 1.2 h into training: its own baseline is still
    // learning (the own test judges after 4 h and would take the step as
    // usual), its peers' is not.
    let warned = run_host(
        12.0,
        |k, h| if k == 0 && h >= 1.2 { 3.0 } else { 0.0 },
        |_, _| "j1",
    );
    let (at, why) = warned[0].clone().expect("the step is flagged");
    assert!(at - 1.2 < 4.0, "flagged {:.1} h after the step", at - 1.2);
    assert!(why.contains("host's other GPUs"), "{why}");
    // The reason's number is the mean departure since the test rose: the
    // step, not one bucket's noise.
    let above: f64 = why
        .split("h: ")
        .nth(1)
        .and_then(|r| r.split(" °C above").next())
        .and_then(|x| x.parse().ok())
        .expect("a departure in the reason");
    assert!((2.0..4.0).contains(&above), "{why}");
    assert!(warned[1..].iter().all(Option::is_none), "{warned:?}");
}

#[test]
fn peers_leaving_the_group_do_not_step_the_ones_that_stay() {
    // At 6 h GPU-1 and GPU-3 (the middle of the offsets) move to another
    // job: the plain median of the rest falls by 4 °C, and GPU-0 read as
    // 4 °C hotter than before. Nobody is faulty.
    let job = |k: usize, h: f64| {
        if (k == 1 || k == 3) && h >= 6.0 {
            "j2"
        } else {
            "j1"
        }
    };
    let warned = run_host(36.0, |_, _| 0.0, job);
    assert!(warned.iter().all(Option::is_none), "{warned:?}");
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

/// Hours of PCIe errors in a fleet whose link errors come with traffic:
/// a GPU's rate is its background × 1 while training, × 0.3 otherwise.
/// GPU-0..9 alternate 4 h of training and 4 h idle; GPU-quiet idles for
/// 36 h and then trains; GPU-bad does the same, but its rate is ten
/// times its background from hour 36. Returns the hour each of the last
/// two first warned on PCIe.
fn run_traffic(weigh: bool) -> (Option<f64>, Option<f64>) {
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(11);
    let (mut quiet, mut bad) = (None, None);
    for i in 0..(60 * 120) {
        let h = i as f64 / 120.0;
        for k in 0..12 {
            let (name, training, factor) = match k {
                10 => ("GPU-quiet".to_string(), h >= 36.0, 1.0),
                11 => (
                    "GPU-bad".to_string(),
                    h >= 36.0,
                    if h >= 36.0 { 10.0 } else { 1.0 },
                ),
                _ => (
                    format!("GPU-{k}"),
                    ((h + k as f64) / 4.0) as i64 % 2 == 0,
                    1.0,
                ),
            };
            let traffic = if training { 1.0 } else { 0.3 };
            let mut r = row(i * STEP_MS, 0.0, 0.0);
            r.values[Col::PcieReplayDelta as usize] =
                poisson(&mut rng, 6.0 * traffic * factor / 120.0);
            r.values[Col::PhaseCode as usize] = if training { 2.0 } else { 0.0 };
            r.gpu = name.as_str().into();
            if !weigh {
                // No phase: every hour weighs the same.
                r.values[Col::PhaseCode as usize] = f32::NAN;
            }
            let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
            d.assess(&r, true, &mut c, &mut reasons);
            let warned = c[Kind::PcieErrors as usize] >= 0.5;
            match k {
                10 if warned && quiet.is_none() => quiet = Some(h),
                11 if warned && bad.is_none() => bad = Some(h),
                _ => {}
            }
        }
    }
    (quiet, bad)
}

#[test]
fn a_gpu_that_starts_training_after_a_day_idle_is_not_a_change() {
    // Weighed by phase: the quiet GPU's threefold rise is its workload's,
    // the bad one's tenfold rise is still flagged within hours.
    let (quiet, bad) = run_traffic(true);
    assert_eq!(quiet, None, "the GPU that began training warned");
    let at = bad.expect("the degrading GPU is flagged");
    assert!(at > 36.0 && at < 40.0, "warned at {at} h");
    // Unweighed (no phase known), the same workload change warns: the
    // test above is the weighting's, not the rates'.
    let (quiet, _) = run_traffic(false);
    assert!(quiet.is_some_and(|h| h > 36.0), "{quiet:?}");
}
