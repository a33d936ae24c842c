use features::{Col, FEATURE_COUNT, FeatureRow, Phase};

use super::*;

const STEP_MS: i64 = 30_000;

/// A row without an energy counter.
fn row(i: i64, power: f32, temp: f32) -> FeatureRow {
    with_energy(i, power, temp, f32::NAN)
}

fn with_energy(i: i64, power: f32, temp: f32, energy_w: f32) -> FeatureRow {
    let mut values = [f32::NAN; FEATURE_COUNT];
    values[Col::PowerW as usize] = power;
    values[Col::GpuTemp as usize] = temp;
    values[Col::EnergyPowerW as usize] = energy_w;
    FeatureRow {
        ts_ms: i * STEP_MS,
        gpu: "GPU-f".into(),
        topo: Default::default(),
        phase: Phase::Training,
        values,
    }
}

/// The anomaly component and its reasons' signals after `row`.
fn judge(w: &mut FrozenWatch, r: &FeatureRow) -> (f32, Vec<String>) {
    let mut c = [0.0f32; KINDS];
    let mut reasons = Vec::new();
    w.apply(r, &mut c, &mut reasons);
    (
        c[Kind::Anomaly as usize],
        reasons.into_iter().map(|(_, e)| e.signal).collect(),
    )
}

/// A live GPU for an hour: power moving at every sample by a few watts
/// around 300 (idle-like jitter when `swing` is small), temperature
/// following it in whole degrees.
fn live(w: &mut FrozenWatch, from: i64, to: i64, swing: f32) -> (f32, f32) {
    let mut last = (0.0, 0.0);
    for i in from..to {
        let p = 300.0 + swing * ((i as f32) * 0.7).sin() + 0.013 * (i % 7) as f32;
        let t = (40.0 + p / 10.0).round();
        let (c, why) = judge(w, &row(i, p, t));
        assert_eq!((c, why.len()), (0.0, 0), "live sample {i}");
        last = (p, t);
    }
    last
}

#[test]
fn an_exporter_repeating_its_last_sample_warns_after_a_quarter_hour_and_clears_when_it_moves() {
    let mut w = FrozenWatch::default();
    let (p, t) = live(&mut w, 0, 120, 40.0);
    // Frozen: the same reading, fresh timestamps.
    let frozen_at = 120;
    let mut first = None;
    for i in frozen_at..frozen_at + 60 {
        let (c, why) = judge(&mut w, &row(i, p, t));
        if c > 0.0 {
            assert_eq!(c, FROZEN_RISK);
            assert_eq!(why, vec!["DCGM_FI_DEV_POWER_USAGE".to_string()]);
            first.get_or_insert(i);
        }
    }
    // The run began at the last live sample: 15 min later is 30 samples on.
    assert_eq!(first, Some(frozen_at - 1 + FROZEN_MS / STEP_MS));
    // It moves again: nothing.
    let (c, _) = judge(&mut w, &row(180, p + 1.5, t));
    assert_eq!(c, 0.0);
}

#[test]
fn an_energy_counter_that_stands_still_is_a_frozen_exporter_whatever_the_power_reads() {
    let mut w = FrozenWatch::default();
    // Power in whole watts (not judged on its own), energy growing.
    for i in 0..120 {
        let p = (300.0 + 40.0 * ((i as f32) * 0.7).sin()).round();
        let (c, _) = judge(&mut w, &with_energy(i, p, 70.0, p + 0.37));
        assert_eq!(c, 0.0, "live sample {i}");
    }
    let mut first = None;
    for i in 120..200 {
        let (c, why) = judge(&mut w, &with_energy(i, 312.0, 70.0, 0.0));
        if c > 0.0 {
            assert_eq!(
                why,
                vec!["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION".to_string()]
            );
            first.get_or_insert(i);
        }
    }
    assert_eq!(first, Some(120 + FROZEN_MS / STEP_MS));
}

#[test]
fn an_idle_board_read_in_whole_watts_may_hold_still() {
    // No energy counter; power read in whole watts: an idle spell at
    // exactly 61 W and 33 °C for an hour is not news.
    let mut w = FrozenWatch::default();
    for i in 0..120 {
        let p = (300.0 + 40.0 * ((i as f32) * 0.7).sin()).round();
        assert_eq!(judge(&mut w, &row(i, p, 70.0 + (i % 3) as f32)).0, 0.0);
    }
    for i in 120..240 {
        assert_eq!(judge(&mut w, &row(i, 61.0, 33.0)).0, 0.0, "idle sample {i}");
    }
}

#[test]
fn a_reading_that_never_moved_is_not_judged() {
    // A board without a power reading that its exporter fills with 0, and
    // a temperature that never changed: constant by nature, not frozen.
    let mut w = FrozenWatch::default();
    for i in 0..400 {
        assert_eq!(judge(&mut w, &row(i, 0.0, 35.0)).0, 0.0, "sample {i}");
    }
}

#[test]
fn a_temperature_stuck_while_power_swings_warns_and_a_steady_one_does_not() {
    let mut w = FrozenWatch::default();
    live(&mut w, 0, 120, 40.0);
    // Idle: power jitters by a watt, temperature holds (normal).
    for i in 120..240 {
        let p = 70.0 + ((i as f32) * 0.9).sin();
        assert_eq!(judge(&mut w, &row(i, p, 33.0)).0, 0.0, "idle sample {i}");
    }
    // A light job: power within the threshold of the idle reading.
    for i in 240..300 {
        let p = 70.0 + 0.9 * POWER_SWING_W * (((i as f32) * 0.7).sin() * 0.5 + 0.5);
        assert_eq!(judge(&mut w, &row(i, p, 33.0)).0, 0.0, "small swing {i}");
    }
    // Training, the sensor still stuck at the idle reading.
    let mut first = None;
    for i in 300..380 {
        let p = 300.0 + 80.0 * ((i as f32) * 0.7).sin();
        let (c, why) = judge(&mut w, &row(i, p, 33.0));
        if c > 0.0 {
            assert_eq!(why, vec!["DCGM_FI_DEV_GPU_TEMP".to_string()]);
            first.get_or_insert(i);
        }
    }
    // The temperature's run began in the idle spell, so it qualifies as
    // soon as the power has swung.
    assert!(first.is_some_and(|f| f < 305), "{first:?}");
}

#[test]
fn a_gap_in_the_readings_starts_the_run_afresh() {
    let mut w = FrozenWatch::default();
    let (p, t) = live(&mut w, 0, 120, 40.0);
    // Twenty equal readings 20 min apart would span hours: each is a new run.
    for k in 0..20 {
        let i = 120 + k * (GAP_MS / STEP_MS + 10);
        assert_eq!(judge(&mut w, &row(i, p, t)).0, 0.0, "reading {k}");
    }
}

#[test]
fn missing_readings_are_skipped_and_a_forgotten_gpu_starts_over() {
    let mut w = FrozenWatch::default();
    let (p, t) = live(&mut w, 0, 120, 40.0);
    for i in 120..200 {
        assert_eq!(judge(&mut w, &row(i, f32::NAN, f32::NAN)).0, 0.0);
    }
    w.evict("GPU-f");
    // After the eviction the GPU's history is gone: not judged yet.
    for i in 200..300 {
        assert_eq!(judge(&mut w, &row(i, p, t)).0, 0.0, "sample {i}");
    }
    assert!(w.heap_bytes() > 0);
}
