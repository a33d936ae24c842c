use super::*;

/// The SKU's id in the shard's `ModelBank`.
const SKU: u32 = 0;

/// A settled sample at steady `power` in training (`busy`) or idle.
fn steady(gpu_temp: f32, power: f32, busy: bool, host: u64) -> RackInput {
    RackInput {
        gpu_temp,
        power_ewma_w: power,
        power_w: power,
        phase: if busy { 2 } else { 0 },
        settled: true,
        learn: false,
        dt_ms: 30_000,
        host,
    }
}

/// One rack of `hosts` × 4 GPUs whose loads change every 30 minutes (some
/// idle, some training), for `minutes` from `from_min` at 30 s intervals;
/// `air(minute)` is the rack's inlet. Returns the readings.
fn run(
    t: &mut RackAir,
    id: u32,
    gpus: &mut [AirBaseline],
    from_min: i64,
    minutes: i64,
    air: impl Fn(i64) -> f32,
) -> Vec<RackReading> {
    let cfg = FeatureConfig::default();
    let mut out = Vec::new();
    for m in from_min..from_min + minutes {
        for half in 0..2 {
            let ts = m * 60_000 + half * 30_000;
            for (g, base) in gpus.iter_mut().enumerate() {
                let busy = !(g + m as usize / 30).is_multiple_of(3);
                let power = if busy { 650.0 } else { 80.0 };
                // Each GPU its own slot offset and thermal resistance.
                let r_th = 0.066 + 0.001 * (g % 8) as f32;
                let temp = air(m) + 0.5 * (g % 5) as f32 + 4.0 + r_th * power;
                let inp = RackInput {
                    learn: g % 2 == 0,
                    ..steady(temp, power, busy, (g / 4) as u64)
                };
                let (_, closed) = t.push(id, base, SKU, ts, &inp, &cfg);
                out.extend(closed);
            }
        }
    }
    out
}

#[test]
fn a_warmer_rack_reads_its_air_shift_whatever_its_load_mix() {
    let mut t = RackAir::new(60_000);
    let c: Option<Arc<str>> = Some("east-1".into());
    let id = t.resolve(&"r0".into(), &c);
    let mut gpus = vec![AirBaseline::default(); 16];
    // Two hours to learn the slope and each GPU's baseline, loads changing.
    let calm = run(&mut t, id, &mut gpus, 0, 120, |_| 22.0);
    let settled: Vec<f32> = calm[60..].iter().map(|r| r.shift_c).collect();
    assert!(settled.iter().all(|s| s.abs() < 1.0), "{settled:?}");
    assert!(calm[60..].iter().all(|r| r.samples == 32 && r.hosts == 4));
    assert_eq!(calm.last().map(|r| r.end_ms), Some(119 * 60_000));
    // The rack's air +10 °C for an hour (ramping over 10 minutes).
    let hot = run(&mut t, id, &mut gpus, 120, 60, |m| {
        22.0 + 10.0 * ((m - 120) as f32 / 10.0).min(1.0)
    });
    let late: Vec<f32> = hot[15..].iter().map(|r| r.shift_c).collect();
    assert!(late.iter().all(|s| *s > 8.0), "{late:?}");
    // Recovered: back to ~0 (less what the baseline absorbed).
    let after = run(&mut t, id, &mut gpus, 180, 60, |_| 22.0);
    let tail: Vec<f32> = after[20..].iter().map(|r| r.shift_c).collect();
    assert!(tail.iter().all(|s| s.abs() < 2.0), "{tail:?}");
}

#[test]
fn a_few_hot_gpus_do_not_move_the_rack_and_small_buckets_give_no_reading() {
    let mut t = RackAir::new(60_000);
    let id = t.resolve(&"r0".into(), &None);
    let mut gpus = vec![AirBaseline::default(); 16];
    run(&mut t, id, &mut gpus, 0, 120, |_| 22.0);
    // Three GPUs run 20 °C hot (their own fault): the median stays put.
    let cfg = FeatureConfig::default();
    let mut readings = Vec::new();
    for m in 120..140 {
        for (g, base) in gpus.iter_mut().enumerate() {
            let hot = if g < 3 { 20.0 } else { 0.0 };
            let temp = 22.0 + 0.5 * (g % 5) as f32 + 4.0 + 0.07 * 650.0 + hot;
            let inp = RackInput {
                dt_ms: 60_000,
                ..steady(temp, 650.0, true, (g / 4) as u64)
            };
            readings.extend(t.push(id, base, SKU, m * 60_000, &inp, &cfg).1);
        }
    }
    assert!(
        readings.iter().all(|r| r.shift_c.abs() < 2.0),
        "{readings:?}"
    );
    // A bucket with fewer than MIN_SAMPLES settled GPUs closes without a reading.
    let mut few = Vec::new();
    for m in 140..145 {
        for base in gpus.iter_mut().take(MIN_SAMPLES as usize - 1) {
            let inp = RackInput {
                dt_ms: 60_000,
                ..steady(60.0, 650.0, true, 0)
            };
            few.extend(t.push(id, base, SKU, m * 60_000, &inp, &cfg).1);
        }
    }
    // The first of these closes bucket 139 (16 GPUs); none after.
    assert_eq!(few.len(), 1, "{few:?}");
    assert_eq!(t.gc(400 * 60_000, 30), 1);
}

#[test]
fn a_phase_first_entered_in_hot_air_does_not_learn_the_heat() {
    let cfg = FeatureConfig::default();
    let mut t = RackAir::new(60_000);
    let id = t.resolve(&"r0".into(), &None);
    // A fleet of mixed loads teaches the SKU's slope; one GPU only trains.
    let mut fleet = vec![AirBaseline::default(); 16];
    let mut lone = AirBaseline::default();
    let push = |t: &mut RackAir, base: &mut AirBaseline, ts: i64, air: f32, busy: bool| {
        let power = if busy { 650.0 } else { 80.0 };
        let inp = RackInput {
            learn: true,
            ..steady(air + 4.0 + 0.07 * power, power, busy, 0)
        };
        t.push(id, base, SKU, ts, &inp, &cfg).0
    };
    for m in 0..180 {
        for half in 0..2 {
            let ts = m * 60_000 + half * 30_000;
            for (g, base) in fleet.iter_mut().enumerate() {
                push(
                    &mut t,
                    base,
                    ts,
                    22.0,
                    !(g + m as usize / 30).is_multiple_of(3),
                );
            }
            push(&mut t, &mut lone, ts, 22.0, true);
        }
    }
    // The rack's air +10 °C, and the lone GPU's job ends: its first idle
    // samples read the heat, not 0.
    let mut shifts = Vec::new();
    for m in 180..200 {
        for half in 0..2 {
            let ts = m * 60_000 + half * 30_000;
            shifts.push(push(&mut t, &mut lone, ts, 32.0, false));
        }
    }
    assert!(shifts.iter().all(|s| (*s - 10.0).abs() < 1.5), "{shifts:?}");
}

#[test]
fn a_slope_learnt_under_load_alone_is_not_carried_to_idle() {
    // A fleet that only trains, at 610–690 W, where hotter-running GPUs
    // also draw more: across GPUs the temperature climbs 0.1 °C/W, though
    // each GPU's own is 0.07. A driver reload idles a host (80 W) in the
    // same air: its GPUs read what their idle shows, not 0.03 °C/W × 570 W
    // of a slope carried where it was never learnt.
    let cfg = FeatureConfig::default();
    let mut t = RackAir::new(60_000);
    let id = t.resolve(&"r0".into(), &None);
    let mut fleet = vec![AirBaseline::default(); 16];
    let temp = |g: usize, power: f32| {
        let draw = 610.0 + 10.0 * (g % 9) as f32;
        let offset = 0.03 * (draw - 650.0);
        (22.0 + 4.0 + offset + 0.07 * power, draw)
    };
    let mut idle_shifts = Vec::new();
    for m in 0..240 {
        for half in 0..2 {
            let ts = m * 60_000 + half * 30_000;
            for (g, base) in fleet.iter_mut().enumerate() {
                let idle = m >= 180 && g < 4;
                let (_, draw) = temp(g, 0.0);
                let power = if idle { 80.0 } else { draw };
                let inp = RackInput {
                    learn: true,
                    ..steady(temp(g, power).0, power, !idle, (g / 4) as u64)
                };
                let (shift, _) = t.push(id, base, SKU, ts, &inp, &cfg);
                if idle && shift.is_finite() {
                    idle_shifts.push(shift);
                }
            }
        }
    }
    assert!(!idle_shifts.is_empty(), "the idle phase is judged");
    assert!(
        idle_shifts.iter().all(|s| s.abs() < 1.5),
        "{:?}",
        &idle_shifts[..8.min(idle_shifts.len())]
    );
}
