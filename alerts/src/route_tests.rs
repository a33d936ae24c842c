//! Scenario tests of routing: the dispatcher's grouping, waits and
//! repeats, and the router in front of the outbox (shadow routes, batches
//! that span hours). The engine's scenarios are in `tests.rs`.

use std::path::PathBuf;
use std::sync::Arc;

use crate::alert::{AlertEvent, Scope, Severity, Status};
use crate::outbox::Outbox;
use crate::pipeline::AlertRouter;
use crate::route::{Dispatcher, RawRoute, Route, Router};

fn route(toml_text: &str, receivers: &[&str]) -> Route {
    let raw: RawRoute = toml::from_str(toml_text).expect("parses");
    raw.validate(receivers).expect("valid")
}

/// A fresh scratch directory and an outbox in it for `receivers`.
fn scratch_outbox(name: &str, receivers: &[&str]) -> (PathBuf, Arc<Outbox>) {
    let dir = std::env::temp_dir().join(format!("fw-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let names: Vec<(String, bool)> = receivers.iter().map(|r| ((*r).to_owned(), true)).collect();
    let outbox = Arc::new(Outbox::open(&dir.join("outbox"), &names).expect("outbox"));
    (dir, outbox)
}

fn event(
    ts: i64,
    status: Status,
    severity: Severity,
    kind: &str,
    label: (&str, &str),
) -> AlertEvent {
    let (name, value) = label;
    AlertEvent {
        ts,
        status,
        severity,
        kind: kind.into(),
        scope: if name == "rack" {
            Scope::Rack
        } else {
            Scope::Gpu
        },
        labels: [(name.to_owned(), value.to_owned())].into(),
        dedup_key: format!("forewarn/{name}/{value}/{kind}"),
        summary: "s".into(),
        risk: 1.0,
        eta_hours: None,
        reasons: vec![],
    }
}

#[test]
fn dispatcher_groups_waits_and_repeats() {
    let route = route(
        "receiver = \"slack\"\ngroup_by = [\"rack\"]\ngroup_wait = \"30s\"\ngroup_interval = \"5m\"\nrepeat_interval = \"1h\"\n",
        &["slack"],
    );
    let mut d = Dispatcher::new(Router::new(&route), Default::default());
    let ev = |gpu: &str, status, ts| AlertEvent {
        ts,
        status,
        severity: Severity::Warning,
        kind: "thermal".into(),
        scope: Scope::Gpu,
        labels: [
            ("rack".to_owned(), "r1".to_owned()),
            ("gpu".to_owned(), gpu.to_owned()),
        ]
        .into(),
        dedup_key: format!("forewarn/gpu/{gpu}/thermal"),
        summary: "s".into(),
        risk: 0.9,
        eta_hours: None,
        reasons: vec![],
    };
    d.push(&ev("a", Status::Firing, 0));
    d.push(&ev("b", Status::Firing, 10_000));
    d.push(&ev("c", Status::Firing, 20_000));
    d.push(&ev("c", Status::Resolved, 25_000));
    assert!(d.tick(29_000).is_empty(), "group_wait");
    let n = d.tick(30_000);
    assert_eq!(n.len(), 1);
    assert_eq!(
        n[0].events
            .iter()
            .map(|e| e.dedup_key.as_str())
            .collect::<Vec<_>>(),
        ["forewarn/gpu/a/thermal", "forewarn/gpu/b/thermal"]
    );
    d.push(&ev("a", Status::Resolved, 60_000));
    assert!(d.tick(60_000 + 200_000).is_empty(), "group_interval");
    let n = d.tick(330_000);
    assert_eq!(
        (n.len(), n[0].events[0].status, n[0].firing_in_group),
        (1, Status::Resolved, 1)
    );
    assert_eq!(d.next_due(), Some(330_000 + 3_600_000));
    let n = d.tick(330_000 + 3_600_000);
    assert!(n[0].resend && n[0].events.len() == 1);
}

#[test]
fn a_shadow_route_records_instead_of_sending() {
    let route = route(
        "receiver = \"file\"\ngroup_wait = \"0s\"\n[[routes]]\nreceiver = \"pd\"\nmatchers = ['severity=\"critical\"']\nshadow = true\ncontinue = true\n[[routes]]\nreceiver = \"file\"\n",
        &["file", "pd"],
    );
    assert!(route.routes[0].shadow && !route.shadow);
    let (dir, outbox) = scratch_outbox("shadow", &["file", "pd"]);
    let log = dir.join("shadow.jsonl");
    let mut r = AlertRouter::new(&route, &[], outbox.clone()).with_shadow_log(log.clone());
    let e = event(
        1_000,
        Status::Firing,
        Severity::Critical,
        "gpu_hard_failure",
        ("gpu", "GPU-1"),
    );
    r.push(std::slice::from_ref(&e));
    r.flush(1_000).expect("flush");
    assert_eq!(outbox.pending("pd"), 0, "the shadow route sent nothing");
    assert_eq!(outbox.pending("file"), 1, "the live route still sends");
    assert_eq!(r.shadowed(), 1);
    let text = std::fs::read_to_string(&log).expect("shadow log");
    let line: serde_json::Value = serde_json::from_str(text.trim()).expect("json line");
    assert_eq!(line["receiver"], "pd");
    assert_eq!(line["shadow"], true);
    assert_eq!(
        line["events"][0]["dedup_key"],
        "forewarn/gpu/GPU-1/gpu_hard_failure"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A batch of events spanning more than a group's window (a fleet stage
/// catching up after a takeover: an incident's firing and, 74 minutes of
/// event time later, its resolve) is notified as if the events had come
/// one by one: the page, then its resolve. Pushed together and flushed
/// once, the resolve had cancelled the unsent page.
#[test]
fn a_batch_spanning_hours_pages_then_resolves() {
    let route = route(
        "receiver = \"pd\"\ngroup_wait = \"0s\"\ngroup_interval = \"1m\"\n",
        &["pd"],
    );
    let (dir, outbox) = scratch_outbox("batch", &["pd"]);
    let mut r = AlertRouter::new(&route, &[], outbox.clone());
    let fire = event(
        7 * 3_600_000,
        Status::Firing,
        Severity::Critical,
        "rack_cooling",
        ("rack", "r02"),
    );
    let resolve = AlertEvent {
        ts: fire.ts + 74 * 60_000,
        status: Status::Resolved,
        ..fire.clone()
    };
    r.push(&[fire.clone(), resolve.clone()]);
    r.flush(resolve.ts + 60_000).expect("flush");
    assert_eq!(outbox.pending("pd"), 2, "the page and its resolve");
    // Within one window (the same instant) a flap still cancels.
    let mut r = AlertRouter::new(&route, &[], outbox.clone());
    let flap = AlertEvent {
        ts: fire.ts,
        ..resolve.clone()
    };
    r.push(&[fire, flap]);
    r.flush(resolve.ts).expect("flush");
    assert_eq!(outbox.pending("pd"), 2, "nothing more");
    let _ = std::fs::remove_dir_all(&dir);
}
