//! Scenario tests of the engine as a whole: rack cooling incident,
//! application XID on a job, correlation release, silences, inhibition,
//! replacement, escalation, hand-over; the rack correlation's in
//! `tests/correlation.rs`. Routing's are in `route_tests.rs`; property
//! tests over random alert streams live in `tests/properties.rs`.

use crate::alert::{AlertEvent, Labels, Reason, Scope, Severity, Status};
use crate::config::RawEngineConfig;
use crate::engine::{AlertEngine, Observation};

mod correlation;

const MIN: i64 = 60_000;

fn engine(toml_text: &str) -> AlertEngine {
    let raw: RawEngineConfig = toml::from_str(toml_text).expect("test config parses");
    AlertEngine::new(raw.validate().expect("test config is valid"))
}

fn gpu_labels(rack: usize, host: usize, gpu: usize) -> Labels {
    [
        ("gpu", format!("GPU-r{rack}h{host}g{gpu}")),
        ("host", format!("node-r{rack}h{host}")),
        ("rack", format!("r{rack}")),
        ("cluster", "east-1".to_owned()),
        ("job", format!("job-r{rack}h{host}")),
        ("gpu_index", gpu.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

struct Fleet {
    gpus: Vec<Labels>,
}

impl Fleet {
    /// `racks` racks of `hosts` hosts of 8 GPUs.
    fn new(racks: usize, hosts: usize) -> Self {
        let mut gpus = Vec::new();
        for r in 0..racks {
            for h in 0..hosts {
                for g in 0..8 {
                    gpus.push(gpu_labels(r, h, g));
                }
            }
        }
        Self { gpus }
    }

    /// One evaluation of every GPU of `kind` at `ts`; `risk(labels)` decides.
    fn step(
        &self,
        e: &mut AlertEngine,
        kind: &str,
        ts: i64,
        risk: impl Fn(&Labels) -> f64,
    ) -> Vec<AlertEvent> {
        let reasons = [Reason {
            signal: "DCGM_FI_DEV_GPU_TEMP".into(),
            detail: "92 C vs peers 70 C".into(),
        }];
        let mut out = Vec::new();
        for l in &self.gpus {
            let obs = Observation {
                ts_ms: ts,
                kind,
                scope: Scope::Gpu,
                labels: l,
                severity: Severity::Critical,
                value: risk(l),
                summary: "GPU hot",
                reasons: &reasons,
                eta_hours: None,
                confirmed: false,
            };
            out.extend(e.observe(&obs));
        }
        out.extend(e.tick(ts));
        out
    }
}

fn firing(events: &[AlertEvent]) -> Vec<&AlertEvent> {
    events
        .iter()
        .filter(|e| e.status == Status::Firing)
        .collect()
}

#[test]
fn application_xid_on_a_job_is_not_paged() {
    let mut e = engine(
        "[lifecycle.kinds.app_xid]\nfor = \"1m\"\n[[correlation.job]]\nkinds = [\"app_xid\"]\nmin_count = 4\n",
    );
    let fleet = Fleet::new(2, 4);
    let mut events = Vec::new();
    for step in 0..6 {
        // XID 43 on every GPU of job-r0h1 (one host).
        events.extend(fleet.step(&mut e, "app_xid", step * 30_000, |l| {
            if l["job"] == "job-r0h1" { 1.0 } else { 0.0 }
        }));
    }
    let fired = firing(&events);
    assert_eq!(fired.len(), 8, "recorded per GPU");
    assert!(
        fired
            .iter()
            .all(|a| a.severity == Severity::Info && a.scope == Scope::Gpu),
        "{fired:#?}"
    );
    assert!(
        fired
            .iter()
            .all(|a| a.reasons[0].signal == "job_correlation")
    );
    // A lone XID (one GPU of another job) is still a hardware suspect.
    let mut lone = Vec::new();
    for step in 6..12 {
        lone.extend(fleet.step(&mut e, "app_xid", step * 30_000, |l| {
            if l["gpu"] == "GPU-r1h0g0" { 1.0 } else { 0.0 }
        }));
    }
    let critical: Vec<_> = firing(&lone)
        .into_iter()
        .filter(|a| a.severity == Severity::Critical)
        .collect();
    assert_eq!(critical.len(), 1, "{lone:#?}");
}

#[test]
fn silences_mute_until_they_end_and_inhibition_follows_its_source() {
    let mut e = engine(
        r#"
        [lifecycle.default]
        for = "0s"
        [correlation]
        exclude_kinds = ["ecc"]
        [[silences]]
        matchers = ['host="node-r0h0"']
        starts_at = "1970-01-01T00:00:00Z"
        ends_at = "1970-01-01T00:10:00Z"
        created_by = "ops"
        comment = "maintenance"
        [[inhibit_rules]]
        source_matchers = ['kind="host_down"']
        target_matchers = ['scope="gpu"']
        equal = ["host"]
        "#,
    );
    let l = gpu_labels(0, 0, 0);
    let obs = |ts, kind, value| Observation {
        ts_ms: ts,
        kind,
        scope: Scope::Gpu,
        labels: &l,
        severity: Severity::Critical,
        value,
        summary: "s",
        reasons: &[],
        eta_hours: None,
        confirmed: false,
    };
    assert!(e.observe(&obs(0, "ecc", 0.9)).is_empty(), "silenced");
    assert!(e.tick(5 * MIN).is_empty());
    let after = e.tick(10 * MIN);
    assert_eq!(firing(&after).len(), 1, "delivered when the silence ends");

    let l2 = gpu_labels(0, 1, 0);
    let mut host = Labels::new();
    host.insert("host".into(), "node-r0h1".into());
    let host_obs = |ts, value| Observation {
        ts_ms: ts,
        kind: "host_down",
        scope: Scope::Host,
        labels: &host,
        severity: Severity::Critical,
        value,
        summary: "host down",
        reasons: &[],
        eta_hours: None,
        confirmed: false,
    };
    assert_eq!(firing(&e.observe(&host_obs(11 * MIN, 1.0))).len(), 1);
    let gpu = Observation {
        labels: &l2,
        ..obs(11 * MIN, "ecc", 0.9)
    };
    let got = e.observe(&gpu);
    assert!(got.is_empty(), "inhibited by host_down: {got:#?}");
    let mut out = Vec::new();
    for m in 12..20 {
        out.extend(e.observe(&host_obs(m * MIN, 0.0)));
        out.extend(e.observe(&Observation {
            ts_ms: m * MIN,
            ..gpu
        }));
    }
    let kinds: Vec<_> = out.iter().map(|a| (a.kind.as_str(), a.status)).collect();
    assert_eq!(
        kinds,
        [("host_down", Status::Resolved), ("ecc", Status::Firing)]
    );
}

#[test]
fn replaced_and_stale_sources_resolve() {
    let mut e = engine(
        "[lifecycle]\nslot_labels = [\"host\", \"gpu_index\"]\n[lifecycle.default]\nfor = \"0s\"\nstale_after = \"10m\"\n",
    );
    let old = gpu_labels(0, 0, 3);
    let mut new = old.clone();
    new.insert("gpu".into(), "GPU-new".into());
    let obs = |labels, ts, value| Observation {
        ts_ms: ts,
        kind: "ecc",
        scope: Scope::Gpu,
        labels,
        severity: Severity::Critical,
        value,
        summary: "s",
        reasons: &[],
        eta_hours: None,
        confirmed: false,
    };
    assert_eq!(firing(&e.observe(&obs(&old, 0, 0.9))).len(), 1);
    let out = e.observe(&obs(&new, MIN, 0.1));
    assert_eq!(out.len(), 1);
    assert_eq!(
        (out[0].status, out[0].dedup_key.as_str()),
        (Status::Resolved, "forewarn/gpu/GPU-r0h0g3/ecc")
    );
    assert!(out[0].summary.contains("replaced"));
    // The new GPU goes bad, then stops reporting for good.
    assert_eq!(firing(&e.observe(&obs(&new, 2 * MIN, 0.9))).len(), 1);
    assert!(e.tick(5 * MIN).is_empty());
    let out = e.tick(13 * MIN);
    assert_eq!(out.len(), 1);
    assert!(out[0].summary.contains("stopped reporting"));
}

#[test]
fn a_delivered_warning_escalates_to_a_page_when_its_evidence_grows() {
    let mut e = engine("[lifecycle.default]\nfire_at = 0.5\nresolve_below = 0.2\nfor = \"0s\"\n");
    let labels = gpu_labels(0, 0, 0);
    let obs = |ts: i64, value: f64, severity: Severity, summary: &'static str| Observation {
        ts_ms: ts,
        kind: "hbm_ecc_trend",
        scope: Scope::Gpu,
        labels: &labels,
        severity,
        value,
        summary,
        reasons: &[],
        eta_hours: None,
        confirmed: false,
    };
    let mut events = Vec::new();
    events.extend(e.observe(&obs(0, 0.6, Severity::Warning, "rate 120/h")));
    events.extend(e.tick(0));
    events.extend(e.observe(&obs(MIN, 0.7, Severity::Warning, "rate 200/h")));
    events.extend(e.observe(&obs(2 * MIN, 0.9, Severity::Critical, "rate 360/h")));
    events.extend(e.observe(&obs(3 * MIN, 0.6, Severity::Warning, "rate 150/h")));
    events.extend(e.tick(3 * MIN));
    let firing: Vec<(Severity, &str)> = events
        .iter()
        .filter(|ev| ev.status == Status::Firing)
        .map(|ev| (ev.severity, ev.summary.as_str()))
        .collect();
    assert_eq!(
        firing,
        vec![
            (Severity::Warning, "rate 120/h"),
            (Severity::Critical, "rate 360/h")
        ],
        "one warning, one escalation to a page with the new evidence, never lowered: {events:?}"
    );
    assert!(events.windows(2).all(|w| w[0].dedup_key == w[1].dedup_key));
}

#[test]
fn a_page_holds_for_the_kinds_for_unless_confirmed() {
    // `for` 10 min: a warning fires after it; one sample at the page
    // level (a burst of correctable errors reads 2,400/h for 30 s) does
    // not page, ten minutes of it do, and a confirmed value at once.
    let mut e = engine("[lifecycle.default]\nfire_at = 0.5\nresolve_below = 0.2\nfor = \"10m\"\n");
    let labels = gpu_labels(0, 0, 0);
    let obs = |ts: i64, severity: Severity, confirmed: bool| Observation {
        ts_ms: ts,
        kind: "hbm_ecc_trend",
        scope: Scope::Gpu,
        labels: &labels,
        severity,
        value: if severity == Severity::Critical {
            0.95
        } else {
            0.6
        },
        summary: "s",
        reasons: &[],
        eta_hours: None,
        confirmed,
    };
    let pages = |events: &[AlertEvent]| {
        events
            .iter()
            .filter(|ev| ev.status == Status::Firing && ev.severity == Severity::Critical)
            .count()
    };
    let mut events = Vec::new();
    // Pending 0–10 min with a page-level sample at its end: fires a warning.
    for m in 0..10 {
        events.extend(e.observe(&obs(m * MIN, Severity::Warning, false)));
    }
    events.extend(e.observe(&obs(10 * MIN, Severity::Critical, false)));
    events.extend(e.tick(10 * MIN));
    let fired: Vec<Severity> = events
        .iter()
        .filter(|ev| ev.status == Status::Firing)
        .map(|ev| ev.severity)
        .collect();
    assert_eq!(fired, [Severity::Warning], "{events:?}");
    // Single page-level samples between warnings: no page.
    for m in 11..40 {
        let sev = if m % 3 == 1 {
            Severity::Critical
        } else {
            Severity::Warning
        };
        events.extend(e.observe(&obs(m * MIN, sev, false)));
    }
    assert_eq!(pages(&events), 0, "{events:?}");
    // Held from 40 to 50 min: a page at 50.
    for m in 40..=50 {
        let out = e.observe(&obs(m * MIN, Severity::Critical, false));
        assert_eq!(pages(&out), usize::from(m == 50), "minute {m}: {out:?}");
    }
    // Another GPU, confirmed: pages at its first observation.
    let other = gpu_labels(0, 0, 1);
    let out = e.observe(&Observation {
        labels: &other,
        ..obs(60 * MIN, Severity::Critical, true)
    });
    assert_eq!(pages(&out), 1, "{out:?}");
}

#[test]
fn a_page_held_through_for_fires_as_a_page_from_a_tick_and_late_values_change_nothing() {
    let mut e = engine("[lifecycle.default]\nfire_at = 0.5\nresolve_below = 0.2\nfor = \"10m\"\n");
    let labels = gpu_labels(0, 0, 0);
    let obs = |ts: i64, severity: Severity| Observation {
        ts_ms: ts,
        kind: "hbm_ecc_trend",
        scope: Scope::Gpu,
        labels: &labels,
        severity,
        value: 0.95,
        summary: "s",
        reasons: &[],
        eta_hours: None,
        confirmed: false,
    };
    let mut events = Vec::new();
    for m in 0..10 {
        events.extend(e.observe(&obs(m * MIN, Severity::Critical)));
        // A late warning does not restart the hold.
        events.extend(e.observe(&obs(m * MIN - 30_000, Severity::Warning)));
    }
    // The clock reaches 10 min before the GPU's own next value: it fires,
    // as a page, once.
    events.extend(e.tick(10 * MIN));
    events.extend(e.observe(&obs(10 * MIN, Severity::Critical)));
    let fired: Vec<Severity> = events
        .iter()
        .filter(|ev| ev.status == Status::Firing)
        .map(|ev| ev.severity)
        .collect();
    assert_eq!(fired, [Severity::Critical], "{events:?}");
}

#[test]
fn a_handed_over_gpu_leaves_without_an_event() {
    let mut e = engine("[lifecycle.default]\nfor = \"0s\"\nstale_after = \"10m\"\n");
    let (moved, stays) = (gpu_labels(0, 0, 1), gpu_labels(0, 0, 2));
    let obs = |labels, ts| Observation {
        ts_ms: ts,
        kind: "ecc",
        scope: Scope::Gpu,
        labels,
        severity: Severity::Critical,
        value: 0.9,
        summary: "s",
        reasons: &[],
        eta_hours: None,
        confirmed: false,
    };
    assert_eq!(firing(&e.observe(&obs(&moved, 0))).len(), 1);
    assert_eq!(firing(&e.observe(&obs(&stays, 0))).len(), 1);
    assert_eq!(e.hand_over(Scope::Gpu, "GPU-r0h0g1"), 1);
    assert_eq!(e.hand_over(Scope::Gpu, "GPU-r0h0g1"), 0, "already gone");
    // Long past staleness: only the GPU that stayed resolves.
    let out = e.tick(30 * MIN);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].dedup_key, "forewarn/gpu/GPU-r0h0g2/ecc");
    assert!(
        e.firing()
            .iter()
            .all(|a| a.dedup_key != "forewarn/gpu/GPU-r0h0g1/ecc")
    );
}
