//! Checkpoints (issue #7): an engine and a dispatcher snapshotted at any
//! point, encoded as CBOR (as the detector stores them), decoded and
//! restored, go on to produce exactly the alert events and notifications of
//! a run that never stopped. Plus: restoring under a changed config (a kind
//! or a route removed), run-time silences surviving, version checks.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use alerts::matcher::Matcher;
use alerts::route::RawRoute;
use alerts::snapshot::ENGINE_SNAPSHOT_VERSION;
use alerts::{
    AlertEngine, AlertEvent, Dispatcher, EngineConfig, EngineSnapshot, Labels, Notification,
    Observation, RawEngineConfig, Reason, Router, RouterSnapshot, Scope, Severity, Silence,
    SnapshotError, SnapshotHeader, Status,
};
use proptest::prelude::*;

const ENGINE_TOML: &str = r#"
[lifecycle]
slot_labels = ["host", "slot"]
[lifecycle.default]
for = "20s"
resolve_after = "30s"
stale_after = "3m"
flap_window = "10m"
flap_resolve_after = "2m"
[lifecycle.kinds.thermal]
for = "40s"
[lifecycle.kinds.xid]
for = "0s"
resolve_after = "10s"
[correlation.host]
min_count = 2
min_fraction = 0.5
[correlation.rack]
min_count = 2
min_fraction = 0.5
[[correlation.job]]
kinds = ["xid"]
min_count = 2
[[silences]]
matchers = ['host="h1"', 'kind="power"']
starts_at = "1970-01-01T00:05:00Z"
ends_at = "1970-01-01T00:15:00Z"
created_by = "ops"
comment = "maintenance"
[[inhibit_rules]]
source_matchers = ['kind="power"', 'severity="critical"']
target_matchers = ['kind="thermal"']
equal = ["host"]
"#;

const ROUTE_TOML: &str = r#"
receiver = "file"
group_wait = "20s"
group_interval = "1m"
repeat_interval = "3m"
[[routes]]
matchers = ['severity="critical"']
receiver = "pd"
group_by = ["..."]
group_wait = "0s"
continue = true
[[routes]]
matchers = ['kind=~"thermal|power"']
receiver = "slack"
group_by = ["host", "kind"]
"#;

const KINDS: [&str; 3] = ["thermal", "power", "xid"];
const RISKS: [f64; 7] = [0.0, 0.3, 0.7, 0.85, 0.95, 1.0, f64::NAN];

fn engine_cfg(toml_text: &str) -> EngineConfig {
    toml::from_str::<RawEngineConfig>(toml_text)
        .unwrap()
        .validate()
        .unwrap()
}

fn router(toml_text: &str) -> Router {
    let raw: RawRoute = toml::from_str(toml_text).unwrap();
    Router::new(&raw.validate(&["file", "pd", "slack"]).unwrap())
}

fn caps() -> HashMap<String, i64> {
    [("slack".to_owned(), 120_000)].into()
}

/// 3 hosts x 3 slots; h0 and h1 in rack r0, h2 in r1. `generation` bumps a
/// slot's GPU (replacement).
fn labels(slot: usize, generation: u32) -> Labels {
    let host = slot / 3;
    [
        ("gpu", format!("g{slot}-{generation}")),
        ("slot", (slot % 3).to_string()),
        ("host", format!("h{host}")),
        ("rack", if host < 2 { "r0" } else { "r1" }.to_owned()),
        ("cluster", "c".to_owned()),
        ("job", format!("j{}", slot % 2)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

#[derive(Debug, Clone)]
enum Op {
    Observe {
        slot: usize,
        kind: usize,
        risk: usize,
        critical: bool,
    },
    Tick,
    Retire(usize),
    Replace(usize),
    AddSilence {
        host: usize,
        minutes: i64,
    },
    ExpireSilence(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0usize..9, 0usize..3, 0usize..RISKS.len(), any::<bool>())
            .prop_map(|(slot, kind, risk, critical)| Op::Observe { slot, kind, risk, critical }),
        4 => Just(Op::Tick),
        1 => (0usize..9).prop_map(Op::Retire),
        1 => (0usize..9).prop_map(Op::Replace),
        1 => (0usize..3, 1i64..10).prop_map(|(host, minutes)| Op::AddSilence { host, minutes }),
        1 => (0usize..3).prop_map(Op::ExpireSilence),
    ]
}

/// Everything the run produced, as text (events may hold NaN risks, which
/// `PartialEq` never finds equal).
#[derive(Default)]
struct Output {
    events: Vec<String>,
    notifications: Vec<String>,
}

/// The caller's state besides engine and dispatcher: event time, slot
/// generations, silences added so far.
#[derive(Clone)]
struct World {
    ts: i64,
    generation: [u32; 9],
    added: usize,
}

fn run(
    e: &mut AlertEngine,
    d: &mut Dispatcher,
    w: &mut World,
    ops: &[(i64, Op)],
    out: &mut Output,
) {
    for (dt, op) in ops {
        w.ts += dt * 10_000;
        let ts = w.ts;
        let events: Vec<AlertEvent> = match op {
            Op::Observe {
                slot,
                kind,
                risk,
                critical,
            } => {
                let l = labels(*slot, w.generation[*slot]);
                let value = RISKS[*risk];
                let summary = format!("risk {value}");
                let reasons = [Reason {
                    signal: "s".into(),
                    detail: format!("slot {slot}"),
                }];
                e.observe(&Observation {
                    ts_ms: ts,
                    kind: KINDS[*kind],
                    scope: Scope::Gpu,
                    labels: &l,
                    severity: if *critical {
                        Severity::Critical
                    } else {
                        Severity::Warning
                    },
                    value,
                    summary: &summary,
                    reasons: &reasons,
                    eta_hours: (*risk % 2 == 0).then_some(value * 10.0),
                })
            }
            Op::Tick => e.tick(ts),
            Op::Retire(slot) => {
                e.retire(Scope::Gpu, &format!("g{slot}-{}", w.generation[*slot]), ts)
            }
            Op::Replace(slot) => {
                w.generation[*slot] += 1;
                Vec::new()
            }
            Op::AddSilence { host, minutes } => {
                e.add_silence(Silence {
                    id: format!("api-{}", w.added),
                    matchers: vec![Matcher::equal("host", &format!("h{host}"))],
                    starts_at_ms: ts,
                    ends_at_ms: ts + minutes * 60_000,
                    created_by: "me".into(),
                    comment: "test".into(),
                });
                w.added += 1;
                Vec::new()
            }
            Op::ExpireSilence(i) => {
                let id = if *i == 0 {
                    "config-0".to_owned()
                } else {
                    format!("api-{}", w.added.saturating_sub(*i))
                };
                e.expire_silence(&id, ts);
                Vec::new()
            }
        };
        out.events.extend(events.iter().map(|ev| format!("{ev:?}")));
        events.iter().for_each(|ev| d.push(ev));
        if matches!(op, Op::Tick) {
            let n: Vec<Notification> = d.tick(ts);
            out.notifications.extend(n.iter().map(|n| format!("{n:?}")));
        }
    }
}

fn cbor<T: serde::Serialize>(v: &T) -> Vec<u8> {
    let mut buf = Vec::new();
    ciborium::into_writer(v, &mut buf).unwrap();
    buf
}

fn uncbor<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    ciborium::from_reader(bytes).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn restored_run_matches_an_uninterrupted_one(
        ops in proptest::collection::vec((0i64..4, op()), 10..160),
        cut in 0.0f64..1.0,
    ) {
        let cut = (ops.len() as f64 * cut) as usize;
        let cfg = engine_cfg(ENGINE_TOML);
        let start = World { ts: 0, generation: [0; 9], added: 0 };

        let mut whole = Output::default();
        let (mut e, mut d, mut w) = (AlertEngine::new(cfg.clone()), Dispatcher::new(router(ROUTE_TOML), caps()), start.clone());
        run(&mut e, &mut d, &mut w, &ops, &mut whole);

        let mut split = Output::default();
        let (mut e, mut d, mut w) = (AlertEngine::new(cfg.clone()), Dispatcher::new(router(ROUTE_TOML), caps()), start);
        run(&mut e, &mut d, &mut w, &ops[..cut], &mut split);
        let (eb, db) = (cbor(&e.snapshot()), cbor(&d.snapshot()));
        drop((e, d));
        let mut e = AlertEngine::restore(cfg, uncbor(&eb)).unwrap();
        let mut d = Dispatcher::restore(router(ROUTE_TOML), caps(), uncbor(&db)).unwrap();
        // Same state, same bytes: nothing was lost or reordered on the way.
        prop_assert!(cbor(&e.snapshot()) == eb, "engine snapshot changed by a round trip: {:?} vs {:?}", e.snapshot(), uncbor::<EngineSnapshot>(&eb));
        prop_assert!(cbor(&d.snapshot()) == db, "router snapshot changed by a round trip");
        run(&mut e, &mut d, &mut w, &ops[cut..], &mut split);

        if std::env::var_os("PROP_DEBUG").is_some() {
            let after = |v: &[String], k: &str| v.iter().filter(|e| e.contains(k)).count();
            eprintln!("ops {} cut {cut} events {} (resolved {}, wide {}) notifications {}", ops.len(), whole.events.len(),
                after(&whole.events, "Resolved"), after(&whole.events, "scope: Host") + after(&whole.events, "scope: Rack"), whole.notifications.len());
        }
        prop_assert_eq!(&whole.events, &split.events);
        prop_assert_eq!(&whole.notifications, &split.notifications);
    }
}

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
