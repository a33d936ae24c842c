//! Acceptance tests of the workload-aware feature stage (`features`) on the
//! seeded fleet simulator: transitions stay quiet, driver reloads give reset
//! events and no rate spike, stragglers stand out against their peers, and a
//! degrading cooling path shows in the temperature residual while the raw
//! temperature looks normal. They live here because `datasets` depends on
//! `features`, not the other way round.

use std::collections::HashMap;
use std::sync::Arc;

use datasets::simulator::{FailureKind, JobKind, Scenario, SimConfig, SimEventKind, Simulator};
use features::{Col, FeatureConfig, FeatureEngine, FeatureEvent, FeatureRow, Field, Phase, Sample};

/// Normal band of a peer z-score (robust sigmas) for healthy GPUs. With
/// 8-GPU job cohorts the MAD is itself noisy: benign rows pass |z| = 6 about
/// twice in 10,000, so the band is 8; stragglers reach tens.
const Z_BAND: f32 = 8.0;
/// Normal band of the temperature residual for healthy GPUs, °C. The
/// expected-temperature model's error right after a phase settles reaches
/// ~10.5 °C on the simulator (the inlet proxy lags a host-wide ramp by a
/// bucket); a degrading cooling path reaches 20+ °C and a GPU as hot as a
/// training GPU while idle ~35 °C.
const RESID_BAND: f32 = 12.0;

struct Run {
    sim: Simulator,
    rows: Vec<FeatureRow>,
    events: Vec<FeatureEvent>,
}

fn simulate(
    scenario: Scenario,
    gpus: usize,
    hours: f64,
    seed: u64,
    mut edit: impl FnMut(&mut Sample),
) -> Run {
    let cfg = SimConfig {
        gpus,
        hours,
        seed,
        scenario,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(cfg).expect("valid simulator config");
    let mut engine = FeatureEngine::new(FeatureConfig::default()).expect("valid feature config");
    let (mut rows, mut events, mut rejected, mut batch) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    while sim.next_tick(&mut batch).is_some() {
        batch.iter_mut().for_each(&mut edit);
        engine.process_batch(&batch, &mut rows, &mut events, &mut rejected);
        batch.clear();
    }
    assert!(
        rejected.is_empty(),
        "clean runs reject nothing: {rejected:?}"
    );
    Run { sim, rows, events }
}

fn describe(r: &FeatureRow, c: Col, start: i64) -> String {
    format!(
        "{} {} at start{:+}s phase {:?} age {}s level {} n {} temp {} power {} util {} clock {} resid {}",
        r.gpu,
        c.name(),
        (r.ts_ms - start) / 1000,
        r.phase,
        r.get(Col::PhaseAgeS),
        r.get(Col::PeerLevel),
        r.get(Col::PeerN),
        r.get(Col::GpuTemp),
        r.get(Col::PowerW),
        r.get(Col::GpuUtil),
        r.get(Col::SmClock),
        r.get(Col::GpuTempResid),
    )
}

fn rows_of<'a>(rows: &'a [FeatureRow], gpu: &str) -> Vec<&'a FeatureRow> {
    rows.iter().filter(|r| &*r.gpu == gpu).collect()
}

const PEER_Z: [Col; 8] = [
    Col::GpuTempPeerZ,
    Col::MemoryTempPeerZ,
    Col::PowerPeerZ,
    Col::SmClockPeerZ,
    Col::GpuUtilPeerZ,
    Col::GpuTempResidPeerZ,
    Col::SmClockResidPeerZ,
    Col::PowerResidPeerZ,
];

/// Idle → training: no residual or peer z-score leaves its band for healthy
/// GPUs; and the workload-aware direction: a GPU as hot as a training GPU
/// while idle is out of band.
#[test]
fn idle_to_training_stays_in_band_but_hot_while_idle_does_not() {
    let victim: std::cell::RefCell<Option<Arc<str>>> = std::cell::RefCell::new(None);
    let run = simulate(Scenario::Quiet, 256, 8.0, 17, |s| {
        // The first GPU seen idle after 2 h is made as hot as a training GPU
        // for the rest of its idle time.
        let idle = s.metrics.get(Field::GpuUtil).is_some_and(|u| u < 1.0);
        let late = s.ts_ms > datasets::simulator::DEFAULT_START_MS + 2 * 3_600_000;
        let mut v = victim.borrow_mut();
        if v.is_none() && idle && late {
            *v = Some(s.gpu.clone());
        }
        if idle && v.as_deref() == Some(&*s.gpu) {
            let t = s.metrics.get(Field::GpuTemp).unwrap_or(30.0);
            s.metrics.set(Field::GpuTemp, t + 35.0);
        }
    });
    let victim = victim.into_inner().expect("some GPU idles after 2 h");
    let starts: Vec<(i64, Vec<Arc<str>>)> = run
        .sim
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            SimEventKind::JobStart {
                kind: JobKind::Training,
                hosts,
                ..
            } => Some((e.ts_ms, hosts.clone())),
            _ => None,
        })
        .filter(|(ts, _)| *ts > datasets::simulator::DEFAULT_START_MS + 3_600_000)
        .collect();
    assert!(
        !starts.is_empty(),
        "the run has training starts after warm-up"
    );
    let mut checked = 0;
    let mut worst: Vec<(f32, String)> = Vec::new();
    for (start, hosts) in &starts {
        for r in run.rows.iter().filter(|r| {
            r.ts_ms >= start - 600_000
                && r.ts_ms < start + 1_800_000
                && r.gpu != victim
                && r.topo.host.as_ref().is_some_and(|h| hosts.contains(h))
        }) {
            let resid = r.get(Col::GpuTempResid);
            if resid.abs() > RESID_BAND {
                worst.push((resid, describe(r, Col::GpuTempResid, *start)));
            }
            for c in PEER_Z {
                let z = r.get(c);
                if z.abs() > Z_BAND {
                    worst.push((z, describe(r, c, *start)));
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 100, "checked {checked} rows");
    worst.sort_by(|a, b| b.0.abs().total_cmp(&a.0.abs()));
    assert!(
        worst.is_empty(),
        "{} of {checked} transition rows out of band, worst: {:#?}",
        worst.len(),
        &worst[..worst.len().min(12)]
    );
    // Hot during training is normal: training rows' temperatures are high
    // and still in band (checked above). Hot while idle is not:
    let hot_idle: Vec<_> = rows_of(&run.rows, &victim)
        .into_iter()
        .filter(|r| {
            r.phase == Phase::Idle
                && r.ts_ms > datasets::simulator::DEFAULT_START_MS + 2 * 3_600_000
        })
        .collect();
    assert!(!hot_idle.is_empty());
    let flagged = hot_idle
        .iter()
        .filter(|r| r.get(Col::GpuTempResid) > RESID_BAND || r.get(Col::GpuTempPeerZ) > Z_BAND)
        .count();
    assert!(
        flagged * 10 >= hot_idle.len() * 9,
        "hot idle GPU out of band in only {flagged} of {} rows",
        hot_idle.len()
    );
}

/// A rolling driver reload: counter-reset events, and no rate spike.
#[test]
fn driver_reload_gives_reset_events_and_no_rate_spike() {
    let run = simulate(Scenario::DriverReloadWave, 128, 4.0, 5, |_| {});
    let reloaded: Vec<Arc<str>> = run
        .sim
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            SimEventKind::DriverReload { host } => Some(host.clone()),
            _ => None,
        })
        .collect();
    assert!(!reloaded.is_empty());
    let mut reset_gpus: HashMap<Arc<str>, usize> = HashMap::new();
    for e in &run.events {
        if let FeatureEvent::CounterReset { gpu, .. } = e {
            *reset_gpus.entry(gpu.clone()).or_default() += 1;
        }
    }
    let on_reloaded_hosts = run
        .sim
        .gpus()
        .iter()
        .filter(|g| reloaded.contains(&g.host))
        .filter(|g| reset_gpus.contains_key(&g.uuid))
        .count();
    assert!(on_reloaded_hosts > 0, "reset events on reloaded hosts");
    let tdp = 1_000.0;
    for r in &run.rows {
        for c in [
            Col::EccSbeRate,
            Col::PcieReplayRate,
            Col::NvlinkCrcFlitRate,
            Col::EnergyPowerW,
            Col::ThermalViolationFrac,
            Col::PowerViolationFrac,
        ] {
            let v = r.get(c);
            assert!(v.is_nan() || v >= 0.0, "{} negative {c:?} {v}", r.gpu);
        }
        let e = r.get(Col::EnergyPowerW);
        assert!(
            e.is_nan() || e <= tdp,
            "{} energy-rate spike {e} W at {}",
            r.gpu,
            r.ts_ms
        );
        for c in [Col::PowerViolationFrac, Col::ThermalViolationFrac] {
            assert!(r.get(c).is_nan() || r.get(c) <= 1.01, "{c:?} {}", r.get(c));
        }
    }
}

/// A straggler's clock and power peer z-scores stand out within 10 minutes
/// of onset.
#[test]
fn straggler_stands_out_within_ten_minutes() {
    let run = simulate(Scenario::Only(FailureKind::Straggler), 256, 8.0, 23, |_| {});
    let labels: Vec<_> = run
        .sim
        .labels()
        .iter()
        .filter(|l| l.kind == FailureKind::Straggler)
        .collect();
    assert!(!labels.is_empty());
    let mut detected = 0;
    let mut report = Vec::new();
    for l in &labels {
        let Some(gpu) = &l.gpu else { continue };
        let rows = rows_of(&run.rows, gpu);
        let window: Vec<_> = rows
            .iter()
            .filter(|r| r.ts_ms >= l.onset_ms && r.ts_ms < l.onset_ms + 600_000)
            .filter(|r| r.get(Col::GpuUtil) > 50.0)
            .collect();
        if window.is_empty() {
            continue; // not under load at onset: nothing to compare.
        }
        let clock = window
            .iter()
            .map(|r| r.get(Col::SmClockPeerZ))
            .fold(f32::NAN, f32::min);
        let power = window
            .iter()
            .map(|r| r.get(Col::PowerPeerZ))
            .fold(f32::NAN, f32::min);
        report.push((gpu.clone(), clock, power));
        if clock < -Z_BAND && power < -3.0 {
            detected += 1;
        }
    }
    assert!(!report.is_empty(), "a straggler under load");
    assert_eq!(
        detected,
        report.len(),
        "clock / power z per straggler: {report:?}"
    );
}

/// Cooling-path degradation: the temperature residual grows while the raw
/// temperature stays inside the fleet's normal range. (The simulator's
/// thermal precursors usually start days before a 12 h run, so the GPU is
/// already degrading when the run begins.)
#[test]
fn thermal_degradation_shows_in_the_residual_not_the_raw_temperature() {
    let warm = datasets::simulator::DEFAULT_START_MS + 3_600_000;
    let run = simulate(Scenario::Only(FailureKind::Thermal), 256, 12.0, 29, |_| {});
    let label = run
        .sim
        .labels()
        .iter()
        .find(|l| l.kind == FailureKind::Thermal && l.gpu.is_some())
        .expect("a thermal failure is planted");
    let gpu = label.gpu.clone().expect("checked");
    let end = label.failure_ms.unwrap_or(i64::MAX);
    let busy_rows = |r: &&FeatureRow| {
        r.ts_ms > warm
            && r.ts_ms < end
            && matches!(r.phase, Phase::Training | Phase::Inference)
            && r.get(Col::GpuTempResidEwma).is_finite()
    };
    let busy: Vec<_> = rows_of(&run.rows, &gpu)
        .into_iter()
        .filter(busy_rows)
        .collect();
    let n = busy.len();
    assert!(n > 50, "{n} busy rows");
    let mean = |rs: &[&FeatureRow]| {
        rs.iter().map(|r| r.get(Col::GpuTempResidEwma)).sum::<f32>() / rs.len() as f32
    };
    let (early, late) = (mean(&busy[..n / 5]), mean(&busy[n - n / 5..]));
    assert!(late > early + 4.0, "residual grew from {early} to {late}");
    // The healthy fleet of the same SKU: its residual and temperature ranges.
    let p99 = |mut xs: Vec<f32>| {
        xs.sort_by(f32::total_cmp);
        xs[xs.len() * 99 / 100]
    };
    let healthy: Vec<&FeatureRow> = run
        .rows
        .iter()
        .filter(|r| r.gpu != gpu && r.topo.model == busy[0].topo.model)
        .filter(busy_rows)
        .collect();
    let temp_p99 = p99(healthy.iter().map(|r| r.get(Col::GpuTemp)).collect());
    let resid_p99 = p99(healthy
        .iter()
        .map(|r| r.get(Col::GpuTempResidEwma))
        .collect());
    // Rows where the residual is beyond the healthy GPUs' while the raw
    // temperature is still inside the healthy range: at least half an hour
    // (60 samples) and a tenth of the run.
    let seen_only_by_residual = busy
        .iter()
        .filter(|r| r.get(Col::GpuTempResidEwma) > resid_p99 && r.get(Col::GpuTemp) < temp_p99)
        .count();
    assert!(
        seen_only_by_residual >= 60 && seen_only_by_residual * 10 >= n,
        "{seen_only_by_residual} of {n} rows: residual above healthy p99 {resid_p99} \
         with raw temperature below healthy p99 {temp_p99}"
    );
}
