//! The randomised-precursor scenario: deterministic per seed, every shape
//! and mode drawn, background rates spread over orders of magnitude, the
//! precursor shapes as specified, and precursors that show in telemetry.

use std::collections::BTreeSet;

use features::Field;

use super::tests::{get, series};
use super::*;
use crate::scenarios::scenario;

fn config(seed: u64) -> SimConfig {
    scenario("random_precursors", seed, true)
        .expect("known scenario")
        .config
}

fn sim(seed: u64) -> Simulator {
    Simulator::new(config(seed)).expect("valid config")
}

#[test]
fn same_seed_same_run_other_seed_differs() {
    let cfg = SimConfig {
        hours: 6.0,
        ..config(1)
    };
    let (mut a, mut b) = (
        Simulator::new(cfg.clone()).expect("valid"),
        Simulator::new(cfg.clone()).expect("valid"),
    );
    assert_eq!(a.labels(), b.labels());
    assert_eq!(a.precursors(), b.precursors());
    assert_eq!(a.background_rates(), b.background_rates());
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    while a.next_tick(&mut sa).is_some() {
        b.next_tick(&mut sb);
    }
    assert!(sa == sb, "same seed must give identical samples");
    let c = Simulator::new(SimConfig {
        seed: cfg.seed + 1,
        ..cfg
    })
    .expect("valid");
    assert_ne!(a.precursors(), c.precursors());
    assert_ne!(a.background_rates(), c.background_rates());
}

#[test]
fn draws_every_mode_and_shape_onsets_2_to_48_h() {
    let mut shapes = BTreeSet::new();
    let mut amplitude: std::collections::BTreeMap<FailureKind, (f64, f64)> = Default::default();
    for seed in 1..=4 {
        let s = sim(seed);
        let kinds: BTreeSet<FailureKind> = s.labels().iter().map(|l| l.kind).collect();
        assert_eq!(
            kinds,
            FailureKind::GPU_KINDS.into_iter().collect(),
            "seed {seed}: every GPU mode"
        );
        // 96 GPUs: 3 of each mode.
        assert_eq!(s.labels().len(), 18, "seed {seed}");
        let precursors = s.precursors();
        for l in s.labels() {
            let gpu = l.gpu.as_ref().expect("GPU failure");
            let drawn = precursors.iter().find(|(g, _)| g == gpu).map(|(_, p)| p);
            match l.kind {
                FailureKind::Straggler | FailureKind::SuddenDeath => assert!(drawn.is_none()),
                k => {
                    let p = drawn.expect("a precursor mode has a drawn precursor");
                    let f = l.failure_ms.expect("fails");
                    let lead_h = (f - l.onset_ms) as f64 / 3.6e6;
                    assert!((2.0..=48.0).contains(&lead_h), "{k}: onset {lead_h} h");
                    shapes.insert(p.shape);
                    let e = amplitude.entry(k).or_insert((f64::MAX, 0.0));
                    *e = (e.0.min(p.amplitude), e.1.max(p.amplitude));
                }
            }
        }
    }
    assert_eq!(shapes, Shape::ALL.into_iter().collect());
    for (k, (lo, hi)) in amplitude {
        assert!(hi / lo >= 3.0, "{k}: amplitudes {lo}..{hi} barely vary");
    }
}

#[test]
fn healthy_background_rates_span_two_orders_and_skus_and_workloads_mix() {
    let s = sim(2);
    let failing: BTreeSet<&str> = s.labels().iter().filter_map(|l| l.gpu.as_deref()).collect();
    let healthy: Vec<[f64; 3]> = s
        .background_rates()
        .into_iter()
        .filter(|(g, _)| !failing.contains(&**g))
        .map(|(_, r)| r)
        .collect();
    assert!(healthy.len() >= 70);
    for (c, (lo, hi)) in BACKGROUND_RANGES.iter().enumerate() {
        let min = healthy.iter().map(|r| r[c]).fold(f64::MAX, f64::min);
        let max = healthy.iter().map(|r| r[c]).fold(0.0, f64::max);
        assert!(max / min >= 10.0, "counter {c}: {min}..{max}");
        assert!(min >= *lo && max <= *hi);
    }
    let skus: BTreeSet<&str> = s.gpus().iter().map(|g| &*g.model).collect();
    assert_eq!(skus.len(), 3, "{skus:?}");
    let jobs: BTreeSet<String> = s
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            SimEventKind::JobStart { kind, .. } => Some(format!("{kind:?}")),
            _ => None,
        })
        .collect();
    assert_eq!(jobs.len(), 2, "training and inference: {jobs:?}");
}

#[test]
fn shapes_grow_as_specified() {
    let base = Precursor {
        shape: Shape::Exponential,
        amplitude: 1.0,
        steepness: 5.0,
        duty: 0.25,
        burst_ms: 20 * 60_000,
        burst_seed: 9,
        link_drop_at: 2.0,
    };
    let with = |shape| Precursor {
        shape,
        ..base.clone()
    };
    for s in Shape::ALL {
        assert_eq!(with(s).level(0.0, 0, 0), 0.0, "{s:?} is quiet before onset");
    }
    let e = with(Shape::Exponential);
    assert!((e.level(1.0, 0, 0) - 1.0).abs() < 1e-12);
    assert!(e.level(0.5, 0, 0) < 0.1);
    assert_eq!(with(Shape::Linear).level(0.3, 0, 0), 0.3);
    assert_eq!(with(Shape::Step).level(0.01, 0, 0), 1.0);
    // Bursty: on in about a quarter of the blocks, averaging the envelope.
    let b = with(Shape::Bursty);
    let levels: Vec<f64> = (0..4_000)
        .map(|k| b.level(0.5, k * 20 * 60_000, 0))
        .collect();
    let on = levels.iter().filter(|l| **l > 0.0).count() as f64 / levels.len() as f64;
    assert!((on - 0.25).abs() < 0.03, "on share {on}");
    let mean = levels.iter().sum::<f64>() / levels.len() as f64;
    assert!((mean - 0.5).abs() < 0.06, "mean {mean}");
}

#[test]
fn a_step_precursor_shows_in_the_counters_from_onset() {
    // Find a seed whose HBM failure has a step and fits in a short run.
    let (cfg, label) = (1..40)
        .find_map(|seed| {
            let s = sim(seed);
            let steps = s.precursors();
            s.labels()
                .iter()
                .find(|l| {
                    l.kind == FailureKind::HbmEcc
                        && l.onset_ms > s.config().start_ms + 3_600_000
                        && steps.iter().any(|(g, p)| {
                            Some(g) == l.gpu.as_ref()
                                && p.shape == Shape::Step
                                && p.amplitude > 20.0
                        })
                })
                .map(|l| (s.config().clone(), l.clone()))
        })
        .expect("a step HBM precursor in 40 seeds");
    // The whole run: a shorter one would place its failures elsewhere.
    let until = label.onset_ms + 2 * 3_600_000;
    let (_, samples) = super::tests::run(cfg);
    let gpu = label.gpu.as_deref().expect("GPU");
    let s = series(&samples, gpu);
    let at = |t: i64| {
        s.iter()
            .rev()
            .find(|x| x.ts_ms <= t)
            .map_or(0.0, |x| get(x, Field::EccSbeAggTotal))
    };
    let before = at(label.onset_ms) - at(label.onset_ms - 2 * 3_600_000);
    let after = at(until) - at(label.onset_ms);
    assert!(
        after > before + 20.0,
        "2 h before onset {before}, after {after}"
    );
}

#[test]
fn background_bursts_keep_the_rate_and_overdisperse_the_counts() {
    // Healthy GPUs only: PCIe replays over the run, three reduced fleets.
    let counts = |burst: f64| {
        let (mut total, mut largest_step) = (0.0, 0.0f64);
        for seed in 3..=5 {
            let (sim, samples) = super::tests::run(SimConfig {
                hours: 48.0,
                background_burst: burst,
                ..config(seed)
            });
            let failing: BTreeSet<&str> = sim
                .labels()
                .iter()
                .filter_map(|l| l.gpu.as_deref())
                .collect();
            let mut last: std::collections::BTreeMap<&str, f64> = Default::default();
            for s in samples.iter().filter(|s| !failing.contains(&*s.gpu)) {
                let v = get(s, Field::PcieReplayCounter);
                if let Some(before) = last.insert(&*s.gpu, v) {
                    largest_step = largest_step.max(v - before);
                }
            }
            total += last.values().sum::<f64>();
        }
        (total, largest_step)
    };
    let (one, one_step) = counts(1.0);
    let (eight, eight_step) = counts(8.0);
    assert_eq!(one_step, 1.0, "one error at a time by default");
    assert!(eight_step >= 8.0, "bursts of several errors: {eight_step}");
    // Bursts of 8 make ~1/8 as many draws: a sum within ±3 of its standard
    // deviations (about ±12 % here) of the one-at-a-time run's.
    let ratio = eight / one;
    assert!(
        (0.65..1.5).contains(&ratio),
        "the same long-run rate: {one} vs {eight}"
    );
    assert!(
        SimConfig {
            background_burst: 0.5,
            ..config(3)
        }
        .validate()
        .is_err()
    );
}

#[test]
fn relative_precursors_scale_each_gpus_own_background_and_nothing_else() {
    let (lo, hi) = random_precursors::RELATIVE_RANGE;
    let absolute = sim(3);
    let relative = Simulator::new(SimConfig {
        relative_precursors: true,
        ..config(3)
    })
    .expect("valid config");
    // The same fleet, failures and backgrounds: only the counter
    // precursors' sizes change.
    assert_eq!(absolute.labels(), relative.labels());
    assert_eq!(absolute.background_rates(), relative.background_rates());
    let bg: std::collections::HashMap<_, _> = relative.background_rates().into_iter().collect();
    let kinds: std::collections::HashMap<_, _> = relative
        .labels()
        .iter()
        .filter_map(|l| Some((l.gpu.clone()?, l.kind)))
        .collect();
    let mut scaled = 0;
    for ((gpu, a), (_, r)) in absolute.precursors().into_iter().zip(relative.precursors()) {
        assert_eq!(
            (a.shape, a.steepness, a.duty),
            (r.shape, r.steepness, r.duty)
        );
        let [sbe, pcie, nvl] = bg[&gpu];
        let own = match kinds[&gpu] {
            FailureKind::HbmEcc => sbe,
            FailureKind::Pcie => pcie,
            FailureKind::Nvlink => nvl,
            _ => {
                assert_eq!(a.amplitude, r.amplitude, "{gpu}: thermal unchanged");
                continue;
            }
        };
        let times = r.amplitude / own;
        assert!(
            (lo * 0.999..=hi * 1.001).contains(&times),
            "{gpu}: {times}× its background"
        );
        scaled += 1;
    }
    assert!(scaled >= 6, "every counter mode scaled: {scaled}");
}
