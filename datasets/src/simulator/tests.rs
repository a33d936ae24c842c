//! Simulator tests: determinism, the benign look-alikes are present in the
//! telemetry (driver reloads, app XIDs, maintenance gaps, checkpoint dips,
//! daily cycles), dirty data, replacements. Failure modes are checked in
//! `tests_failures.rs`. Runs are small (tens of GPUs, ≤ 1 day) to keep the
//! suite fast in the dev profile.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use features::{Field, Sample};

use super::*;

/// Runs `cfg` to the end and returns the simulator and every sample.
pub(super) fn run(cfg: SimConfig) -> (Simulator, Vec<Sample>) {
    let mut sim = Simulator::new(cfg).expect("valid config");
    let mut all = Vec::new();
    let mut batch = Vec::new();
    while sim.next_tick(&mut batch).is_some() {
        all.append(&mut batch);
    }
    (sim, all)
}

/// Samples of one GPU, in emission order.
pub(super) fn series<'a>(samples: &'a [Sample], gpu: &str) -> Vec<&'a Sample> {
    samples.iter().filter(|s| &*s.gpu == gpu).collect()
}

/// Samples by (gpu, ts).
pub(super) fn index(samples: &[Sample]) -> HashMap<(Arc<str>, i64), &Sample> {
    samples
        .iter()
        .map(|s| ((s.gpu.clone(), s.ts_ms), s))
        .collect()
}

/// Samples grouped by tick.
pub(super) fn by_tick(samples: &[Sample]) -> BTreeMap<i64, Vec<&Sample>> {
    let mut m: BTreeMap<i64, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        m.entry(s.ts_ms).or_default().push(s);
    }
    m
}

/// The samples of `job` at tick `ts`.
pub(super) fn job_at<'a>(
    ticks: &BTreeMap<i64, Vec<&'a Sample>>,
    ts: i64,
    job: &str,
) -> Vec<&'a Sample> {
    ticks
        .get(&ts)
        .map(|v| {
            v.iter()
                .copied()
                .filter(|s| s.topo.job.as_deref() == Some(job))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn get(s: &Sample, f: Field) -> f64 {
    s.metrics.get(f).unwrap_or(f64::NAN)
}

pub(super) fn small(scenario: Scenario, gpus: usize, hours: f64) -> SimConfig {
    SimConfig {
        gpus,
        hours,
        interval_s: 60,
        scenario,
        ..SimConfig::default()
    }
}

#[test]
fn same_seed_same_samples_different_seed_differs() {
    let cfg = SimConfig {
        gpus: 48,
        hours: 6.0,
        dirty: true,
        ..SimConfig::default()
    };
    let (mut a, sa) = run(cfg.clone());
    let (mut b, sb) = run(cfg.clone());
    assert_eq!(sa.len(), sb.len());
    assert!(sa == sb, "same seed must give identical samples");
    assert_eq!(a.labels(), b.labels());
    assert_eq!(a.events(), b.events());
    assert_eq!(a.gpus(), b.gpus());
    assert_eq!(a.malformed(), b.malformed());
    let (c, sc) = run(SimConfig {
        seed: cfg.seed + 1,
        ..cfg
    });
    assert_ne!(a.gpus()[0].uuid, c.gpus()[0].uuid);
    assert!(sa != sc);
}

#[test]
fn every_gpu_reports_every_tick_when_clean_and_quiet() {
    let (sim, samples) = run(small(Scenario::Quiet, 20, 3.0));
    assert!(sim.labels().is_empty());
    let in_maintenance = sim
        .events()
        .iter()
        .any(|e| matches!(e.kind, SimEventKind::Maintenance { .. }));
    if !in_maintenance {
        assert_eq!(samples.len() as u64, 20 * sim.ticks());
    }
    let s = &samples[0];
    assert_eq!(s.ts_ms, DEFAULT_START_MS);
    assert!(s.gpu.starts_with("GPU-"));
    assert_eq!(s.topo.host.as_deref(), Some("node-0001"));
    assert_eq!(s.topo.rack.as_deref(), Some("r01"));
    assert_eq!(s.topo.cluster.as_deref(), Some("east-1"));
    assert_eq!(s.topo.model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    for f in [
        Field::GpuTemp,
        Field::PowerUsage,
        Field::SmClock,
        Field::TotalEnergy,
        Field::XidErrors,
    ] {
        assert!(s.metrics.has(f), "{f} missing");
    }
    // Every value passes the decoder's plausibility checks.
    for s in &samples {
        for (f, v) in s.metrics.iter() {
            assert!(features::decode::validate(0, f, v).is_ok(), "{f} = {v}");
        }
    }
    // Counters never go down without a reload in a quiet run w/o reloads on host 1.
    let reloads: Vec<i64> = sim
        .events()
        .iter()
        .filter(
            |e| matches!(&e.kind, SimEventKind::DriverReload { host } if &**host == "node-0001"),
        )
        .map(|e| e.ts_ms)
        .collect();
    let g0 = series(&samples, &sim.gpus()[0].uuid);
    for w in g0.windows(2) {
        if !reloads.contains(&w[1].ts_ms) {
            assert!(get(w[1], Field::TotalEnergy) > get(w[0], Field::TotalEnergy));
        }
    }
}

#[test]
fn driver_reloads_reset_volatile_counters() {
    let (sim, samples) = run(small(Scenario::DriverReloadWave, 32, 12.0));
    let idx = index(&samples);
    let mut checked = 0;
    for e in sim.events() {
        let SimEventKind::DriverReload { host } = &e.kind else {
            continue;
        };
        for g in sim.gpus().iter().filter(|g| g.host == *host) {
            let (Some(now), Some(before)) = (
                idx.get(&(g.uuid.clone(), e.ts_ms)),
                idx.get(&(g.uuid.clone(), e.ts_ms - 60_000)),
            ) else {
                continue;
            };
            assert!(get(now, Field::TotalEnergy) < get(before, Field::TotalEnergy));
            assert!(get(now, Field::TotalEnergy) < 700.0 * 60.0 * 1_000.0 * 1.01);
            assert!(get(now, Field::EccSbeVolTotal) <= 1.0);
            assert!(
                get(now, Field::EccSbeAggTotal) >= get(before, Field::EccSbeAggTotal),
                "aggregate persists"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 32,
        "the wave reloads every host; checked {checked}"
    );
}

#[test]
fn app_xids_hit_every_gpu_of_a_job_at_one_tick() {
    let (sim, samples) = run(small(Scenario::AppXidStorm, 256, 8.0));
    assert!(sim.labels().is_empty());
    let ticks = by_tick(&samples);
    let mut first: BTreeMap<Arc<str>, (i64, u32)> = BTreeMap::new();
    for e in sim.events() {
        if let SimEventKind::AppXid { job, xid, .. } = &e.kind {
            first.entry(job.clone()).or_insert((e.ts_ms, *xid));
        }
    }
    for (job, (ts, xid)) in &first {
        assert!([13, 31, 43, 45].contains(xid));
        let at = job_at(&ticks, *ts, job);
        assert!(
            at.len() >= 8,
            "job {job}: {} GPUs at the XID tick",
            at.len()
        );
        assert!(
            at.iter()
                .all(|s| get(s, Field::XidErrors) == f64::from(*xid))
        );
        let before = job_at(&ticks, ts - 60_000, job);
        assert!(
            before
                .iter()
                .all(|s| get(s, Field::XidErrors) != f64::from(*xid))
        );
        // The job restarts: engines idle right after the crash.
        let after = job_at(&ticks, ts + 60_000, job);
        assert!(after.iter().all(|s| get(s, Field::GpuUtil) == 0.0));
    }
    assert!(first.len() >= 5, "{} jobs with app XIDs", first.len());
}

#[test]
fn maintenance_is_a_host_gap_and_checkpoints_dip() {
    // A larger fleet at a coarse interval, so that some host goes into
    // maintenance within the day.
    let (sim, samples) = run(SimConfig {
        gpus: 512,
        hours: 24.0,
        interval_s: 300,
        ..small(Scenario::Quiet, 0, 0.0)
    });
    let ticks = by_tick(&samples);
    let mut gaps = 0;
    for e in sim.events() {
        let SimEventKind::Maintenance { host, end_ms } = &e.kind else {
            continue;
        };
        let on_host = |ts: i64| {
            ticks.get(&ts).map_or(0, |v| {
                v.iter()
                    .filter(|s| s.topo.host.as_ref() == Some(host))
                    .count()
            })
        };
        let mut t = e.ts_ms;
        while t < *end_ms {
            assert_eq!(on_host(t), 0, "{host} reported during maintenance");
            t += 300_000;
        }
        if e.ts_ms > DEFAULT_START_MS {
            assert_eq!(
                on_host(e.ts_ms - 300_000),
                8,
                "{host} reported before maintenance"
            );
        }
        if ticks.contains_key(end_ms) {
            assert_eq!(on_host(*end_ms), 8, "{host} reports after maintenance");
        }
        gaps += 1;
    }
    assert!(gaps >= 1, "no maintenance in a 64-host day");

    let mut dips = 0;
    let mut total = 0;
    for e in sim.events() {
        let SimEventKind::Checkpoint { job, .. } = &e.kind else {
            continue;
        };
        let during = job_at(&ticks, e.ts_ms, job);
        if during.is_empty() {
            continue;
        }
        total += 1;
        let low = during
            .iter()
            .filter(|s| get(s, Field::GpuUtil) < 20.0)
            .count();
        let power = during
            .iter()
            .map(|s| get(s, Field::PowerUsage))
            .sum::<f64>()
            / during.len() as f64;
        if low == during.len() && power < 250.0 {
            dips += 1;
        }
    }
    assert!(total >= 20, "{total} checkpoints sampled");
    assert!(
        dips * 10 >= total * 9,
        "{dips}/{total} checkpoints show a synchronized dip"
    );
}

#[test]
fn idle_training_and_inference_look_different() {
    let (sim, samples) = run(small(Scenario::Quiet, 128, 24.0));
    let idle: Vec<&Sample> = samples.iter().filter(|s| s.topo.job.is_none()).collect();
    let train: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.topo
                .job
                .as_deref()
                .is_some_and(|j| j.starts_with("train-"))
                && get(s, Field::GpuUtil) > 90.0
        })
        .collect();
    assert!(!idle.is_empty() && !train.is_empty());
    let mean = |v: &[&Sample], f: Field| v.iter().map(|s| get(s, f)).sum::<f64>() / v.len() as f64;
    assert!(mean(&idle, Field::GpuUtil) == 0.0);
    assert!(mean(&idle, Field::PowerUsage) < 90.0);
    assert!(mean(&train, Field::PowerUsage) > 350.0);
    assert!(mean(&train, Field::GpuTemp) > mean(&idle, Field::GpuTemp) + 15.0);
    assert!(
        sim.events()
            .iter()
            .any(|e| matches!(e.kind, SimEventKind::JobStart { .. }))
    );
    // Inference follows the time of day: busier in the afternoon than at night.
    let infer = |h0: i64, h1: i64| {
        let v: Vec<&Sample> = samples
            .iter()
            .filter(|s| {
                let h = s.ts_ms.rem_euclid(86_400_000) / 3_600_000;
                s.topo
                    .job
                    .as_deref()
                    .is_some_and(|j| j.starts_with("infer-"))
                    && h >= h0
                    && h < h1
            })
            .collect();
        mean(&v, Field::GpuUtil)
    };
    assert!(
        infer(15, 19) > infer(2, 6) + 25.0,
        "day {} night {}",
        infer(15, 19),
        infer(2, 6)
    );
    // Every SKU appears with its own figures.
    let a100 = samples
        .iter()
        .find(|s| s.topo.model.as_deref() == Some("NVIDIA A100-SXM4-80GB"));
    if let Some(s) = a100 {
        assert_eq!(get(s, Field::PowerLimit), 400.0);
    }
}

#[test]
fn opaque_job_names_say_nothing_of_the_workload() {
    // Same fleet and jobs, labels like Slurm job ids: one `job-…` per
    // named job, none of them with a hint the feature stage would read.
    let named = run(small(Scenario::Quiet, 64, 6.0)).1;
    let opaque = run(SimConfig {
        opaque_job_names: true,
        ..small(Scenario::Quiet, 64, 6.0)
    })
    .1;
    assert_eq!(named.len(), opaque.len());
    let mut map: HashMap<&str, &str> = HashMap::new();
    for (a, b) in named.iter().zip(&opaque) {
        assert_eq!(a.topo.job.is_some(), b.topo.job.is_some());
        if let (Some(a), Some(b)) = (a.topo.job.as_deref(), b.topo.job.as_deref()) {
            assert!(b.starts_with("job-"), "{b}");
            assert_eq!(
                features::phase::JobHint::from_job(Some(b)),
                features::phase::JobHint::None,
                "{b}"
            );
            assert_eq!(*map.entry(a).or_insert(b), b, "one name per job");
        }
    }
    assert!(map.len() >= 2, "{map:?}");
}

#[test]
fn dirty_runs_drop_duplicate_reorder_and_corrupt() {
    let cfg = SimConfig {
        gpus: 64,
        hours: 12.0,
        ..small(Scenario::Quiet, 0, 0.0)
    };
    let (_, clean) = run(cfg.clone());
    let mut sim = Simulator::new(SimConfig { dirty: true, ..cfg }).expect("valid");
    let mut dirty = Vec::new();
    let mut malformed = Vec::new();
    let mut batch = Vec::new();
    while sim.next_tick(&mut batch).is_some() {
        dirty.append(&mut batch);
        malformed.extend(sim.malformed());
    }
    let clean_idx = index(&clean);
    for s in &dirty {
        assert_eq!(
            clean_idx.get(&(s.gpu.clone(), s.ts_ms)),
            Some(&s),
            "dirty data is clean data, rearranged"
        );
    }
    let dirty_idx = index(&dirty);
    let dropped = clean.len() - dirty_idx.len();
    let duplicates = dirty.len() - dirty_idx.len();
    let mut last: HashMap<&str, i64> = HashMap::new();
    let mut reorders = 0;
    for s in &dirty {
        let prev = last.insert(&s.gpu, s.ts_ms).unwrap_or(i64::MIN);
        if s.ts_ms < prev {
            reorders += 1;
        }
    }
    assert!(
        dropped > 0 && duplicates > 0 && reorders > 0,
        "{dropped} {duplicates} {reorders}"
    );
    assert!(!malformed.is_empty());
    for m in &malformed {
        let out = features::decode(m, 0);
        // Reported; an out-of-range value only loses its field.
        assert!(!out.errors.is_empty());
        assert!(
            out.samples
                .iter()
                .all(|x| x.metrics.get(features::Field::GpuTemp).is_none())
        );
    }
}

#[test]
fn failed_gpus_can_be_replaced() {
    let cfg = SimConfig {
        failure_rate_per_gpu_day: 0.5,
        replace_failed: true,
        ..small(Scenario::Only(FailureKind::SuddenDeath), 32, 24.0)
    };
    let (sim, samples) = run(cfg);
    let replaced: Vec<&GpuInfo> = sim.gpus().iter().filter(|g| g.replaces.is_some()).collect();
    assert!(!replaced.is_empty());
    for g in replaced {
        let from = g.active_from_ms.expect("replacements have a start");
        let s = series(&samples, &g.uuid);
        assert!(!s.is_empty() && s.iter().all(|s| s.ts_ms >= from));
        assert_eq!(s[0].topo.host.as_deref(), Some(&*g.host));
        let old = series(&samples, g.replaces.as_deref().unwrap_or_default());
        assert!(old.iter().all(|o| o.ts_ms < from));
        assert_eq!(get(s[0], Field::EccSbeAggTotal), 0.0);
    }
}

#[test]
fn config_errors_come_back_from_new() {
    let err = Simulator::new(SimConfig {
        interval_s: 0,
        ..SimConfig::default()
    })
    .err();
    assert!(matches!(
        err,
        Some(SimError::InvalidConfig {
            field: "interval_s",
            ..
        })
    ));
}
