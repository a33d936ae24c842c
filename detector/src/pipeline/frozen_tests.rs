//! Frozen telemetry end to end through the pipeline (`assess::frozen`): a
//! simulated fleet in which one GPU's exporter starts repeating its last
//! sample and another GPU's temperature sensor sticks, both two hours in.
//! Each gets one `anomaly` warning naming the reading, a quarter hour plus
//! the policy's `for` after the freeze (the sensor's once its power
//! swings); the exporter's resolves when it comes back an hour later; no
//! other GPU gets such a reason. A whole host's exporter hanging is one
//! alert on the host.

use alerts::{AlertEvent, Severity, Status};
use datasets::simulator::SimConfig;
use features::{Field, Sample};

use super::test_support::{alerts_of, sim_ticks};

const FREEZE_MS: i64 = 2 * 3_600_000;
/// The exporter comes back an hour later.
const THAW_MS: i64 = 3 * 3_600_000;

fn ticks() -> Vec<Vec<Sample>> {
    sim_ticks(SimConfig {
        gpus: 32,
        hours: 4.0,
        seed: 23,
        failure_rate_per_gpu_day: 0.0,
        ..SimConfig::default()
    })
}

/// The GPU whose power swings most after the freeze (in a job's phases),
/// whose temperature will stick, and another GPU, whose exporter freezes.
fn pick(ticks: &[Vec<Sample>], start: i64) -> (String, String) {
    let mut range: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for s in ticks
        .iter()
        .flatten()
        .filter(|s| s.ts_ms >= start + FREEZE_MS)
    {
        if let Some(p) = s.metrics.get(Field::PowerUsage) {
            let r = range.entry(s.gpu.to_string()).or_insert((p, p));
            *r = (r.0.min(p), r.1.max(p));
        }
    }
    let stuck = range
        .iter()
        .max_by(|a, b| (a.1.1 - a.1.0).total_cmp(&(b.1.1 - b.1.0)))
        .map(|(g, _)| g.clone())
        .expect("gpus");
    let frozen = range.keys().find(|g| **g != stuck).cloned().expect("two");
    (stuck, frozen)
}

#[test]
fn a_frozen_exporter_and_a_stuck_sensor_each_warn_once_naming_the_reading() {
    let mut ticks = ticks();
    let start = ticks[0][0].ts_ms;
    let (stuck, frozen) = pick(&ticks, start);
    let mut last: Option<Sample> = None;
    let mut stuck_at = None;
    for s in ticks.iter_mut().flatten() {
        let after = s.ts_ms >= start + FREEZE_MS;
        if *s.gpu == *frozen {
            match (&last, after && s.ts_ms < start + THAW_MS) {
                (Some(l), true) => s.metrics = l.metrics.clone(),
                _ => last = Some(s.clone()),
            }
        } else if *s.gpu == *stuck && after {
            let t = *stuck_at.get_or_insert(s.metrics.get(Field::GpuTemp).expect("temp"));
            s.metrics.set(Field::GpuTemp, t);
        }
    }
    let events = alerts_of(ticks);
    let frozen_reason = |e: &AlertEvent, signal: &str| {
        e.reasons.first().is_some_and(|r| {
            r.signal == signal
                && (r.detail.contains("stopped updating") || r.detail.contains("not reading"))
        })
    };
    // Minutes after the freeze: the frozen exporter's quarter hour to judge,
    // the rule's `for` of 15 min and a round; the stuck sensor's, once its
    // GPU's power has swung (its job's next phase).
    for (gpu, signal, within) in [
        (&frozen, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 29.0..=35.0),
        (&stuck, "DCGM_FI_DEV_GPU_TEMP", 15.0..=90.0),
    ] {
        let firing: Vec<_> = events
            .iter()
            .filter(|e| e.status == Status::Firing && e.labels.get("gpu") == Some(gpu))
            .collect();
        let hit: Vec<_> = firing.iter().filter(|e| frozen_reason(e, signal)).collect();
        assert_eq!(hit.len(), 1, "{gpu}: {firing:#?}");
        let e = hit[0];
        assert_eq!(
            (e.kind.as_str(), e.severity),
            ("anomaly", Severity::Warning)
        );
        let after_min = (e.ts - start - FREEZE_MS) as f64 / 60_000.0;
        assert!(within.contains(&after_min), "{gpu}: {after_min} min");
    }
    // The exporter back: the warning resolves (the policy's resolve_after,
    // 15 min, after the readings move).
    let resolved = events
        .iter()
        .find(|e| e.status == Status::Resolved && e.labels.get("gpu") == Some(&frozen))
        .map(|e| (e.ts - start - THAW_MS) as f64 / 60_000.0);
    assert!(
        resolved.is_some_and(|m| (0.0..=20.0).contains(&m)),
        "{resolved:?}"
    );
    let others: Vec<_> = events
        .iter()
        .filter(|e| {
            e.labels
                .get("gpu")
                .is_none_or(|g| *g != frozen && *g != stuck)
        })
        .filter(|e| {
            e.reasons
                .iter()
                .any(|r| r.detail.contains("stopped updating") || r.detail.contains("not reading"))
        })
        .collect();
    assert!(others.is_empty(), "{others:#?}");
}

#[test]
fn a_whole_hosts_frozen_exporter_is_one_host_alert() {
    // dcgm-exporter serves every GPU of its host: when it hangs, all of
    // them freeze at once. The correlation stage folds their warnings into
    // one alert on the host.
    let mut ticks = ticks();
    let start = ticks[0][0].ts_ms;
    let host = ticks[0][0].topo.host.clone().expect("host");
    let mut last: std::collections::HashMap<String, Sample> = Default::default();
    for s in ticks.iter_mut().flatten() {
        if s.topo.host.as_ref() != Some(&host) {
            continue;
        }
        if s.ts_ms >= start + FREEZE_MS
            && let Some(l) = last.get(&*s.gpu)
        {
            s.metrics = l.metrics.clone();
        } else {
            last.insert(s.gpu.to_string(), s.clone());
        }
    }
    let firing: Vec<_> = alerts_of(ticks)
        .into_iter()
        .filter(|e| e.status == Status::Firing && e.kind == "anomaly")
        .collect();
    let summary: Vec<_> = firing
        .iter()
        .map(|e| (format!("{:?}", e.scope), e.dedup_key.clone()))
        .collect();
    assert_eq!(firing.len(), 1, "{summary:#?}");
    let e = &firing[0];
    assert_eq!(e.scope, alerts::Scope::Host, "{summary:#?}");
    assert_eq!(e.labels.get("host").map(String::as_str), Some(&*host));
    // Its summary quotes the strongest member: the reading that froze.
    assert!(
        e.summary.contains("telemetry has stopped updating"),
        "{}",
        e.summary
    );
}
