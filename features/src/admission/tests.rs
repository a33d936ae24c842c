use super::*;

const T0: i64 = 1_780_000_000_000;
const STEP: i64 = 30_000;

fn tick(gpus: usize, ts: i64) -> Vec<Sample> {
    (0..gpus)
        .map(|i| Sample::new(format!("GPU-{i:04}"), ts))
        .collect()
}

fn run_fleet(adm: &mut Admission, gpus: usize, ticks: i64) -> Vec<Admitted> {
    (0..ticks)
        .map(|t| adm.admit(tick(gpus, T0 + t * STEP), None))
        .collect()
}

#[test]
fn a_clean_fleet_passes_untouched_and_the_clock_follows_it() {
    let mut adm = Admission::new(AdmissionConfig::default());
    let mut passed = Vec::new();
    for t in 0..10 {
        let out = adm.admit(tick(16, T0 + t * STEP), None);
        // Two ticks held on probation, released with the third, in order.
        let expect = match t {
            0 | 1 => 0,
            2 => 48,
            _ => 16,
        };
        assert_eq!(out.samples.len(), expect, "tick {t}");
        assert!(out.refused.is_empty() && out.evicted.is_empty());
        assert_eq!(adm.clock_ms(), Some(T0 + t * STEP));
        passed.extend(out.samples);
    }
    let mut sorted = passed.clone();
    sorted.sort_by_key(|s| s.ts_ms);
    for gpu in ["GPU-0000", "GPU-0015"] {
        let ts = |v: &[Sample]| {
            v.iter()
                .filter(|s| &*s.gpu == gpu)
                .map(|s| s.ts_ms)
                .collect::<Vec<_>>()
        };
        assert_eq!(ts(&passed), ts(&sorted), "{gpu}'s samples keep their order");
        assert_eq!(ts(&passed).len(), 10);
    }
}

#[test]
fn one_gpu_cannot_move_the_clock_and_a_runaway_is_quarantined() {
    let mut adm = Admission::new(AdmissionConfig::default());
    run_fleet(&mut adm, 16, 5);
    let now = T0 + 4 * STEP;
    // A ratchet: +500 s per sample, each step inside the skew.
    let mut quarantined = false;
    for k in 1..=20 {
        let mut batch = tick(16, now + k * STEP);
        batch.push(Sample::new("GPU-0003", now + k * 500_000));
        batch.retain(|s| !(s.gpu.as_ref() == "GPU-0003" && s.ts_ms == now + k * STEP));
        let out = adm.admit(batch, None);
        assert_eq!(adm.clock_ms(), Some(now + k * STEP), "step {k}");
        quarantined |= out
            .evicted
            .iter()
            .any(|(g, e)| g.as_ref() == "GPU-0003" && *e == Eviction::Quarantined);
    }
    assert!(quarantined);
    assert_eq!(adm.counters().quarantined, 1);
}

#[test]
fn extreme_timestamps_are_refused_with_their_reason() {
    let mut adm = Admission::new(AdmissionConfig::default());
    run_fleet(&mut adm, 8, 3);
    let now = T0 + 3 * STEP;
    let mut batch = tick(8, now);
    for ts in [i64::MAX, i64::MIN, -1, 253_402_300_799_999] {
        batch.push(Sample::new("GPU-evil", ts));
    }
    batch.push(Sample::new("GPU-2100", 4_102_444_800_000));
    batch.push(Sample::new("GPU-1970", 1_000));
    let out = adm.admit(batch, None);
    let reasons: Vec<_> = out.refused.iter().map(|(_, r)| r.reason()).collect();
    assert_eq!(
        reasons,
        [
            "implausible_timestamp",
            "implausible_timestamp",
            "implausible_timestamp",
            "implausible_timestamp",
            "ahead_of_fleet",
            "stale_first_sample"
        ]
    );
    assert_eq!(out.samples.len(), 8);
    assert_eq!(adm.clock_ms(), Some(now));
}

#[test]
fn a_lone_liar_first_does_not_hold_the_clock() {
    let mut adm = Admission::new(AdmissionConfig::default());
    // Year 2100 as the very first sample: nothing to compare it with.
    let out = adm.admit(vec![Sample::new("GPU-2100", 4_102_444_800_000)], None);
    // The fleet arrives: it outnumbers the liar, the clock is the fleet's
    // and the liar is quarantined.
    assert!(out.samples.is_empty(), "held on probation");
    let out = adm.admit(tick(8, T0), None);
    assert_eq!(adm.clock_ms(), Some(T0));
    assert!(out.evicted.is_empty());
    assert_eq!(out.unconfirmed.len(), 1);
    assert_eq!(out.unconfirmed[0].1, Eviction::Quarantined);
    for t in 1..5 {
        let out = adm.admit(tick(8, T0 + t * STEP), None);
        assert!(out.samples.iter().all(|s| s.ts_ms < 4_000_000_000_000));
    }
    assert_eq!(adm.clock_ms(), Some(T0 + 4 * STEP));
}

#[test]
fn live_input_is_judged_against_the_wall_clock() {
    let mut adm = Admission::new(AdmissionConfig::default());
    let wall = T0;
    let out = adm.admit(
        vec![
            Sample::new("GPU-a", wall + 60_000),
            Sample::new("GPU-b", wall + 3_600_000),
        ],
        Some(wall),
    );
    assert_eq!(out.refused.len(), 1);
    assert_eq!(out.refused[0].1.reason(), "ahead_of_wall_clock");
}

#[test]
fn a_flood_of_one_sample_ids_stays_within_the_limit_and_spares_the_fleet() {
    let cfg = AdmissionConfig {
        max_gpus: 1_000,
        ..AdmissionConfig::default()
    };
    let mut adm = Admission::new(cfg);
    run_fleet(&mut adm, 64, 5);
    let now = T0 + 5 * STEP;
    let mut displaced = 0;
    for chunk in 0..50 {
        let mut batch = tick(64, now + chunk * 1_000);
        batch.extend((0..1_000).map(|i| Sample::new(format!("FLOOD-{chunk}-{i}"), now)));
        let out = adm.admit(batch, None);
        assert!(adm.gpu_count() <= 1_000);
        assert!(out.evicted.is_empty(), "only GPUs on probation go");
        for (s, e) in &out.unconfirmed {
            assert!(s.gpu.starts_with("FLOOD-"), "{} dropped ({e:?})", s.gpu);
            displaced += 1;
        }
        assert!(
            out.samples.iter().all(|s| s.gpu.starts_with("GPU-")),
            "no flood sample passes"
        );
        // Every real GPU sample passes.
        assert_eq!(
            out.samples
                .iter()
                .filter(|s| s.gpu.starts_with("GPU-"))
                .count(),
            64
        );
    }
    assert!(displaced > 40_000);
}

#[test]
fn probation_gpus_that_go_quiet_are_forgotten_established_ones_after_the_ttl() {
    let cfg = AdmissionConfig {
        gpu_ttl_ms: 3_600_000,
        ..AdmissionConfig::default()
    };
    let mut adm = Admission::new(cfg);
    run_fleet(&mut adm, 8, 5);
    let now = T0 + 5 * STEP;
    adm.admit(vec![Sample::new("GPU-once", now)], None);
    let mut quiet = Vec::new();
    let mut once = None;
    for t in 1..=300 {
        let out = adm.admit(tick(4, now + t * STEP), None);
        quiet.extend(out.evicted);
        if let Some((s, e)) = out.unconfirmed.first() {
            once = Some((s.gpu.to_string(), *e, t));
        }
    }
    // Quiet for more than the 2-min silence: forgotten once half the
    // fleet's silence no longer holds the clock back (a few rounds).
    let (gpu, why, t) = once.expect("GPU-once forgotten");
    assert_eq!((gpu.as_str(), why), ("GPU-once", Eviction::Quiet));
    assert!(t <= 12, "forgotten at tick {t}");
    let names: Vec<_> = quiet.iter().map(|(g, _)| g.to_string()).collect();
    assert!(names.contains(&"GPU-0007".to_string()));
    assert!(!names.contains(&"GPU-0000".to_string()));
}

#[test]
fn restored_gpus_are_established_and_set_the_clock() {
    let mut adm = Admission::new(AdmissionConfig::default());
    adm.restore((0..5).map(|i| (GpuId::from(format!("GPU-{i:04}")), T0 + i64::from(i))));
    assert_eq!(adm.clock_ms(), Some(T0 + 2));
    let out = adm.admit(vec![Sample::new("GPU-0001", T0 + 86_400_000)], None);
    assert_eq!(out.refused[0].1.reason(), "ahead_of_fleet");
}

#[test]
fn one_batch_spanning_hours_of_history_is_judged_as_it_goes() {
    let mut adm = Admission::new(AdmissionConfig::default());
    // 4,096 samples of a 64-GPU fleet at 60 s: 64 minutes in one batch.
    let batch: Vec<Sample> = (0..64).flat_map(|t| tick(64, T0 + t * 60_000)).collect();
    let out = adm.admit(batch, None);
    assert!(out.refused.is_empty(), "{:?}", out.refused.first());
    assert_eq!(out.samples.len(), 64 * 64);
    assert_eq!(adm.clock_ms(), Some(T0 + 63 * 60_000));
}

#[test]
fn released_gpus_leave_without_an_eviction_and_come_back_established() {
    let mut adm = Admission::new(AdmissionConfig::default());
    run_fleet(&mut adm, 4, 5);
    // A fifth GPU still on probation: its held sample goes with it.
    let out = adm.admit(vec![Sample::new("GPU-new", T0 + 5 * STEP)], None);
    assert!(out.samples.is_empty(), "held on probation");
    assert_eq!(adm.gpu_count(), 5);
    let gone: Vec<GpuId> = ["GPU-0001", "GPU-new", "GPU-none"]
        .into_iter()
        .map(GpuId::from)
        .collect();
    assert_eq!(adm.release(&gone), 2, "two were tracked");
    assert_eq!(adm.gpu_count(), 3);
    // Nothing is reported for them later, however long they stay away.
    for t in 6..200 {
        let out = adm.admit(tick(1, T0 + t * STEP), None);
        assert!(
            out.evicted.iter().all(|(g, _)| &**g != "GPU-0001")
                && out.unconfirmed.iter().all(|(s, _)| &*s.gpu != "GPU-new"),
            "tick {t}"
        );
    }
    // Taken back (a partition assigned again): established at once, once.
    let mut adm = Admission::new(AdmissionConfig::default());
    run_fleet(&mut adm, 4, 5);
    adm.restore([(GpuId::from("GPU-0001"), T0 + 4 * STEP)]);
    adm.restore([(GpuId::from("GPU-0001"), T0 + 4 * STEP)]);
    assert_eq!(adm.established, 4, "restoring a tracked GPU counts it once");
    let out = adm.admit(vec![Sample::new("GPU-0001", T0 + 5 * STEP)], None);
    assert_eq!(out.samples.len(), 1, "no probation");
}
