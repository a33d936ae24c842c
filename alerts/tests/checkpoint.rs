//! Checkpoints (issue #7): an engine and a dispatcher snapshotted at any
//! point, encoded as CBOR (as the detector stores them), decoded and
//! restored, go on to produce exactly the alert events and notifications of
//! a run that never stopped. Restores under a changed config, run-time
//! silences and version checks are in `checkpoint_changes.rs`.
#![allow(clippy::unwrap_used)]

use alerts::matcher::Matcher;
use alerts::{
    AlertEngine, AlertEvent, Dispatcher, EngineSnapshot, Notification, Observation, Reason, Scope,
    Severity, Silence,
};
use proptest::prelude::*;

mod checkpoint_support;
use checkpoint_support::*;

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
                    confirmed: false,
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
