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
/// Normal bands of every expected-vs-actual residual for healthy GPUs:
/// (column, band). From the simulator (seed 17, 256 GPUs, 8 h, rows more
/// than 30 min into their phase): temperature p99.9 8.4 °C (band above);
/// memory temperature p99.9 11.7 °C, max 16 °C (HBM lags the package, and
/// its model shares the package's thermal regressors), transitions reach
/// 19 °C; SM clock p99.9 98 MHz, transitions 114 MHz (a straggler runs
/// 200–400 MHz slow); power p99.9 103 W, max 121 W.
const RESID_BANDS: [(Col, f32); 4] = [
    (Col::GpuTempResid, RESID_BAND),
    (Col::MemoryTempResid, 20.0),
    (Col::SmClockResid, 150.0),
    (Col::PowerResid, 150.0),
];

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

/// Idle → training: no residual (temperature, memory temperature, clock,
/// power) or peer z-score leaves its band for healthy GPUs within 10 min
/// before to 30 min after a training job starts on their host, although
/// most of those rows are hotter than any idle GPU (hot during training is
/// normal); and the other direction: a GPU as hot as a training GPU while
/// idle is out of band in at least 90 % of its idle rows.
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
    // The hottest healthy idle GPU settled in its phase: training rows above
    // it are "hot", and must still be in band.
    let idle_max = run
        .rows
        .iter()
        .filter(|r| r.gpu != victim && r.phase == Phase::Idle && r.get(Col::PhaseAgeS) > 1800.0)
        .map(|r| r.get(Col::GpuTemp))
        .fold(f32::NEG_INFINITY, f32::max);
    assert!(
        idle_max.is_finite() && idle_max < 50.0,
        "idle max {idle_max}"
    );
    let mut checked = 0;
    let mut hot_training = 0;
    let mut worst: Vec<(f32, String)> = Vec::new();
    for (start, hosts) in &starts {
        for r in run.rows.iter().filter(|r| {
            r.ts_ms >= start - 600_000
                && r.ts_ms < start + 1_800_000
                && r.gpu != victim
                && r.topo.host.as_ref().is_some_and(|h| hosts.contains(h))
        }) {
            for (c, band) in RESID_BANDS {
                let resid = r.get(c);
                if resid.abs() > band {
                    worst.push((resid, describe(r, c, *start)));
                }
            }
            if r.phase == Phase::Training && r.get(Col::GpuTemp) > idle_max {
                hot_training += 1;
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
    // Hot during training is normal: many transition rows are hotter than
    // any settled idle GPU, and none of them left its band (below).
    assert!(
        hot_training * 4 >= checked,
        "only {hot_training} of {checked} transition rows train above {idle_max} °C"
    );
    worst.sort_by(|a, b| b.0.abs().total_cmp(&a.0.abs()));
    assert!(
        worst.is_empty(),
        "{} of {checked} transition rows out of band, worst: {:#?}",
        worst.len(),
        &worst[..worst.len().min(12)]
    );
    // Hot while idle is not normal:
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

/// A rolling driver reload: every GPU of every reloaded host gets counter
/// reset events at the reload (counted as one reset episode), no rate is
/// ever negative, no error rate in the 10 minutes after a GPU's reload
/// leaves the fleet's pre-reload range (no spike), and the energy-derived
/// power is unknown for the reset interval and within the TDP after it.
#[test]
fn driver_reload_gives_reset_events_and_no_rate_spike() {
    let run = simulate(Scenario::DriverReloadWave, 128, 4.0, 5, |_| {});
    let reloads: Vec<(i64, Arc<str>)> = run
        .sim
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            SimEventKind::DriverReload { host } => Some((e.ts_ms, host.clone())),
            _ => None,
        })
        .collect();
    assert!(!reloads.is_empty());
    const ERROR_RATES: [Col; 7] = [
        Col::EccSbeRate,
        Col::EccDbeRate,
        Col::PcieReplayRate,
        Col::NvlinkCrcFlitRate,
        Col::NvlinkCrcDataRate,
        Col::NvlinkReplayRate,
        Col::NvlinkRecoveryRate,
    ];
    // The fleet's normal range of each error rate: its maximum before the
    // first reload, at least two errors in a 30 s interval (the simulator's
    // benign background errors come one or two at a time).
    let first = reloads
        .iter()
        .map(|r| r.0)
        .min()
        .expect("checked non-empty");
    let normal_max = ERROR_RATES.map(|c| {
        run.rows
            .iter()
            .filter(|r| r.ts_ms < first)
            .map(|r| r.get(c))
            .filter(|v| v.is_finite())
            .fold(240.0f32, f32::max)
    });
    let mut reloaded_gpus = 0;
    for (ts, host) in &reloads {
        for g in run.sim.gpus().iter().filter(|g| &g.host == host) {
            let resets = run
                .events
                .iter()
                .filter(|e| {
                    matches!(e, FeatureEvent::CounterReset { gpu, ts_ms, .. }
                        if *gpu == g.uuid && ts_ms == ts)
                })
                .count();
            assert!(resets >= 1, "{} reloaded at {ts} without a reset", g.uuid);
            let rows = rows_of(&run.rows, &g.uuid);
            let at = rows
                .iter()
                .find(|r| r.ts_ms == *ts)
                .expect("the GPU reported at its reload");
            assert_eq!(at.get(Col::CounterResets1h), 1.0, "one reset episode");
            assert!(at.get(Col::EnergyPowerW).is_nan(), "reset interval");
            for (c, normal) in ERROR_RATES.iter().zip(&normal_max) {
                let after = rows
                    .iter()
                    .filter(|r| r.ts_ms >= *ts && r.ts_ms < ts + 600_000)
                    .map(|r| r.get(*c))
                    .filter(|v| v.is_finite())
                    .fold(0.0f32, f32::max);
                assert!(
                    after <= *normal,
                    "{} {c:?} spiked to {after}/h after reload (fleet before reloads: {normal}/h)",
                    g.uuid
                );
            }
            reloaded_gpus += 1;
        }
    }
    assert!(reloaded_gpus >= 64, "{reloaded_gpus} reloaded GPUs");
    let tdp = 1_000.0;
    for r in &run.rows {
        for c in ERROR_RATES.into_iter().chain([
            Col::EnergyPowerW,
            Col::ThermalViolationFrac,
            Col::PowerViolationFrac,
        ]) {
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
/// of onset: over its loaded rows of the first 10 minutes, its clock z
/// passes the normal band, and its median clock and power z-scores are
/// below -3 and below the median of every healthy GPU of its job.
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
    let median = |mut xs: Vec<f32>| {
        xs.retain(|x| x.is_finite());
        xs.sort_by(f32::total_cmp);
        xs.get(xs.len() / 2).copied().unwrap_or(f32::NAN)
    };
    let mut checked = 0;
    for l in &labels {
        let Some(gpu) = &l.gpu else { continue };
        let in_window = |r: &&FeatureRow| {
            r.ts_ms >= l.onset_ms && r.ts_ms < l.onset_ms + 600_000 && r.get(Col::GpuUtil) > 50.0
        };
        let window: Vec<&FeatureRow> = rows_of(&run.rows, gpu)
            .into_iter()
            .filter(in_window)
            .collect();
        if window.is_empty() {
            continue; // not under load at onset: nothing to compare.
        }
        let job = window[0].topo.job.clone().expect("stragglers run in a job");
        let z = |rs: &[&FeatureRow], c: Col| median(rs.iter().map(|r| r.get(c)).collect());
        let min_clock = window
            .iter()
            .map(|r| r.get(Col::SmClockPeerZ))
            .fold(f32::NAN, f32::min);
        let (clock, power) = (z(&window, Col::SmClockPeerZ), z(&window, Col::PowerPeerZ));
        assert!(
            min_clock < -Z_BAND && clock < -3.0 && power < -3.0,
            "{gpu}: clock z min {min_clock} median {clock}, power z median {power}"
        );
        let mut peers: HashMap<Arc<str>, Vec<&FeatureRow>> = HashMap::new();
        for r in run.rows.iter().filter(in_window) {
            if r.gpu != *gpu && r.topo.job.as_ref() == Some(&job) {
                peers.entry(r.gpu.clone()).or_default().push(r);
            }
        }
        assert!(peers.len() >= 3, "{} job peers", peers.len());
        for (peer, rs) in &peers {
            let (pc, pp) = (z(rs, Col::SmClockPeerZ), z(rs, Col::PowerPeerZ));
            assert!(
                pc > clock && pp > power && pc > -3.0 && pp > -3.0,
                "{gpu} (clock {clock}, power {power}) does not stand out from {peer} \
                 (clock {pc}, power {pp})"
            );
        }
        checked += 1;
    }
    assert!(checked > 0, "a straggler under load");
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
