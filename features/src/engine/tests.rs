//! Engine tests on hand-built sample streams (simulator-driven acceptance
//! tests live in `datasets/tests/features_on_simulator.rs`).

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::sample::Topology;
use crate::vector::Col;

const T0: i64 = 1_793_491_200_000;
const STEP: i64 = 30_000;

fn topo(host: &str, job: Option<&str>) -> Topology {
    Topology {
        host: Some(host.into()),
        rack: Some("r1".into()),
        cluster: Some("c1".into()),
        model: Some("NVIDIA H100 80GB HBM3".into()),
        job: job.map(Arc::from),
    }
}

/// A healthy GPU at tick `k`: idle or training, with counters growing.
fn sample(gpu: &str, host: &str, k: i64, busy: bool, job: Option<&str>) -> Sample {
    let (util, power, temp, clock) = if busy {
        (97.0, 640.0, 72.0, 1980.0)
    } else {
        (0.0, 75.0, 33.0, 345.0)
    };
    let wobble = ((k * 7 + gpu.len() as i64) % 5) as f64;
    let mut s = Sample::new(gpu, T0 + k * STEP)
        .with(Field::GpuUtil, util)
        .with(Field::PowerUsage, power + wobble)
        .with(Field::PowerLimit, 700.0)
        .with(Field::GpuTemp, temp + wobble * 0.3)
        .with(Field::MemoryTemp, temp + 5.0)
        .with(Field::SmClock, clock)
        .with(Field::FbUsed, if busy { 70_000.0 } else { 500.0 })
        .with(Field::FbFree, if busy { 11_000.0 } else { 80_500.0 })
        .with(Field::EccSbeVolTotal, (k / 10) as f64)
        .with(Field::TotalEnergy, 1e9 + (k as f64) * 30_000.0 * power)
        .with(Field::XidErrors, 0.0);
    s.topo = topo(host, job);
    s
}

fn engine() -> FeatureEngine {
    FeatureEngine::new(FeatureConfig::default()).expect("default config is valid")
}

fn run(e: &mut FeatureEngine, samples: &[Sample]) -> (Vec<FeatureRow>, Vec<FeatureEvent>) {
    let (mut rows, mut events, mut rejected) = (Vec::new(), Vec::new(), Vec::new());
    e.process_batch(samples, &mut rows, &mut events, &mut rejected);
    assert!(rejected.is_empty(), "{rejected:?}");
    (rows, events)
}

fn fleet(ticks: std::ops::Range<i64>, busy_from: i64) -> Vec<Sample> {
    let mut out = Vec::new();
    for k in ticks {
        for g in 0..8 {
            let gpu = format!("GPU-{g}");
            let busy = k >= busy_from;
            out.push(sample(&gpu, "h1", k, busy, busy.then_some("train-llm-1")));
        }
    }
    out
}

#[test]
fn duplicates_reorders_late_and_future_samples() {
    let mut e = engine();
    let (mut rows, mut ev) = (Vec::new(), Vec::new());
    let s = |k: i64| sample("GPU-a", "h1", k, false, None);
    assert_eq!(e.process(&s(0), &mut rows, &mut ev), Ok(Disposition::Row));
    assert_eq!(e.process(&s(1), &mut rows, &mut ev), Ok(Disposition::Row));
    assert_eq!(
        e.process(&s(1), &mut rows, &mut ev),
        Ok(Disposition::Duplicate)
    );
    let mut reordered = s(1);
    reordered.ts_ms -= 2_000;
    assert_eq!(
        e.process(&reordered, &mut rows, &mut ev),
        Ok(Disposition::Absorbed)
    );
    let mut late = s(1);
    late.ts_ms -= 20_000;
    let err = e.process(&late, &mut rows, &mut ev).expect_err("late");
    assert_eq!(err.reason(), "late");
    let mut future = s(2);
    future.ts_ms += 3_600_000;
    let err = e
        .process(&future, &mut rows, &mut ev)
        .expect_err("bad clock");
    assert_eq!(err.reason(), "ahead_of_watermark");
    assert_eq!(rows.len(), 2);
    let c = e.counters();
    assert_eq!(
        (c.rows, c.duplicates, c.absorbed, c.late, c.ahead),
        (2, 1, 1, 1, 1)
    );
}

#[test]
fn counter_reset_is_an_event_not_a_negative_rate() {
    let mut e = engine();
    let mut stream: Vec<Sample> = (0..20)
        .map(|k| sample("GPU-a", "h1", k, false, None))
        .collect();
    for s in &mut stream[..10] {
        let sbe = s.metrics.get(Field::EccSbeVolTotal).unwrap_or(0.0);
        s.metrics.set(Field::EccSbeVolTotal, sbe + 5.0);
    }
    for s in &mut stream[10..] {
        let energy = s.metrics.get(Field::TotalEnergy).unwrap_or(0.0);
        s.metrics.set(Field::TotalEnergy, energy - 1e9);
    }
    let (rows, events) = run(&mut e, &stream);
    let resets: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            FeatureEvent::CounterReset { field, ts_ms, .. } => Some((*field, *ts_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(
        resets,
        vec![
            (Field::EccSbeVolTotal, T0 + 10 * STEP),
            (Field::TotalEnergy, T0 + 10 * STEP)
        ]
    );
    for r in &rows {
        for c in [Col::EccSbeRate, Col::EnergyPowerW, Col::EccSbeDelta] {
            assert!(r.get(c).is_nan() || r.get(c) >= 0.0, "{c:?} {}", r.get(c));
        }
        assert!(r.get(Col::EnergyPowerW).is_nan() || r.get(Col::EnergyPowerW) < 100.0);
    }
    assert!(rows[10].get(Col::EnergyPowerW).is_nan());
    assert_eq!(rows[10].get(Col::CounterResets1h), 1.0);
}

#[test]
fn the_aggregate_ecc_count_stands_in_for_a_missing_volatile_one() {
    // A counters list with DCGM_FI_DEV_ECC_*_AGG_TOTAL only: the ECC
    // columns (the rules' and change tests' input) follow the aggregate.
    let mut e = engine();
    let stream: Vec<Sample> = (0..6)
        .map(|k| {
            let mut s = sample("GPU-a", "h1", k, false, None);
            s.metrics.clear(Field::EccSbeVolTotal);
            s.metrics.clear(Field::EccDbeVolTotal);
            s.metrics.set(Field::EccSbeAggTotal, 100.0 + 2.0 * k as f64);
            s.metrics
                .set(Field::EccDbeAggTotal, if k < 5 { 3.0 } else { 4.0 });
            s
        })
        .collect();
    let (rows, _) = run(&mut e, &stream);
    assert!(rows[0].get(Col::EccSbeDelta).is_nan());
    assert_eq!(rows[3].get(Col::EccSbeDelta), 2.0);
    assert_eq!(rows[3].get(Col::EccSbeRate), 240.0);
    assert_eq!(rows[4].get(Col::EccDbeDelta), 0.0);
    assert_eq!(rows[5].get(Col::EccDbeDelta), 1.0, "a new double-bit error");
    // With both, the volatile count is the one read.
    let mut both = engine();
    let s: Vec<Sample> = (0..3)
        .map(|k| {
            let mut s = sample("GPU-b", "h1", k, false, None);
            s.metrics
                .set(Field::EccSbeAggTotal, 1000.0 + 50.0 * k as f64);
            s
        })
        .collect();
    let (rows, _) = run(&mut both, &s);
    assert!(rows[2].get(Col::EccSbeDelta) < 50.0);
}

#[test]
fn silence_gives_silent_then_gap_events() {
    let mut e = engine();
    let mut stream = Vec::new();
    for k in 0..20 {
        stream.push(sample("GPU-b", "h1", k, false, None));
        if !(5..12).contains(&k) {
            stream.push(sample("GPU-a", "h1", k, false, None));
        }
    }
    let (_, events) = run(&mut e, &stream);
    let silent = events
        .iter()
        .filter(|e| matches!(e, FeatureEvent::Silent { gpu, .. } if &**gpu == "GPU-a"))
        .count();
    assert_eq!(silent, 1);
    assert!(events.iter().any(|e| matches!(e,
        FeatureEvent::Gap { gpu, from_ms, to_ms }
            if &**gpu == "GPU-a" && *from_ms == T0 + 4 * STEP && *to_ms == T0 + 12 * STEP)));
}

#[test]
fn xids_are_classified_and_attributed() {
    let mut e = engine();
    let mut stream = Vec::new();
    for k in 0..40 {
        for g in 0..8 {
            let mut s = sample(&format!("GPU-{g}"), "h1", k, true, Some("train-llm-1"));
            // Tick 10: the whole job crashes with XID 13. Tick 25: GPU-3
            // alone shows XID 31. Tick 30: GPU-5 shows XID 79.
            let xid = match (k, g) {
                (10..=24, _) => 13.0,
                (25.., 3) => 31.0,
                (30.., 5) => 79.0,
                _ => 0.0,
            };
            s.metrics.set(Field::XidErrors, xid);
            stream.push(s);
        }
    }
    let (rows, events) = run(&mut e, &stream);
    let xids: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            FeatureEvent::Xid { xid, class, .. } => Some((*xid, *class)),
            _ => None,
        })
        .collect();
    assert_eq!(xids.len(), 10);
    assert_eq!(xids[8], (31, XidClass::Application));
    assert_eq!(xids[9], (79, XidClass::Hardware));
    let blames: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            FeatureEvent::XidAttributed {
                gpu, xid, blame, ..
            } => Some((gpu.clone(), *xid, *blame)),
            _ => None,
        })
        .collect();
    assert_eq!(blames.iter().filter(|b| b.2 == XidBlame::Job).count(), 8);
    assert_eq!(
        blames.last(),
        Some(&(Arc::from("GPU-3"), 31, XidBlame::Gpu))
    );
    let last3 = rows
        .iter()
        .rev()
        .find(|r| &*r.gpu == "GPU-3")
        .expect("GPU-3 rows");
    assert!(last3.get(Col::XidAppSolo1h) > 0.5);
    let last5 = rows
        .iter()
        .rev()
        .find(|r| &*r.gpu == "GPU-5")
        .expect("GPU-5 rows");
    assert!(last5.get(Col::XidHw1h) > 0.5 && last5.get(Col::XidAppSolo1h) == 0.0);
}

#[test]
fn phase_changes_and_peer_z_scores_are_workload_aware() {
    let mut e = engine();
    let mut stream = fleet(0..120, 60);
    // GPU-7 runs 10 °C hot for the whole run.
    for s in stream.iter_mut().filter(|s| &*s.gpu == "GPU-7") {
        let t = s.metrics.get(Field::GpuTemp).unwrap_or(0.0);
        s.metrics.set(Field::GpuTemp, t + 10.0);
    }
    let (rows, events) = run(&mut e, &stream);
    let changes = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                FeatureEvent::PhaseChange {
                    to: Phase::Training,
                    ..
                }
            )
        })
        .count();
    assert_eq!(changes, 8);
    let late: Vec<_> = rows.iter().filter(|r| r.ts_ms >= T0 + 100 * STEP).collect();
    for r in &late {
        assert_eq!(r.phase, Phase::Training);
        assert_eq!(r.get(Col::PeerLevel), 0.0, "job cohort");
        let z = r.get(Col::GpuTempPeerZ);
        if &*r.gpu == "GPU-7" {
            assert!(z > 4.0, "hot GPU z {z}");
        } else {
            assert!(z.abs() < 3.0, "{} z {z}", r.gpu);
        }
        assert!(r.get(Col::PhaseAgeS) >= 40.0 * 30.0 - 60.0);
    }
}

#[test]
fn singleton_gpu_gets_nan_peers_not_errors() {
    let mut e = engine();
    let stream: Vec<Sample> = (0..30)
        .map(|k| sample("GPU-solo", "h9", k, true, None))
        .collect();
    let (rows, _) = run(&mut e, &stream);
    assert_eq!(rows.len(), 30);
    assert!(rows.iter().all(|r| r.get(Col::GpuTempPeerZ).is_nan()));
    assert!(rows.iter().all(|r| r.get(Col::PeerLevel).is_nan()));
}

#[test]
fn snapshot_restore_continue_gives_identical_rows() {
    let stream = fleet(0..120, 40);
    let (head, tail) = stream.split_at(stream.len() / 2);
    let mut a = engine();
    run(&mut a, head);
    let mut bytes = Vec::new();
    ciborium::into_writer(&a, &mut bytes).expect("serialize");
    let mut b: FeatureEngine = ciborium::from_reader(bytes.as_slice()).expect("deserialize");
    let (ra, ea) = run(&mut a, tail);
    let (rb, eb) = run(&mut b, tail);
    assert_eq!(ra.len(), rb.len());
    assert!(ra.iter().zip(&rb).all(|(x, y)| x.same_bits(y)));
    assert_eq!(ea, eb);
}

#[test]
fn heap_estimate_is_per_gpu_small() {
    let mut e = engine();
    run(&mut e, &fleet(0..10, 5));
    let per_gpu = e.approx_heap_bytes() / e.gpu_count();
    assert!(per_gpu < 4096, "{per_gpu} bytes per GPU");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Feature state after any interleaving of duplicates equals the state
    /// without them: same rows, same per-GPU state, same rows afterwards.
    #[test]
    fn duplicates_never_change_state(
        dups in proptest::collection::vec((0usize..160, 0usize..6), 0..40),
    ) {
        let clean = fleet(0..20, 10);
        let mut dirty: Vec<Sample> = Vec::new();
        for (i, s) in clean.iter().enumerate() {
            dirty.push(s.clone());
            // Re-send a sample seen up to a few positions earlier.
            for (at, back) in &dups {
                if *at == i {
                    dirty.push(clean[i.saturating_sub(*back)].clone());
                }
            }
        }
        let (mut a, mut b) = (engine(), engine());
        let (ra, _) = run(&mut a, &clean);
        let (rb, _) = run(&mut b, &dirty);
        prop_assert_eq!(ra.len(), rb.len());
        prop_assert!(ra.iter().zip(&rb).all(|(x, y)| x.same_bits(y)));
        for g in 0..8 {
            let id = format!("GPU-{g}");
            let (sa, sb) = (a.gpu_state(&id), b.gpu_state(&id));
            let mut ba = Vec::new();
            let mut bb = Vec::new();
            ciborium::into_writer(&sa, &mut ba).expect("serialize");
            ciborium::into_writer(&sb, &mut bb).expect("serialize");
            prop_assert_eq!(ba, bb);
        }
        let next = fleet(20..30, 10);
        let (ra, _) = run(&mut a, &next);
        let (rb, _) = run(&mut b, &next);
        prop_assert!(ra.iter().zip(&rb).all(|(x, y)| x.same_bits(y)));
    }
}
