use features::{Col, FEATURE_COUNT, FeatureRow, Phase};

use super::*;

const STEP_MS: i64 = 30_000;

/// A row without an energy counter or a power limit.
fn row(i: i64, power: f32, temp: f32) -> FeatureRow {
    with(i, power, temp, f32::NAN, f32::NAN)
}

/// A row with the energy counter's rate and the power's share of its limit.
fn with(i: i64, power: f32, temp: f32, energy_w: f32, frac: f32) -> FeatureRow {
    let mut values = [f32::NAN; FEATURE_COUNT];
    values[Col::PowerW as usize] = power;
    values[Col::GpuTemp as usize] = temp;
    values[Col::EnergyPowerW as usize] = energy_w;
    values[Col::PowerFrac as usize] = frac;
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

/// The first sample of `rows` that warns, asserting every warning names
/// `signal`.
fn first_warning(
    w: &mut FrozenWatch,
    rows: impl Iterator<Item = FeatureRow>,
    signal: &str,
) -> Option<i64> {
    let mut first = None;
    for r in rows {
        let (c, why) = judge(w, &r);
        if c > 0.0 {
            assert_eq!(
                (c, why),
                (FROZEN_RISK, vec![signal.to_string()]),
                "{}",
                r.ts_ms
            );
            first.get_or_insert(r.ts_ms / STEP_MS);
        }
    }
    first
}

/// Live power: moving at every sample by a few watts around 300 (`swing`
/// from the sine), a few milliwatts of jitter.
fn live_power(i: i64, swing: f32) -> f32 {
    300.0 + swing * ((i as f32) * 0.7).sin() + 0.013 * (i % 7) as f32
}

/// A live GPU without an energy counter: power moving at every sample,
/// temperature following it in whole degrees.
fn live(w: &mut FrozenWatch, from: i64, to: i64, swing: f32) -> (f32, f32) {
    let mut last = (0.0, 0.0);
    for i in from..to {
        let p = live_power(i, swing);
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
    // Frozen: the same reading, fresh timestamps. The run began at the last
    // live sample: 15 min later is 30 samples on.
    let first = first_warning(
        &mut w,
        (120..180).map(|i| row(i, p, t)),
        "DCGM_FI_DEV_POWER_USAGE",
    );
    assert_eq!(first, Some(119 + FROZEN_MS / STEP_MS));
    // It moves again: nothing.
    assert_eq!(judge(&mut w, &row(180, p + 1.5, t)).0, 0.0);
}

#[test]
fn a_standing_energy_counter_with_a_repeated_power_is_a_frozen_exporter_even_in_whole_watts() {
    let mut w = FrozenWatch::default();
    // Power in whole watts (never judged alone), energy growing.
    for i in 0..120 {
        let p = live_power(i, 40.0).round();
        let (c, _) = judge(&mut w, &with(i, p, 70.0, p + 0.37, f32::NAN));
        assert_eq!(c, 0.0, "live sample {i}");
    }
    let first = first_warning(
        &mut w,
        (120..200).map(|i| with(i, 312.0, 70.0, 0.0, f32::NAN)),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    );
    assert_eq!(first, Some(120 + FROZEN_MS / STEP_MS));
}

#[test]
fn an_energy_counter_that_stalls_while_the_power_moves_is_not_a_frozen_exporter() {
    // Stale energy on its own (reported for MIG instances): the power says
    // the GPU is read.
    let mut w = FrozenWatch::default();
    for i in 0..120 {
        let p = live_power(i, 40.0);
        judge(&mut w, &with(i, p, 70.0, p, f32::NAN));
    }
    for i in 120..240 {
        let r = with(i, live_power(i, 40.0), 70.0, 0.0, f32::NAN);
        assert_eq!(judge(&mut w, &r).0, 0.0, "sample {i}");
    }
}

#[test]
fn without_a_recent_energy_reading_the_power_alone_decides() {
    // The counter was read, then dropped from the counters list.
    let mut w = FrozenWatch::default();
    for i in 0..120 {
        let p = live_power(i, 40.0);
        judge(&mut w, &with(i, p, 70.0, p, f32::NAN));
    }
    let p = live_power(119, 40.0);
    let first = first_warning(
        &mut w,
        (120..200).map(|i| row(i, p, 70.0)),
        "DCGM_FI_DEV_POWER_USAGE",
    );
    assert_eq!(first, Some(119 + FROZEN_MS / STEP_MS));
}

#[test]
fn an_idle_board_read_in_whole_watts_may_hold_still() {
    // No energy counter; power read in whole watts: an idle spell at
    // exactly 61 W and 33 °C for an hour is not news.
    let mut w = FrozenWatch::default();
    for i in 0..120 {
        let p = live_power(i, 40.0).round();
        assert_eq!(judge(&mut w, &row(i, p, 70.0 + (i % 3) as f32)).0, 0.0);
    }
    for i in 120..240 {
        assert_eq!(judge(&mut w, &row(i, 61.0, 33.0)).0, 0.0, "idle sample {i}");
    }
}

#[test]
fn a_reading_that_never_moved_is_not_judged() {
    // A board whose exporter fills the power with a constant fraction of a
    // watt and the energy counter with a constant: constant by nature.
    let mut w = FrozenWatch::default();
    for i in 0..400 {
        let r = with(i, 0.5, 35.0, 0.0, f32::NAN);
        assert_eq!(judge(&mut w, &r).0, 0.0, "sample {i}");
    }
}

/// A GPU that was live, then idle (power jittering by a watt around 70,
/// temperature steady at 33 °C): the temperature's run begins there.
fn live_then_idle(frac_of: f32) -> FrozenWatch {
    let mut w = FrozenWatch::default();
    for i in 0..120 {
        let p = live_power(i, 40.0);
        let t = (40.0 + p / 10.0).round();
        judge(&mut w, &with(i, p, t, f32::NAN, p / frac_of));
    }
    for i in 120..240 {
        let p = 70.0 + ((i as f32) * 0.9).sin();
        let r = with(i, p, 33.0, f32::NAN, p / frac_of);
        assert_eq!(judge(&mut w, &r).0, 0.0, "idle sample {i}");
    }
    w
}

#[test]
fn a_temperature_stuck_through_a_held_load_change_warns() {
    // A 700 W board goes from idle to a 350 W training step; the sensor
    // holds its idle reading. The smoothed power passes the swing (210 W)
    // about 6 min in, and the reading must hold 10 min more.
    let mut w = live_then_idle(700.0);
    let first = first_warning(
        &mut w,
        (240..320).map(|i| with(i, 350.0 + (i % 5) as f32, 33.0, f32::NAN, 0.5)),
        "DCGM_FI_DEV_GPU_TEMP",
    );
    assert!(first.is_some_and(|f| (260..=275).contains(&f)), "{first:?}");
}

#[test]
fn a_burst_a_light_load_or_a_thermal_clock_event_is_not_a_stuck_sensor() {
    let idle = |i: i64| 70.0 + ((i as f32) * 0.9).sin();
    // A one-minute burst of +300 W on an idle 700 W board, then idle: the
    // smoothed power moves by about 100 W, under the swing.
    let mut w = live_then_idle(700.0);
    let burst = (240..300).map(|i| {
        let p = if (240..242).contains(&i) {
            370.0
        } else {
            idle(i)
        };
        with(i, p, 33.0, f32::NAN, p / 700.0)
    });
    assert_eq!(first_warning(&mut w, burst, "DCGM_FI_DEV_GPU_TEMP"), None);
    // A light job within the swing of the idle power.
    let mut w = live_then_idle(700.0);
    let light = (240..320).map(|i| {
        let p = 250.0 + 0.011 * (i % 7) as f32;
        with(i, p, 33.0, f32::NAN, p / 700.0)
    });
    assert_eq!(first_warning(&mut w, light, "DCGM_FI_DEV_GPU_TEMP"), None);
    // A GPU held at its target by its clocks: flat while power moves.
    let mut w = live_then_idle(700.0);
    let held = (240..320).map(|i| {
        let mut r = with(i, 350.0 + (i % 5) as f32, 33.0, f32::NAN, 0.5);
        r.values[Col::ThrottleThermal as usize] = 1.0;
        r
    });
    assert_eq!(first_warning(&mut w, held, "DCGM_FI_DEV_GPU_TEMP"), None);
}

#[test]
fn a_low_power_boards_swing_is_its_own() {
    // A 70 W board from 20 W idle to 65 W: 45 W, two thirds of its limit
    // (a fixed 100 W would never be reached).
    let mut w = FrozenWatch::default();
    for i in 0..120 {
        let p = 40.0 + 20.0 * ((i as f32) * 0.7).sin() + 0.013 * (i % 7) as f32;
        judge(
            &mut w,
            &with(i, p, (30.0 + p / 4.0).round(), f32::NAN, p / 70.0),
        );
    }
    for i in 120..160 {
        let p = 20.0 + 0.3 * ((i as f32) * 0.9).sin();
        judge(&mut w, &with(i, p, 33.0, f32::NAN, p / 70.0));
    }
    let first = first_warning(
        &mut w,
        (160..220).map(|i| with(i, 65.0 + 0.1 * (i % 3) as f32, 33.0, f32::NAN, 65.0 / 70.0)),
        "DCGM_FI_DEV_GPU_TEMP",
    );
    assert!(first.is_some(), "{first:?}");
}

#[test]
fn a_gap_in_the_readings_starts_the_run_afresh() {
    let mut w = FrozenWatch::default();
    let (p, t) = live(&mut w, 0, 120, 40.0);
    // Twenty equal readings 10 min apart would span hours: each is a new run.
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
