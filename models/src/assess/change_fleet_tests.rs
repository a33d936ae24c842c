//! The change tests' fleet scenarios (part of [`super`]'s tests): GPUs
//! judged beside others — newcomers against their SKU, a degrading
//! neighbour, host peers in a job, link errors that come with traffic.

use super::tests::{STEP_MS, normal, poisson, row};
use super::*;
use features::rng::Xoshiro256PlusPlus as SimRng;

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
fn a_precursor_under_way_when_history_begins_is_held_to_its_skus_upper_decile() {
    // Forty healthy GPUs whose rates span 100× (0.05–5 errors/h), and one
    // already at 60/h from the first sample (a precursor under way when
    // forewarn started). Its own warm-up alone would learn 60/h as usual
    // and never flag it; held to its SKU's upper decile while it warms up,
    // it is flagged within hours, and the healthy GPUs at the top of the
    // spread are not.
    let mut gpus: Vec<(String, f64)> = (0..40)
        .map(|k| (format!("GPU-{k}"), 0.05 * 100f64.powf(f64::from(k) / 39.0)))
        .collect();
    gpus.push(("GPU-bad".into(), 60.0));
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(11);
    let (mut bad_at, mut healthy) = (None, Vec::new());
    for i in 0..(12 * 120) {
        let h = i as f64 / 120.0;
        for (g, rate) in &gpus {
            let mut r = row(i * STEP_MS, poisson(&mut rng, rate / 120.0), 0.0);
            r.gpu = g.as_str().into();
            let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
            d.assess(&r, true, &mut c, &mut reasons);
            if c[Kind::HbmEccTrend as usize] >= 0.6 {
                if g == "GPU-bad" {
                    bad_at.get_or_insert(h);
                } else if !healthy.contains(g) {
                    healthy.push(g.clone());
                }
            }
        }
    }
    let at = bad_at.expect("the GPU degrading from the start is flagged");
    assert!(at < 6.0, "flagged at {at:.2} h");
    assert!(healthy.is_empty(), "healthy GPUs warned: {healthy:?}");
}

#[test]
fn a_newcomer_is_flagged_about_as_soon_as_its_incumbent_twin() {
    // Twenty incumbents at 1 error/h for 6 h; then GPU-0 and a newcomer
    // both start the same growing precursor (doubling every 1.5 h). The
    // newcomer's first buckets are all precursor: had they taught its
    // dispersion, its evidence would be divided by it and it would trail
    // its twin (the replacement scenario's newcomers trailed by a median
    // 17 min over 13 seeds). Their counts are drawn independently, so
    // either may cross a few buckets first (up to an hour either way);
    // on average the newcomer is within the suite's 15 minutes of its
    // twin. (The twin knows more: six healthy hours of its own rate and
    // dispersion, which the test reads as of 2–4 h ago. Since the
    // dispersion is lagged too, the twin is 0.2–0.9 h sooner than it was
    // and the newcomer trails by 0.04 h on average; without the
    // newcomer's Poisson start, by 0.29 h.)
    let mut lag_sum = 0.0;
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
            new <= twin + 1.5,
            "seed {seed}: newcomer {new} h, twin {twin} h"
        );
        lag_sum += new - twin;
    }
    assert!(
        lag_sum / 4.0 <= 0.25,
        "the newcomer trails by {:.2} h on average",
        lag_sum / 4.0
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

/// GPUs of a healthy fleet whose background rates spread log-uniform over
/// 0.01–1 errors an hour that warn within its first `hours`.
fn healthy_fleet_warnings(cfg: ChangeConfig, gpus: usize, hours: f64, seed: u64) -> usize {
    let mut rng = SimRng::seed_from_u64(seed);
    let rates: Vec<f64> = (0..gpus)
        .map(|_| 0.01 * 100f64.powf(rng.next_f64()))
        .collect();
    let names: Vec<String> = (0..gpus).map(|k| format!("GPU-{k}")).collect();
    let mut d = ChangeDetector::new(cfg);
    let mut warned = vec![false; gpus];
    for i in 0..(hours * 120.0) as i64 {
        for (k, rate) in rates.iter().enumerate() {
            let mut r = row(i * STEP_MS, poisson(&mut rng, rate / 120.0), 0.0);
            r.gpu = names[k].as_str().into();
            let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
            d.assess(&r, true, &mut c, &mut reasons);
            warned[k] |= c[Kind::HbmEccTrend as usize] >= 0.6;
        }
    }
    warned.iter().filter(|w| **w).count()
}

#[test]
fn a_baseline_learned_from_a_few_errors_does_not_make_usual_errors_a_jump() {
    // In a fleet's first day a GPU's rate is learned from a handful of
    // errors: one low by chance, judged by the steep test as it is, reads
    // the GPU's usual errors as a sixteen-fold jump (full random-precursor
    // seeds: 41 → 110 false warnings over fourteen seeds; here 3 of
    // 2,000 GPUs in their first 12 h). Against its upper bound it does not.
    let bare = ChangeConfig {
        steep_margin_sd: 0.0,
        ..ChangeConfig::default()
    };
    let (mut with, mut without) = (0, 0);
    for seed in [1, 2] {
        with += healthy_fleet_warnings(ChangeConfig::default(), 1000, 12.0, seed);
        without += healthy_fleet_warnings(bare, 1000, 12.0, seed);
    }
    assert!(
        with == 0 && without >= 2,
        "{with} healthy GPUs warned, {without} without the margin"
    );
}

#[test]
fn a_quiet_gpus_jump_is_not_hidden_by_the_dispersion_its_first_bucket_teaches() {
    // Twenty GPUs at 0.5 errors/h; GPU-q at 0.02/h for 30 h, then 120/h
    // (a PCIe precursor coming on with load, held-back seed 157). Its
    // first bucket of errors is a squared deviation in the hundreds on a
    // rate of almost nothing; learned at once as its dispersion, it cut
    // the next buckets' evidence tenfold and the warning came 50 min in.
    // Read as of the baseline's snapshot, like the rate, the dispersion
    // leaves the jump its evidence: flagged within three buckets (each
    // adding at most the counters' clip of 6; at 4 it took four).
    let mut gpus: Vec<(String, f64)> = (0..20).map(|k| (format!("GPU-{k}"), 0.5)).collect();
    gpus.push(("GPU-q".into(), 0.02));
    let mut d = ChangeDetector::new(ChangeConfig::default());
    let mut rng = SimRng::seed_from_u64(157);
    let (mut q_at, mut healthy) = (None, Vec::new());
    for i in 0..(32 * 120) {
        let h = i as f64 / 120.0;
        for (g, rate) in &gpus {
            let rate = if g == "GPU-q" && h >= 30.0 {
                120.0
            } else {
                *rate
            };
            let mut r = row(i * STEP_MS, poisson(&mut rng, rate / 120.0), 0.0);
            r.gpu = g.as_str().into();
            let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
            d.assess(&r, true, &mut c, &mut reasons);
            if c[Kind::HbmEccTrend as usize] >= 0.6 {
                if g == "GPU-q" {
                    if q_at.is_none() {
                        // Its reason quotes the rate it was judged
                        // against, not one that has taken in the jump.
                        let why = reasons.iter().find(|(k, _)| *k == Kind::HbmEccTrend);
                        let detail = why.map_or("", |(_, e)| e.detail.as_str());
                        assert!(detail.contains("usual 0.0"), "{detail}");
                    }
                    q_at.get_or_insert(h);
                } else if !healthy.contains(g) {
                    healthy.push(g.clone());
                }
            }
        }
    }
    let at = q_at.expect("the jump is flagged");
    assert!((30.0..30.26).contains(&at), "flagged at {at:.2} h");
    assert!(healthy.is_empty(), "healthy GPUs warned: {healthy:?}");
}
