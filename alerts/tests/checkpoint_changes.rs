//! Checkpoints restored under a changed world (issue #7): a kind or a route
//! removed from the config, run-time silences, version checks, and a whole
//! alert system restored over its outbox. The restore-equals-uninterrupted
//! property is in `checkpoint.rs`.
#![allow(clippy::unwrap_used)]

mod checkpoint_support;

use alerts::snapshot::ENGINE_SNAPSHOT_VERSION;
use alerts::{
    AlertEngine, Dispatcher, EngineSnapshot, Notification, Observation, RouterSnapshot, Scope,
    Severity, Silence, SnapshotError, SnapshotHeader, Status,
};

use checkpoint_support::*;

/// An engine and dispatcher with alerts of all three kinds on h0 delivered.
fn busy() -> (AlertEngine, Dispatcher, i64) {
    let mut e = AlertEngine::new(engine_cfg(ENGINE_TOML));
    let mut d = Dispatcher::new(router(ROUTE_TOML), caps());
    let mut ts = 0;
    for _ in 0..6 {
        for kind in KINDS {
            // One GPU per kind and host: below the host correlation count.
            let l = labels(KINDS.iter().position(|k| *k == kind).unwrap(), 0);
            let obs = Observation {
                ts_ms: ts,
                kind,
                scope: Scope::Gpu,
                labels: &l,
                severity: Severity::Warning,
                value: 0.95,
                summary: "hot",
                reasons: &[],
                eta_hours: None,
                confirmed: false,
            };
            e.observe(&obs).iter().for_each(|ev| d.push(ev));
        }
        e.tick(ts).iter().for_each(|ev| d.push(ev));
        d.tick(ts);
        ts += 10_000;
    }
    let firing: Vec<String> = e.firing().into_iter().map(|a| a.kind).collect();
    assert_eq!(firing, ["thermal", "power", "xid"]);
    (e, d, ts)
}

#[test]
fn a_kind_removed_from_the_config_is_dropped_and_resolved() {
    let (e, _, ts) = busy();
    let snap: EngineSnapshot = uncbor(&cbor(&e.snapshot()));
    let without_xid = ENGINE_TOML.replace(
        "[lifecycle.kinds.xid]\nfor = \"0s\"\nresolve_after = \"10s\"\n",
        "",
    );
    let mut e = AlertEngine::restore(engine_cfg(&without_xid), snap).unwrap();
    let kinds: Vec<String> = e.firing().into_iter().map(|a| a.kind).collect();
    assert_eq!(kinds, ["thermal", "power"], "other kinds kept");
    let events = e.tick(ts);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].kind.as_str(), events[0].status),
        ("xid", Status::Resolved)
    );
    assert!(events[0].summary.contains("kind removed from the config"));
    // The kept kinds go on: still firing, no second page, resolve when clear.
    let l = labels(0, 0);
    let obs = |ts_ms, value| Observation {
        ts_ms,
        kind: "thermal",
        scope: Scope::Gpu,
        labels: &l,
        severity: Severity::Warning,
        value,
        summary: "hot",
        reasons: &[],
        eta_hours: None,
        confirmed: false,
    };
    assert!(e.observe(&obs(ts + 10_000, 0.95)).is_empty());
    assert!(e.observe(&obs(ts + 20_000, 0.1)).is_empty());
    let resolved = e.observe(&obs(ts + 60_000, 0.1));
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].status, Status::Resolved);
    assert!(e.unaccounted(ts + 60_000).is_empty());
}

#[test]
fn a_removed_route_drops_its_groups_and_inserted_routes_keep_the_rest() {
    let (_, d, ts) = busy();
    let snap: RouterSnapshot = uncbor(&cbor(&d.snapshot()));
    // The slack route removed, and a new first route: "pd" moves from id 1 to 2.
    let changed = ROUTE_TOML
        .replace(
            "[[routes]]\nmatchers = ['kind=~\"thermal|power\"']\nreceiver = \"slack\"\ngroup_by = [\"host\", \"kind\"]\n",
            "",
        )
        .replace(
            "[[routes]]\nmatchers = ['severity=\"critical\"']",
            "[[routes]]\nmatchers = ['kind=\"disk\"']\nreceiver = \"slack\"\n[[routes]]\nmatchers = ['severity=\"critical\"']",
        );
    let mut restored = Dispatcher::restore(router(&changed), caps(), snap.clone()).unwrap();
    let mut before = Dispatcher::restore(router(ROUTE_TOML), caps(), snap).unwrap();
    // Resends after repeat_interval show which groups survived.
    let later = ts + 3_600_000;
    let keys = |n: Vec<Notification>| {
        let mut v: Vec<(String, String)> =
            n.into_iter().map(|n| (n.receiver, n.group_key)).collect();
        v.sort();
        v
    };
    let old = keys(before.tick(later));
    assert!(old.iter().any(|(r, _)| r == "slack"), "{old:?}");
    let new = keys(restored.tick(later));
    assert!(!new.iter().any(|(r, _)| r == "slack"), "{new:?}");
    let file_groups = |v: &[(String, String)]| {
        v.iter()
            .filter(|(r, _)| r == "file")
            .map(|(_, k)| k.split_once('/').unwrap().1.to_owned())
            .collect::<Vec<_>>()
    };
    assert!(!file_groups(&old).is_empty());
    assert_eq!(file_groups(&old), file_groups(&new), "root groups kept");
}

#[test]
fn silences_added_at_run_time_survive_a_restore() {
    let cfg = engine_cfg(ENGINE_TOML);
    let mut e = AlertEngine::new(cfg.clone());
    let body = r#"{"matchers":[{"name":"host","value":"h0","isRegex":false,"isEqual":true},
        {"name":"kind","value":"therm.*","isRegex":true}],
        "startsAt":"1970-01-01T00:00:00Z","endsAt":"1970-01-01T02:00:00Z",
        "createdBy":"ops","comment":"swap fans"}"#;
    e.add_silence(Silence::from_json(body, "api-1".into()).unwrap());
    // The config silence, ended early at run time, stays ended.
    assert!(e.expire_silence("config-0", 60_000));
    let mut e = AlertEngine::restore(cfg, uncbor(&cbor(&e.snapshot()))).unwrap();
    let ids: Vec<(&str, i64)> = e
        .silences()
        .iter()
        .map(|s| (s.id.as_str(), s.ends_at_ms))
        .collect();
    assert_eq!(ids, [("config-0", 60_000), ("api-1", 7_200_000)]);
    assert_eq!(
        serde_json::to_value(&e.silences()[1]).unwrap()["matchers"][1],
        serde_json::json!({"name": "kind", "value": "therm.*", "isRegex": true, "isEqual": true})
    );
    // And it still mutes: a thermal alert on h0 is never delivered.
    let l = labels(0, 0);
    let mut delivered = Vec::new();
    for s in 0..20 {
        let obs = Observation {
            ts_ms: s * 10_000,
            kind: "thermal",
            scope: Scope::Gpu,
            labels: &l,
            severity: Severity::Critical,
            value: 0.99,
            summary: "hot",
            reasons: &[],
            eta_hours: None,
            confirmed: false,
        };
        delivered.extend(e.observe(&obs));
        delivered.extend(e.tick(s * 10_000));
    }
    assert!(delivered.is_empty(), "{delivered:?}");
    assert_eq!(e.unaccounted(200_000), Vec::<String>::new());
}

#[test]
fn unknown_versions_are_refused_with_a_typed_error() {
    let (e, d, _) = busy();
    let mut snap = e.snapshot();
    snap.version = ENGINE_SNAPSHOT_VERSION + 1;
    let bytes = cbor(&snap);
    let header: SnapshotHeader = uncbor(&bytes);
    assert_eq!(header.version, ENGINE_SNAPSHOT_VERSION + 1);
    let err = AlertEngine::restore(engine_cfg(ENGINE_TOML), uncbor(&bytes)).unwrap_err();
    assert_eq!(
        err,
        SnapshotError::UnsupportedVersion {
            what: "engine",
            found: ENGINE_SNAPSHOT_VERSION + 1,
            supported: ENGINE_SNAPSHOT_VERSION
        }
    );
    let mut rs = d.snapshot();
    rs.version = 0;
    assert!(matches!(
        Dispatcher::restore(router(ROUTE_TOML), caps(), rs),
        Err(SnapshotError::UnsupportedVersion {
            what: "router",
            found: 0,
            ..
        })
    ));
}

#[test]
fn an_alert_system_restores_engine_and_router_over_its_outbox() {
    let dir =
        std::env::temp_dir().join(format!("forewarn-alerts-checkpoint-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let toml_text = format!(
        "{ENGINE_TOML}[route]\nreceiver = \"file\"\ngroup_wait = \"0s\"\ngroup_interval = \"1m\"\nrepeat_interval = \"1h\"\n\
         [[receivers]]\ntype = \"file\"\nname = \"file\"\npath = \"{}\"\n",
        dir.join("alerts.jsonl").display()
    );
    let cfg = alerts::RawConfig::from_toml(&toml_text)
        .unwrap()
        .validate()
        .unwrap();
    let mut sys = alerts::AlertSystem::open_in(&cfg, &dir.join("outbox")).unwrap();
    let l = labels(4, 0);
    let mut written = 0;
    for s in 0..6 {
        let obs = Observation {
            ts_ms: s * 10_000,
            kind: "xid",
            scope: Scope::Gpu,
            labels: &l,
            severity: Severity::Critical,
            value: 1.0,
            summary: "xid 79",
            reasons: &[],
            eta_hours: None,
            confirmed: false,
        };
        let events = sys.engine.observe(&obs);
        sys.router.push(&events);
        sys.router.push(&sys.engine.tick(s * 10_000));
        written += sys.router.flush(s * 10_000).unwrap();
    }
    assert_eq!(written, 1, "one page");
    let (es, rs) = (cbor(&sys.engine.snapshot()), cbor(&sys.router.snapshot()));
    let due = sys.router.next_due();
    assert_eq!(due, Some(3_600_000), "the re-send is scheduled");
    drop(sys);
    // Restart: a new system over the same outbox, state from the checkpoint.
    let mut sys = alerts::AlertSystem::open_in(&cfg, &dir.join("outbox")).unwrap();
    assert_eq!(sys.router.next_due(), None);
    sys.restore(&cfg, uncbor(&es), uncbor(&rs)).unwrap();
    assert_eq!(sys.router.next_due(), due);
    assert_eq!(sys.engine.firing().len(), 1);
    assert_eq!(
        sys.router.flush(3_600_000).unwrap(),
        1,
        "the re-send goes out"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
