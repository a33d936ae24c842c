//! Physics tests (part of [`super`]): idle and training figures, a hot
//! inlet's throttling, the precursor growth curve.

use super::*;
use crate::simulator::topology::Sku;

fn run(spec: &'static SkuSpec, d: Demand, inlet: f64, ticks: usize) -> (GpuState, Metrics) {
    let mut rng = SimRng::new(9);
    let mut g = GpuState::new(0, spec, 3, inlet, &mut rng);
    let mut env = Env::new(30);
    let mut m = Metrics::default();
    for k in 0..ticks {
        env.ts_ms = k as i64 * 30_000;
        g.step(&env, &d, inlet, &mut rng, &mut m);
    }
    (g, m)
}

#[test]
fn realistic_idle_and_training_figures() {
    let h100 = Sku::H100Sxm.spec();
    let (_, idle) = run(h100, Demand::default(), 24.0, 60);
    let p = idle.get(Field::PowerUsage).unwrap_or(0.0);
    assert!((60.0..80.0).contains(&p), "idle power {p}");
    let t = idle.get(Field::GpuTemp).unwrap_or(0.0);
    assert!((28.0..40.0).contains(&t), "idle temp {t}");
    let train = Demand {
        util: 0.98,
        power_frac: 0.9,
        fb_frac: 0.9,
        traffic: 1.0,
        ..Demand::default()
    };
    let (g, m) = run(h100, train, 24.0, 120);
    let p = m.get(Field::PowerUsage).unwrap_or(0.0);
    assert!((550.0..=700.0).contains(&p), "training power {p}");
    let t = m.get(Field::GpuTemp).unwrap_or(0.0);
    assert!((55.0..85.0).contains(&t), "training temp {t}");
    let hbm = m.get(Field::MemoryTemp).unwrap_or(0.0);
    assert!(hbm - t >= 3.0 && hbm - t <= 12.0, "hbm {hbm} vs gpu {t}");
    assert_eq!(m.get(Field::SmClock), Some(1980.0));
    assert_eq!(g.throttle, 0.0);
    // 60 min at ~620 W ≈ 2.2 MJ.
    let e = m.get(Field::TotalEnergy).unwrap_or(0.0);
    assert!((1.8e9..2.6e9).contains(&e), "energy {e} mJ");
}

#[test]
fn hot_inlet_throttles_and_counts_violation() {
    let h100 = Sku::H100Sxm.spec();
    let train = Demand {
        util: 0.98,
        power_frac: 0.95,
        traffic: 1.0,
        ..Demand::default()
    };
    let (_, m) = run(h100, train, 40.0, 240);
    let t = m.get(Field::GpuTemp).unwrap_or(0.0);
    assert!(
        (85.0..=92.0).contains(&t),
        "regulated near slowdown, got {t}"
    );
    assert!(m.get(Field::SmClock).unwrap_or(0.0) < 1900.0);
    assert!(m.get(Field::ThermalViolation).unwrap_or(0.0) > 0.0);
    assert_ne!(
        m.get(Field::ClocksEventReasons).unwrap_or(0.0) as u32 & REASON_SW_THERMAL,
        0
    );
}

#[test]
fn growth_is_monotone_from_zero_to_one() {
    assert_eq!(growth(0.0), 0.0);
    assert!((growth(1.0) - 1.0).abs() < 1e-12);
    assert!(growth(0.5) < 0.1 && growth(0.9) > 0.5);
}
