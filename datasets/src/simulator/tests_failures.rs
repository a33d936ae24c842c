//! Failure-mode tests: for each kind, the label matches the telemetry: the
//! precursor is visible before `failure_ms` (against the fleet or the GPU's
//! peers), the failure itself shows (XID, double-bit error, silence), and
//! nothing is reported after the GPU is lost.

use features::{Field, Sample};

use super::tests::{by_tick, get, run, series, small};
use super::*;

const MIN: i64 = 60_000;
const HOUR: i64 = 3_600_000;

/// A run with only `kind`, and its first label of that kind.
fn only(kind: FailureKind, seed: u64) -> (Simulator, Vec<Sample>, FailureLabel) {
    let cfg = SimConfig {
        seed,
        ..small(Scenario::Only(kind), 64, 24.0)
    };
    let (sim, samples) = run(cfg);
    assert!(sim.labels().iter().all(|l| l.kind == kind), "only {kind}");
    let label = sim
        .labels()
        .iter()
        .find(|l| l.kind == kind)
        .cloned()
        .expect("a planted failure");
    (sim, samples, label)
}

/// Counter growth of `f` on `gpu` between `t0` and `t1`, summed over resets.
fn growth(samples: &[Sample], gpu: &str, f: Field, t0: i64, t1: i64) -> f64 {
    let s: Vec<&Sample> = series(samples, gpu)
        .into_iter()
        .filter(|s| s.ts_ms >= t0 && s.ts_ms < t1)
        .collect();
    let step = |a: f64, b: f64| if b >= a { b - a } else { b }; // a reset restarts from 0
    s.windows(2).map(|w| step(get(w[0], f), get(w[1], f))).sum()
}

/// The same counter growth for every healthy (unlabelled) GPU, sorted.
fn fleet_growth(sim: &Simulator, samples: &[Sample], f: Field, t0: i64, t1: i64) -> Vec<f64> {
    let labelled = |g: &GpuInfo| sim.labels().iter().any(|l| l.gpu.as_ref() == Some(&g.uuid));
    let mut v: Vec<f64> = sim
        .gpus()
        .iter()
        .filter(|g| !labelled(g))
        .map(|g| growth(samples, &g.uuid, f, t0, t1))
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

fn p99(v: &[f64]) -> f64 {
    v[(v.len() * 99 / 100).min(v.len() - 1)]
}

/// The hard failure: the XID at `failure_ms`, then silence.
fn assert_lost_after(samples: &[Sample], l: &FailureLabel, interval: i64, tail_ticks: i64) {
    let gpu = l.gpu.as_deref().expect("gpu label");
    let f = l.failure_ms.expect("failure time");
    let s = series(samples, gpu);
    let at = s
        .iter()
        .find(|s| s.ts_ms == f)
        .expect("a sample at the failure tick");
    assert_eq!(get(at, Field::XidErrors), f64::from(l.xid.expect("xid")));
    let last = s.last().expect("samples").ts_ms;
    assert_eq!(
        last,
        f + (tail_ticks - 1) * interval,
        "silent after the failure"
    );
}

#[test]
fn hbm_sbe_rate_rises_then_dbe_xid_48_then_lost() {
    let (sim, samples, l) = only(FailureKind::HbmEcc, 17);
    let gpu = l.gpu.as_deref().expect("gpu");
    let f = l.failure_ms.expect("failure");
    let sbe = growth(&samples, gpu, Field::EccSbeAggTotal, f - 3 * HOUR, f);
    let fleet = fleet_growth(&sim, &samples, Field::EccSbeAggTotal, f - 3 * HOUR, f);
    let median = fleet[fleet.len() / 2];
    assert!(
        sbe > 50.0 && sbe > 20.0 * p99(&fleet).max(1.0),
        "sbe {sbe} vs fleet median {median} p99 {}",
        p99(&fleet)
    );
    // The rate rises: the last 3 h hold far more than 3 h half a day earlier.
    let earlier = growth(
        &samples,
        gpu,
        Field::EccSbeAggTotal,
        f - 13 * HOUR,
        f - 10 * HOUR,
    );
    assert!(sbe > 2.0 * earlier, "{sbe} vs {earlier}");
    let s = series(&samples, gpu);
    let before: Vec<&&Sample> = s.iter().filter(|s| s.ts_ms < f).collect();
    let rows = before
        .last()
        .map(|s| get(s, Field::CorrectableRemappedRows))
        .unwrap_or(0.0);
    assert!(
        rows >= 1.0,
        "correctable remapped rows before the DBE: {rows}"
    );
    assert!(
        before.iter().all(|s| get(s, Field::EccDbeAggTotal) == 0.0),
        "no DBE before failure"
    );
    let at = s.iter().find(|s| s.ts_ms == f).expect("failure tick");
    assert!(get(at, Field::EccDbeVolTotal) >= 1.0);
    assert_eq!(get(at, Field::UncorrectableRemappedRows), 1.0);
    let next = s
        .iter()
        .find(|s| s.ts_ms == f + MIN)
        .expect("follow-up XID");
    assert!([94.0, 95.0].contains(&get(next, Field::XidErrors)));
    assert_lost_after(&samples, &l, MIN, 2);
}

/// Die temperature minus what the SKU's nominal thermal resistance explains
/// at the reported power: the inlet the GPU appears to breathe, plus any
/// degradation of its cooling path.
fn apparent_inlet(sim: &Simulator, s: &Sample) -> f64 {
    let r_th = sim
        .gpus()
        .iter()
        .find(|g| g.uuid == s.gpu)
        .map_or(0.07, |g| g.sku.spec().r_th);
    get(s, Field::GpuTemp) - r_th * get(s, Field::PowerUsage)
}

#[test]
fn thermal_runs_hotter_at_equal_power_then_xid_79() {
    let (sim, samples, l) = only(FailureKind::Thermal, 17);
    let gpu = l.gpu.as_deref().expect("gpu");
    let f = l.failure_ms.expect("failure");
    let host = l.host.clone().expect("host");
    let ticks = by_tick(&samples);
    let (mut excess, mut n) = (0.0, 0);
    let mut violation = (f64::NAN, 0.0);
    for v in ticks.range(f - 2 * HOUR..f).map(|(_, v)| v) {
        let Some(me) = v.iter().find(|s| &*s.gpu == gpu) else {
            continue;
        };
        if get(me, Field::GpuUtil) < 50.0 {
            continue;
        }
        let peers: Vec<f64> = v
            .iter()
            .filter(|s| s.topo.host.as_ref() == Some(&host) && s.gpu != me.gpu)
            .map(|s| apparent_inlet(&sim, s))
            .collect();
        excess += apparent_inlet(&sim, me) - peers.iter().sum::<f64>() / peers.len() as f64;
        n += 1;
        if violation.0.is_nan() {
            violation.0 = get(me, Field::ThermalViolation);
        }
        violation.1 = get(me, Field::ThermalViolation);
    }
    assert!(n > 15, "loaded before the trip: {n}");
    let excess = excess / f64::from(n);
    assert!(
        excess > 6.0,
        "{excess:.1} °C hotter than its host peers at equal power"
    );
    assert!(
        violation.1 > violation.0,
        "thermal violation time grows while throttling"
    );
    let hot = series(&samples, gpu)
        .into_iter()
        .filter(|s| s.ts_ms >= f - HOUR && s.ts_ms < f)
        .map(|s| get(s, Field::GpuTemp))
        .fold(0.0, f64::max);
    assert!(hot >= 86.0, "reaches slowdown: {hot}");
    assert_lost_after(&samples, &l, MIN, 1);
}

#[test]
fn nvlink_crc_errors_grow_then_xid_74() {
    let (sim, samples, l) = only(FailureKind::Nvlink, 17);
    let gpu = l.gpu.as_deref().expect("gpu");
    let f = l.failure_ms.expect("failure");
    let crc = growth(&samples, gpu, Field::NvlinkCrcFlitErrors, f - 2 * HOUR, f);
    let fleet = fleet_growth(&sim, &samples, Field::NvlinkCrcFlitErrors, f - 2 * HOUR, f);
    assert!(
        crc > 100.0 && crc > 20.0 * p99(&fleet).max(1.0),
        "crc {crc} vs fleet p99 {}",
        p99(&fleet)
    );
    assert!(growth(&samples, gpu, Field::NvlinkReplayErrors, f - 2 * HOUR, f) > 0.0);
    assert_lost_after(&samples, &l, MIN, 1);
}

#[test]
fn pcie_replays_grow_link_narrows_then_xid_79() {
    let (sim, samples, l) = only(FailureKind::Pcie, 17);
    let gpu = l.gpu.as_deref().expect("gpu");
    let f = l.failure_ms.expect("failure");
    let replays = growth(&samples, gpu, Field::PcieReplayCounter, f - 2 * HOUR, f);
    let fleet = fleet_growth(&sim, &samples, Field::PcieReplayCounter, f - 2 * HOUR, f);
    assert!(
        replays > 100.0 && replays > 20.0 * p99(&fleet).max(1.0),
        "replays {replays} vs p99 {}",
        p99(&fleet)
    );
    let s = series(&samples, gpu);
    let before = s
        .iter()
        .rev()
        .find(|s| s.ts_ms < f)
        .expect("a sample before");
    assert_eq!(get(before, Field::PcieLinkWidth), 8.0);
    assert_lost_after(&samples, &l, MIN, 1);
}

#[test]
fn straggler_is_slower_than_its_job_peers_without_errors() {
    let (_, samples, l) = only(FailureKind::Straggler, 17);
    let gpu = l.gpu.as_deref().expect("gpu");
    assert_eq!(l.failure_ms, None);
    let end = l.end_ms.expect("stragglers end");
    let ticks = by_tick(&samples);
    let (mut clock, mut power, mut n) = (0.0, 0.0, 0);
    for (_, v) in ticks.range(l.onset_ms..end) {
        let Some(me) = v.iter().find(|s| &*s.gpu == gpu) else {
            continue;
        };
        let peers: Vec<&&Sample> = v
            .iter()
            .filter(|s| s.topo.job == me.topo.job && s.gpu != me.gpu)
            .collect();
        if peers.len() < 7 || peers.iter().any(|p| get(p, Field::GpuUtil) < 90.0) {
            continue;
        }
        let mean = |f: Field| peers.iter().map(|p| get(p, f)).sum::<f64>() / peers.len() as f64;
        clock += get(me, Field::SmClock) / mean(Field::SmClock);
        power += get(me, Field::PowerUsage) / mean(Field::PowerUsage);
        n += 1;
    }
    assert!(n >= 20, "{n} steady ticks in the straggler window");
    let (clock, power) = (clock / n as f64, power / n as f64);
    assert!(
        clock < 0.93 && power < 0.93,
        "clock ratio {clock}, power ratio {power}"
    );
    let s = series(&samples, gpu);
    assert!(s.iter().all(|s| get(s, Field::EccDbeAggTotal) == 0.0
        && ![48.0, 74.0, 79.0].contains(&get(s, Field::XidErrors))));
    assert!(
        s.last()
            .is_some_and(|s| s.ts_ms >= end.min(DEFAULT_START_MS + 23 * HOUR)),
        "keeps reporting"
    );
}

#[test]
fn sudden_death_has_no_precursor_only_silence() {
    let (sim, samples, l) = only(FailureKind::SuddenDeath, 17);
    let gpu = l.gpu.as_deref().expect("gpu");
    let f = l.failure_ms.expect("failure");
    assert_eq!(l.onset_ms, f);
    let s = series(&samples, gpu);
    assert_eq!(
        s.last().map(|s| s.ts_ms),
        Some(f - MIN),
        "last sample one tick before"
    );
    let xids: Vec<f64> = s.iter().map(|s| get(s, Field::XidErrors)).collect();
    assert!(
        xids.iter()
            .all(|x| [0.0, 13.0, 31.0, 43.0, 45.0].contains(x))
    );
    let fleet = fleet_growth(&sim, &samples, Field::EccSbeAggTotal, f - 3 * HOUR, f);
    assert!(growth(&samples, gpu, Field::EccSbeAggTotal, f - 3 * HOUR, f) <= p99(&fleet).max(1.0));
}

#[test]
fn rack_cooling_heats_every_gpu_of_one_rack() {
    let (sim, samples, l) = only(FailureKind::RackCooling, 17);
    assert!(l.gpu.is_none() && l.failure_ms.is_none());
    let end = l.end_ms.expect("incidents end");
    let (on, mid) = (l.onset_ms, l.onset_ms + 30 * MIN);
    // Per GPU: the inlet it appears to breathe, during vs the hour before.
    let rise = |g: &GpuInfo| {
        let mean = |t0: i64, t1: i64| {
            let v: Vec<f64> = series(&samples, &g.uuid)
                .iter()
                .filter(|s| s.ts_ms >= t0 && s.ts_ms < t1)
                .map(|s| apparent_inlet(&sim, s))
                .collect();
            v.iter().sum::<f64>() / v.len().max(1) as f64
        };
        mean(mid, end) - mean(on - HOUR, on)
    };
    let (inside, outside): (Vec<&GpuInfo>, Vec<&GpuInfo>) =
        sim.gpus().iter().partition(|g| g.rack == l.rack);
    let hotter = inside.iter().filter(|g| rise(g) > 5.0).count();
    assert_eq!(hotter, inside.len(), "every GPU of {} heats up", l.rack);
    let elsewhere = outside.iter().filter(|g| rise(g) > 5.0).count();
    assert_eq!(elsewhere, 0, "other racks stay cool");
}

#[test]
fn mixed_day_has_several_failures_of_several_kinds() {
    let (sim, samples) = run(SimConfig {
        interval_s: 300,
        ..SimConfig::default()
    });
    let gpu_labels: Vec<&FailureLabel> = sim
        .labels()
        .iter()
        .filter(|l| !l.kind.is_incident())
        .collect();
    assert!(gpu_labels.len() >= 3, "{} failures", gpu_labels.len());
    let mut kinds: Vec<FailureKind> = gpu_labels.iter().map(|l| l.kind).collect();
    kinds.dedup();
    assert!(kinds.len() >= 2);
    // Lost GPUs stop reporting at their failure (plus the XID tail).
    for l in gpu_labels.iter().filter(|l| l.kind.loses_gpu()) {
        let f = l.failure_ms.expect("lost GPUs have a failure time");
        let tail = match l.kind {
            FailureKind::HbmEcc => 2,
            FailureKind::SuddenDeath => 0,
            _ => 1,
        };
        let last = series(&samples, l.gpu.as_deref().expect("gpu"))
            .last()
            .map_or(0, |s| s.ts_ms);
        assert!(
            last < f + tail * 300_000,
            "{} {} reported after failure",
            l.kind,
            l.gpu.as_deref().unwrap_or("")
        );
    }
}
