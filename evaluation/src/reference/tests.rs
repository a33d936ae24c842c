use std::collections::HashSet;
use std::sync::Arc;

use datasets::simulator::rng::SimRng;
use features::{Field, Metrics, Sample, Topology};

use super::cusum::{PoissonCusum, TempCusum, TempSettings, increment, median};
use super::table::{View, rows};
use super::watch::{Rates, Watch};
use super::{COUNTERS, Settings, TEMP};

const TICK_MS: i64 = 30_000;
const TICK_H: f64 = 30.0 / 3600.0;

#[test]
fn poisson_cusum_stays_low_on_background_and_finds_a_step() {
    let (lambda0, rho, h) = (0.5, 4.0, 12.0);
    let mut rng = SimRng::new(3);
    let mut c = PoissonCusum::default();
    let mut max_before = 0.0f64;
    // 500 h of background, then 10x the rate.
    let step_tick = (500.0 / TICK_H) as u64;
    let mut crossed = None;
    for k in 0..step_tick + (24.0 / TICK_H) as u64 {
        let rate = if k < step_tick {
            lambda0
        } else {
            10.0 * lambda0
        };
        let s = c.step(rng.poisson(rate * TICK_H) as f64, TICK_H, lambda0, rho);
        if k < step_tick {
            max_before = max_before.max(s);
        } else if s > h && crossed.is_none() {
            crossed = Some((k - step_tick) as f64 * TICK_H);
        }
    }
    assert!(max_before < h, "background reached {max_before}");
    let after = crossed.expect("the step is found");
    assert!(after < 6.0, "found {after} h after the step");
}

#[test]
fn temperature_cusum_learns_an_offset_and_finds_a_rise() {
    let cfg = TempSettings::default();
    let mut rng = SimRng::new(5);
    let mut c = TempCusum::default();
    let (mut max_before, mut crossed) = (0.0f64, None);
    for k in 0..4_000 {
        // The GPU runs 2 °C over its peers; from tick 3,000 a further 3 °C.
        let rise = if k >= 3_000 { 3.0 } else { 0.0 };
        let r = (2.0 + rise + 0.7 * rng.normal()).round();
        let s = c.step(r, 2, TICK_H, &cfg);
        if k < 3_000 {
            max_before = max_before.max(s);
        } else if s > 20.0 && crossed.is_none() {
            crossed = Some(k - 3_000);
        }
    }
    assert!(max_before < 20.0, "offset alone reached {max_before}");
    assert!(
        crossed.is_some_and(|k| k < 60),
        "rise found after {crossed:?} ticks"
    );
}

#[test]
fn helpers() {
    assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
    assert_eq!(median(&mut []), None);
    assert_eq!(increment(5.0, 9.0), 4.0);
    assert_eq!(increment(5.0, 2.0), 2.0, "a reset counts from 0");
}

/// One host of 8 GPUs, `hours` of 30 s ticks: GPU `g` logs correctable ECC
/// errors at `rate(g, hour)` per hour; temperatures all equal.
fn fleet(hours: f64, rate: impl Fn(usize, f64) -> f64) -> Vec<Vec<Sample>> {
    let mut rng = SimRng::new(11);
    let mut sbe = [0.0f64; 8];
    let host: Arc<str> = "node-1".into();
    let ticks = (hours / TICK_H) as i64;
    (0..ticks)
        .map(|k| {
            let hour = k as f64 * TICK_H;
            (0..8)
                .map(|g| {
                    sbe[g] += rng.poisson(rate(g, hour) * TICK_H) as f64;
                    let mut m = Metrics::default();
                    m.set(Field::EccSbeAggTotal, sbe[g]);
                    m.set(Field::GpuTemp, 60.0);
                    m.set(Field::GpuUtil, 95.0);
                    Sample {
                        ts_ms: k * TICK_MS,
                        gpu: format!("GPU-{g}").into(),
                        topo: Topology {
                            host: Some(host.clone()),
                            ..Topology::default()
                        },
                        metrics: m,
                        extra: Vec::new(),
                    }
                })
                .collect()
        })
        .collect()
}

/// Runs both passes with GPU 7 watched; its alerts' times in hours.
fn alerts_on_gpu7(ticks: &[Vec<Sample>]) -> (Vec<f64>, [f64; COUNTERS.len()]) {
    let watched: HashSet<Arc<str>> = [Arc::from("GPU-7")].into_iter().collect();
    let mut rates = Rates::new(watched.clone());
    for t in ticks {
        rates.tick(t);
    }
    let lambda0 = rates.per_h(1e-3);
    let mut w = Watch::new(Settings::default(), lambda0, watched);
    for t in ticks {
        w.tick(t);
    }
    let max = w.healthy_max();
    let hours = w
        .alerts(&std::array::from_fn(|i| max[i].0))
        .iter()
        .map(|e| e.ts as f64 / 3.6e6)
        .collect();
    (hours, lambda0)
}

/// Healthy GPUs' backgrounds spread over 0.05–0.36 errors per hour; GPU 7
/// (watched) at 0.07.
fn background(g: usize) -> f64 {
    0.05 * 10f64.powf(if g == 7 { 1.0 } else { g as f64 } / 7.0)
}

#[test]
fn finds_a_planted_step_and_not_pure_background() {
    // GPU 7 at a middling background rate: no alert, and λ0 is the
    // healthy GPUs' mean.
    let (quiet, lambda0) = alerts_on_gpu7(&fleet(48.0, |g, _| background(g)));
    assert!(quiet.is_empty(), "alerts on background: {quiet:?}");
    let mean = (0..7).map(background).sum::<f64>() / 7.0;
    assert!(
        (lambda0[0] / mean - 1.0).abs() < 0.4,
        "λ0 {} vs {mean}",
        lambda0[0]
    );
    // From hour 24, 20 errors per hour: alerted after the step, not before.
    let (step, _) = alerts_on_gpu7(&fleet(48.0, |g, h| {
        if g == 7 && h >= 24.0 {
            20.0
        } else {
            background(g)
        }
    }));
    let first = step.first().copied().expect("the step is alerted");
    assert!((24.0..28.0).contains(&first), "first alert at {first} h");
}

#[test]
fn temperature_statistic_is_index_temp() {
    assert_eq!(super::stat_name(TEMP), "temp_vs_peers");
    assert_eq!(super::stat_name(0), "ecc_sbe");
}

#[test]
fn table_counts_and_medians() {
    let v = |kind: &str, lead: Option<f64>, eligible: bool| View {
        kind: kind.into(),
        gpu: String::new(),
        lead_h: lead,
        detected: lead.is_some(),
        early_eligible: eligible,
    };
    let views = [
        v("hbm_ecc", Some(5.0), true),
        v("hbm_ecc", Some(0.5), true),
        v("hbm_ecc", None, true),
        v("sudden_death", Some(0.0), false),
    ];
    let r = rows(&views, |v| Some(v.kind.clone()));
    assert_eq!(r.len(), 3);
    let hbm = &r[0];
    assert_eq!(
        (hbm.failures, hbm.eligible, hbm.detected, hbm.early_1h),
        (3, 3, 2, 1)
    );
    assert_eq!(hbm.median_lead_h, Some(0.5));
    assert_eq!(
        hbm.median_alerted_lead_h,
        Some(5.0),
        "the upper middle value"
    );
    assert_eq!(r[2].key, "all precursors");
    assert_eq!(r[2].failures, 3);
}

#[test]
fn watched_gpus_keep_their_counter_increments_for_the_evidence() {
    let ticks = fleet(12.0, |g, _| if g == 7 { 5.0 } else { 0.2 });
    let watched: HashSet<Arc<str>> = [Arc::from("GPU-7")].into_iter().collect();
    let mut w = Watch::new(Settings::default(), [0.1; COUNTERS.len()], watched);
    for t in &ticks {
        w.tick(t);
    }
    let counts = w.counts("GPU-7").expect("a watched GPU's increments");
    assert_eq!(
        counts.len(),
        ticks.len() - 1,
        "one per sample after the first"
    );
    let total: f64 = counts.iter().map(|(_, c)| f64::from(c[0])).sum();
    let last = ticks
        .last()
        .and_then(|t| t[7].metrics.get(Field::EccSbeAggTotal));
    let first = ticks[0][7].metrics.get(Field::EccSbeAggTotal);
    assert_eq!(Some(total), last.zip(first).map(|(l, f)| l - f));
    assert!(w.counts("GPU-1").is_none(), "healthy GPUs keep no trace");
}
