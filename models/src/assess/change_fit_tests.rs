use super::super::ChangeDetector;
use super::super::tests::{STEP_MS, normal};
use super::*;
use crate::assess::{KINDS, Kind};
use features::rng::Xoshiro256PlusPlus as SimRng;
use features::{FEATURE_COUNT, Phase};

/// Heat sinks of a host's GPUs: offset (°C) and thermal resistance
/// (°C per W).
const GPUS: [(f64, f64); 6] = [
    (3.0, 0.060),
    (0.0, 0.070),
    (-2.0, 0.075),
    (1.0, 0.065),
    (4.0, 0.080),
    (-1.0, 0.068),
];

/// What a GPU does at an hour: its power, or `None` when it reports
/// nothing (gone).
type Load = dyn Fn(usize, f64) -> Option<f64>;

/// Runs the host for `hours`: the air swings ±3 °C a day; each GPU's
/// temperature is air + offset + resistance × (1 + `fault`) × power +
/// noise, reported in whole degrees as DCGM does. Returns each GPU's first
/// thermal warning (hour, reasons).
fn run(hours: f64, load: &Load, fault: &dyn Fn(usize, f64) -> f64) -> Vec<Option<(f64, String)>> {
    run_in(None, hours, load, fault)
}

/// [`run`], the GPUs in `job` when given (their host peers in it then
/// judge them too).
fn run_in(
    job: Option<&str>,
    hours: f64,
    load: &Load,
    fault: &dyn Fn(usize, f64) -> f64,
) -> Vec<Option<(f64, String)>> {
    run_drifting(job, hours, load, fault, &|_| 0.0)
}

/// [`run_in`], every GPU's residual off by `drift` (°C at an hour): the
/// feature stage's expectation drifting as it learns, the same for all.
fn run_drifting(
    job: Option<&str>,
    hours: f64,
    load: &Load,
    fault: &dyn Fn(usize, f64) -> f64,
    drift: &dyn Fn(f64) -> f64,
) -> Vec<Option<(f64, String)>> {
    let mut d = ChangeDetector::default();
    let mut rng = SimRng::seed_from_u64(31);
    let mut warned = vec![None; GPUS.len()];
    // Each GPU's phase and when it entered it (the feature stage's age).
    let mut entered = [(f32::NAN, 0i64); GPUS.len()];
    for i in 0..(hours * 120.0) as i64 {
        let h = i as f64 / 120.0;
        let air = 27.0 + 3.0 * (2.0 * std::f64::consts::PI * h / 24.0).sin();
        for (k, &(off, r)) in GPUS.iter().enumerate() {
            let Some(p) = load(k, h) else { continue };
            let p = p * (1.0 + 0.01 * f64::from(normal(&mut rng)));
            let t = air + off + r * (1.0 + fault(k, h)) * p + 0.3 * f64::from(normal(&mut rng));
            let mut values = [f32::NAN; FEATURE_COUNT];
            values[Col::IntervalS as usize] = 30.0;
            values[Col::GpuTemp as usize] = t.round() as f32;
            values[Col::PowerEwma as usize] = p as f32;
            values[Col::GpuTempResid as usize] = (t - air - 0.07 * p + drift(h)) as f32;
            let phase = if p < 150.0 { 0.0 } else { 2.0 };
            if entered[k].0 != phase {
                entered[k] = (phase, i * STEP_MS);
            }
            values[Col::PhaseCode as usize] = phase;
            values[Col::PhaseAgeS as usize] = ((i * STEP_MS - entered[k].1) / 1000) as f32;
            let mut row = FeatureRow {
                ts_ms: i * STEP_MS,
                gpu: format!("GPU-{k}").as_str().into(),
                topo: Default::default(),
                phase: Phase::Training,
                values,
            };
            row.topo.host = Some("node-1".into());
            row.topo.job = job.map(Into::into);
            let (mut c, mut reasons) = ([0.0f32; KINDS], Vec::new());
            d.assess(&row, true, &mut c, &mut reasons);
            if warned[k].is_none() && c[Kind::ThermalDegradation as usize] >= 0.5 {
                let why = reasons.iter().map(|(_, e)| e.detail.clone()).collect();
                warned[k] = Some((h, why));
            }
        }
    }
    warned
}

/// A training job whose power dips every three hours (a checkpoint).
fn training(h: f64) -> f64 {
    if h % 3.0 < 0.25 { 350.0 } else { 650.0 }
}

/// GPU-1's warning (hour, reasons), which must be the only one.
fn only_gpu_1(warned: &[Option<(f64, String)>]) -> (f64, String) {
    let others: Vec<_> = warned
        .iter()
        .enumerate()
        .filter(|(k, w)| *k != 1 && w.is_some())
        .collect();
    assert!(others.is_empty(), "{others:?}");
    warned[1].clone().expect("GPU-1's fault is flagged")
}

#[test]
fn a_cooling_fault_is_flagged_against_the_gpus_own_load_and_its_hosts_air() {
    // GPU-1's thermal resistance rises 4 % at 30 h: +1.8 °C at 650 W, a
    // third of the day's swing of the air.
    let fault = |k: usize, h: f64| if k == 1 && h >= 30.0 { 0.04 } else { 0.0 };
    let (at, why) = only_gpu_1(&run(40.0, &|_, h| Some(training(h)), &fault));
    assert!(at > 30.0 && at < 31.0, "flagged {:.2} h after", at - 30.0);
    assert!(why.contains("its own"), "{why}");
}

#[test]
fn peers_that_idle_or_leave_move_nobody() {
    // GPU-3 idles from 20 h to 30 h; GPU-4 stops reporting at 36 h (a
    // failure): the air that the others' median stands for is unchanged,
    // and nobody is faulty.
    let load = |k: usize, h: f64| match k {
        3 if (20.0..30.0).contains(&h) => Some(60.0),
        4 if h >= 36.0 => None,
        _ => Some(training(h)),
    };
    let warned = run(60.0, &load, &|_, _| 0.0);
    assert!(warned.iter().all(Option::is_none), "{warned:?}");
}

#[test]
fn a_gpus_first_training_after_a_day_idle_is_not_a_fault() {
    // GPU-5 idles for 24 h, then trains: its fit has never seen the load
    // (the slope is unknown until it has), which is not a departure.
    let load = |k: usize, h: f64| {
        Some(if k == 5 && h < 24.0 {
            60.0
        } else {
            training(h)
        })
    };
    let warned = run(40.0, &load, &|_, _| 0.0);
    assert!(warned.iter().all(Option::is_none), "{warned:?}");
}

#[test]
fn a_step_in_a_gpus_first_hours_is_not_learnt_before_it_warns() {
    // GPU-1's thermal resistance rises 6 % 2.5 h into the run (+2.7 °C
    // at 650 W), before its own fit judges anything: only its host
    // peers in the job see it, against a baseline of a couple of hours,
    // which took the step in at full weight and fell back short of the
    // threshold.
    let fault = |k: usize, h: f64| if k == 1 && h >= 2.5 { 0.06 } else { 0.0 };
    let warned = run_in(Some("job-1"), 20.0, &|_, h| Some(training(h)), &fault);
    let (at, why) = only_gpu_1(&warned);
    assert!(at < 12.0, "flagged {:.2} h after", at - 2.5);
    assert!(why.contains("host's other GPUs"), "{why}");
}

#[test]
fn without_a_job_label_the_gpus_that_started_together_are_peers() {
    // The step above on GPUs whose telemetry names no job (the label is
    // optional): they idled, then started training in the same minute,
    // so they are taken for one job and judge one another. GPU-5 started
    // later: another job, nobody's peer.
    let load = |k: usize, h: f64| {
        let start = if k == 5 { 1.5 } else { 1.0 };
        Some(if h < start { 60.0 } else { training(h) })
    };
    let fault = |k: usize, h: f64| if k == 1 && h >= 2.5 { 0.06 } else { 0.0 };
    let (at, why) = only_gpu_1(&run(20.0, &load, &fault));
    assert!(at < 12.0, "flagged {:.2} h after", at - 2.5);
    assert!(why.contains("host's other GPUs"), "{why}");
}

#[test]
fn a_drift_of_every_gpus_residual_is_nobodys_fault() {
    // Every GPU's residual rises 6 °C over the job's first ten hours (an
    // expectation still learning): each GPU's own level follows it with a
    // lag, and the common part taken less those levels lagged with it;
    // each GPU then read as warmer than its peers. Nobody is.
    let drift = |h: f64| {
        if h < 2.0 {
            -6.0
        } else {
            -6.0 + 0.6 * (h - 2.0).min(10.0)
        }
    };
    let load = |_: usize, h: f64| Some(if h < 2.0 { 60.0 } else { training(h) });
    let warned = run_drifting(Some("job-1"), 20.0, &load, &|_, _| 0.0, &drift);
    assert!(warned.iter().all(Option::is_none), "{warned:?}");
}

#[test]
fn the_fit_predicts_only_loads_it_has_seen() {
    let mut m = Moments::default();
    for i in 0..60 {
        let p = if i % 2 == 0 { 1.0 } else { 3.0 };
        for (v, x) in m
            .iter_mut()
            .zip([1.0, p, p * p, 30.0 + 7.0 * p, p * (30.0 + 7.0 * p)])
        {
            *v += x;
        }
    }
    let at = |p| predict(&m, p);
    assert!((at(2.0).expect("inside") - 44.0).abs() < 0.1);
    assert!(at(3.0).is_some());
    assert_eq!(at(6.5), None, "650 W after 100–300 W: extrapolated");
    assert_eq!(
        predict(&[10.0, 10.0, 10.0, 300.0, 300.0], 1.0),
        None,
        "too few buckets"
    );
}

/// GPU-1's thermal resistance climbing from `start` h into its history to
/// +8 % three hours later (+3.6 °C at 650 W), with no job to give it host
/// peers: how long after `start` it is flagged, and why.
fn flagged_after_a_climb_from(start: f64) -> (f64, String) {
    let fault = |k: usize, h: f64| {
        if k == 1 && h >= start {
            0.08 * ((h - start) / 3.0).min(1.0)
        } else {
            0.0
        }
    };
    let (at, why) = only_gpu_1(&run(start + 11.0, &|_, h| Some(training(h)), &fault));
    (at - start, why)
}

#[test]
fn a_cooling_fault_early_in_a_gpus_history_is_judged_once_its_fit_predicts() {
    // A climb from 9 h: its own fit, predicting from about 4 h on, judges
    // it and warns 1.9 h into the climb. With the counters' four hours of
    // warm-up on top of the fit's, it warned 5.25 h in.
    let (after, why) = flagged_after_a_climb_from(9.0);
    assert!(after < 3.5, "flagged {after:.2} h after");
    assert!(why.contains("its own"), "{why}");
}

#[test]
fn a_cooling_fault_in_a_new_fleets_first_hours_is_judged_on_the_first_fit() {
    // Every GPU is new (a fleet just deployed, or forewarn just started)
    // and the climb starts 4.5 h in. The lagged fit has four hours only
    // 6 h in; the fit of the first four hours predicts from 4 h on and
    // warns within the climb (2.8 h in). Judged by the lagged fit alone,
    // the test began once the climb was half learnt and warned 5.1 h in.
    let (after, why) = flagged_after_a_climb_from(4.5);
    assert!(after < 3.5, "flagged {after:.2} h after");
    assert!(why.contains("its own"), "{why}");
}
