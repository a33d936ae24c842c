//! The scoring rules of [`super`], each on a hand-built truth and alerts.

use std::sync::Arc;

use alerts::{AlertEvent, Labels, Scope, Severity, Status};
use datasets::simulator::{FailureKind, FailureLabel, SimEvent, SimEventKind};

use super::*;

const T0: i64 = 1_800_000_000_000;

fn alert(ts: i64, sev: Severity, kind: &str, scope: Scope, labels: &[(&str, &str)]) -> AlertEvent {
    let labels: Labels = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    AlertEvent {
        ts,
        status: Status::Firing,
        severity: sev,
        kind: kind.into(),
        scope,
        labels,
        dedup_key: format!("forewarn/x/{ts}/{kind}"),
        summary: String::new(),
        risk: 0.9,
        eta_hours: None,
        reasons: Vec::new(),
    }
}

fn gpu_label(
    kind: FailureKind,
    gpu: &str,
    onset: i64,
    failure: Option<i64>,
    end: Option<i64>,
) -> FailureLabel {
    FailureLabel {
        kind,
        gpu: Some(gpu.into()),
        host: Some(Arc::from("h1")),
        rack: Arc::from("r1"),
        cluster: Arc::from("c1"),
        onset_ms: onset,
        failure_ms: failure,
        end_ms: end,
        xid: None,
    }
}

/// GPU g1 straggling for 3 h from `on`.
fn straggler_label(on: i64) -> FailureLabel {
    gpu_label(
        FailureKind::Straggler,
        "g1",
        on,
        None,
        Some(on + 3 * HOUR_MS),
    )
}

/// A `straggler` warning on GPU g1 at `ts`.
fn straggler_on_g1(ts: i64) -> AlertEvent {
    alert(
        ts,
        Severity::Warning,
        "straggler",
        Scope::Gpu,
        &[("gpu", "g1")],
    )
}

fn truth(labels: Vec<FailureLabel>, events: Vec<SimEvent>) -> Truth {
    Truth {
        start_ms: T0,
        warm_up_ms: HOUR_MS,
        gpu_days: 100.0,
        labels,
        events,
        ..Truth::default()
    }
}

#[test]
fn lead_time_counts_from_the_first_matching_alert() {
    let f = T0 + 20 * HOUR_MS;
    let t = truth(
        vec![gpu_label(
            FailureKind::HbmEcc,
            "g1",
            T0 + 5 * HOUR_MS,
            Some(f),
            None,
        )],
        Vec::new(),
    );
    let ev = vec![
        // Before onset − 10 min: false.
        alert(
            T0 + 3 * HOUR_MS,
            Severity::Warning,
            "hbm_ecc_trend",
            Scope::Gpu,
            &[("gpu", "g1"), ("host", "h1")],
        ),
        alert(
            f - 8 * HOUR_MS,
            Severity::Warning,
            "hbm_ecc_trend",
            Scope::Gpu,
            &[("gpu", "g1"), ("host", "h1")],
        ),
        alert(
            f,
            Severity::Critical,
            "gpu_hard_failure",
            Scope::Gpu,
            &[("gpu", "g1"), ("host", "h1")],
        ),
        // Another GPU: false page.
        alert(
            f,
            Severity::Critical,
            "gpu_lost",
            Scope::Gpu,
            &[("gpu", "g2"), ("host", "h1")],
        ),
    ];
    let s = score(&t, &ev);
    assert_eq!(s.failures.len(), 1);
    let o = &s.failures[0];
    assert!(o.detected && o.early_eligible);
    assert_eq!(o.lead_h, Some(8.0));
    assert_eq!(o.pages, 1);
    assert_eq!(
        (s.pages, s.false_pages, s.warnings, s.false_warnings),
        (2, 1, 2, 1)
    );
}

#[test]
fn an_alert_after_failure_plus_5_min_does_not_detect() {
    let f = T0 + 20 * HOUR_MS;
    let t = truth(
        vec![gpu_label(FailureKind::SuddenDeath, "g1", f, Some(f), None)],
        Vec::new(),
    );
    let late = alert(
        f + 6 * MIN_MS,
        Severity::Critical,
        "gpu_lost",
        Scope::Gpu,
        &[("gpu", "g1")],
    );
    let s = score(&t, &[late]);
    assert!(!s.failures[0].detected);
    assert!(!s.failures[0].early_eligible);
    // ... yet it is the failure's page, not a false one.
    assert_eq!(s.false_pages, 0);
}

#[test]
fn host_and_rack_alerts_cover_their_members_and_incidents_count_pages() {
    let on = T0 + 10 * HOUR_MS;
    let mut incident = gpu_label(FailureKind::RackCooling, "", on, None, Some(on + HOUR_MS));
    incident.gpu = None;
    incident.host = None;
    let t = truth(vec![incident], Vec::new());
    let ev = vec![
        alert(
            on + 20 * MIN_MS,
            Severity::Critical,
            "thermal_degradation",
            Scope::Rack,
            &[("rack", "r1")],
        ),
        alert(
            on + 30 * MIN_MS,
            Severity::Warning,
            "thermal_degradation",
            Scope::Gpu,
            &[("gpu", "g5"), ("rack", "r1")],
        ),
    ];
    let s = score(&t, &ev);
    assert_eq!(s.incidents.len(), 1);
    assert_eq!(
        (s.incidents[0].pages, s.incidents[0].rack_scope_pages),
        (1, 1)
    );
    assert_eq!(s.false_pages + s.false_warnings, 0);
}

#[test]
fn a_wider_alert_covers_a_failing_gpu_only_when_it_names_it_or_its_host() {
    // A rack alert over hosts h2 and h3 says nothing of g1 on h1: it is a
    // false warning and g1 is missed; one that names h1 covers it, and so
    // does a host alert that names g1 (not one over g7 and g8).
    let fail = T0 + 20 * HOUR_MS;
    let t = truth(
        vec![gpu_label(
            FailureKind::HbmEcc,
            "g1",
            fail - 10 * HOUR_MS,
            Some(fail),
            None,
        )],
        Vec::new(),
    );
    let wider = |scope: Scope, labels: &[(&str, &str)], members: &[&str]| {
        let mut a = alert(
            fail - 5 * HOUR_MS,
            Severity::Warning,
            "thermal_degradation",
            scope,
            labels,
        );
        a.reasons = members
            .iter()
            .map(|m| alerts::Reason {
                signal: "member".into(),
                detail: format!("{m}: 1 thermal_degradation alert(s)"),
            })
            .collect();
        a
    };
    let rack = [("rack", "r1"), ("cluster", "c1")];
    let host = [("host", "h1"), ("rack", "r1"), ("cluster", "c1")];
    for (a, covered) in [
        (wider(Scope::Rack, &rack, &["host h2", "host h3"]), false),
        (wider(Scope::Rack, &rack, &["host h1", "host h3"]), true),
        (wider(Scope::Host, &host, &["gpu g7", "gpu g8"]), false),
        (wider(Scope::Host, &host, &["gpu g1", "gpu g8"]), true),
        (wider(Scope::Rack, &rack, &[]), true),
    ] {
        let s = score(&t, std::slice::from_ref(&a));
        assert_eq!(s.failures[0].detected, covered, "{:?}", a.reasons);
        assert_eq!(s.false_warnings, u32::from(!covered), "{:?}", a.reasons);
    }
}

#[test]
fn stragglers_are_timed_and_precision_counts_straggler_alerts() {
    let on = T0 + 5 * HOUR_MS;
    let t = truth(vec![straggler_label(on)], Vec::new());
    let ev = vec![
        straggler_on_g1(on + 12 * MIN_MS),
        alert(
            on,
            Severity::Warning,
            "straggler",
            Scope::Gpu,
            &[("gpu", "g9")],
        ),
    ];
    let s = score(&t, &ev);
    assert_eq!(s.failures[0].detect_after_min, Some(12.0));
    assert_eq!((s.straggler_alerts, s.straggler_alerts_true), (2, 1));
}

#[test]
fn unmatched_alerts_are_put_down_to_benign_events() {
    let t = truth(
        Vec::new(),
        vec![
            SimEvent {
                ts_ms: T0 + HOUR_MS,
                kind: SimEventKind::DriverReload {
                    host: Arc::from("h1"),
                },
            },
            SimEvent {
                ts_ms: T0 + 2 * HOUR_MS,
                kind: SimEventKind::AppXid {
                    job: Arc::from("j1"),
                    xid: 13,
                    restart_ms: T0 + 2 * HOUR_MS + 5 * MIN_MS,
                },
            },
        ],
    );
    let ev = vec![
        alert(
            T0 + HOUR_MS + MIN_MS,
            Severity::Critical,
            "gpu_lost",
            Scope::Gpu,
            &[("gpu", "g1"), ("host", "h1")],
        ),
        alert(
            T0 + 2 * HOUR_MS,
            Severity::Warning,
            "anomaly",
            Scope::Gpu,
            &[("gpu", "g2"), ("host", "h2"), ("job", "j1")],
        ),
        alert(
            T0 + 9 * HOUR_MS,
            Severity::Warning,
            "anomaly",
            Scope::Gpu,
            &[("gpu", "g3"), ("host", "h3")],
        ),
    ];
    let s = score(&t, &ev);
    assert_eq!(s.benign_pages.get("driver_reload"), Some(&1));
    assert_eq!(s.benign_alerts.get("app_xid"), Some(&1));
    assert_eq!(s.benign_alerts.get("unexplained"), Some(&1));
}

#[test]
fn a_straggler_starting_in_the_warm_up_is_timed_from_its_end() {
    let on = T0 + 20 * MIN_MS;
    let t = truth(vec![straggler_label(on)], Vec::new());
    let a = straggler_on_g1(T0 + HOUR_MS + 6 * MIN_MS);
    let s = score(&t, &[a]);
    assert_eq!(s.failures[0].detect_after_min, Some(6.0));
}

#[test]
fn a_straggler_is_timed_without_the_time_its_job_was_paused() {
    let on = T0 + 5 * HOUR_MS;
    let xid = |ts: i64, job: &str, restart: i64| SimEvent {
        ts_ms: ts,
        kind: SimEventKind::AppXid {
            job: Arc::from(job),
            xid: 13,
            restart_ms: restart,
        },
    };
    let checkpoint = |ts: i64, end: i64| SimEvent {
        ts_ms: ts,
        kind: SimEventKind::Checkpoint {
            job: Arc::from("j1"),
            end_ms: end,
        },
    };
    let mut t = truth(
        vec![straggler_label(on)],
        vec![
            // Its job (on h1): down 13 min from 30 s in, a checkpoint dip
            // overlapping the restart's end, and a pause after the alert.
            xid(on + MIN_MS / 2, "j1", on + 13 * MIN_MS + MIN_MS / 2),
            checkpoint(on + 13 * MIN_MS, on + 15 * MIN_MS),
            xid(on + 40 * MIN_MS, "j1", on + 50 * MIN_MS),
            // Another job's restart on another host does not count.
            xid(on + 2 * MIN_MS, "j2", on + 20 * MIN_MS),
        ],
    );
    t.job_hosts
        .insert("j1".into(), vec!["h0".into(), "h1".into()]);
    t.job_hosts.insert("j2".into(), vec!["h2".into()]);
    let a = straggler_on_g1(on + 21 * MIN_MS);
    let s = score(&t, &[a]);
    // 21 min of wall time, 14.5 of them paused (13 down, 1.5 more dip).
    assert_eq!(s.failures[0].detect_after_min, Some(6.5));
}
