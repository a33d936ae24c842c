//! Property tests over random alert streams (a small fleet, two kinds,
//! random risk walks, random silences):
//! - no incident fires twice without a resolve in between;
//! - every delivered incident is resolved once its condition clears;
//! - silenced alerts are never delivered;
//! - correlation never hides an alert: after every tick, each firing alert
//!   is delivered, or covered by a firing wider-scope alert, or muted
//!   (`AlertEngine::unaccounted` is empty), which covers the case of a
//!   wider-scope alert that resolved.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use alerts::{
    AlertEngine, AlertEvent, Labels, Observation, RawEngineConfig, Scope, Severity, Status,
};
use proptest::prelude::*;

const STEP: i64 = 30_000;

fn labels(r: usize, h: usize, g: usize) -> Labels {
    [
        ("gpu", format!("g{r}{h}{g}")),
        ("host", format!("h{r}{h}")),
        ("rack", format!("r{r}")),
        ("cluster", "c".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn silence_toml(silences: &[(usize, i64, i64)]) -> String {
    silences
        .iter()
        .map(|(h, start, len)| {
            format!(
                "[[silences]]\nmatchers = ['host=\"h0{h}\"']\nstarts_at = \"{}\"\nends_at = \"{}\"\ncreated_by = \"p\"\ncomment = \"c\"\n",
                alerts::time::format_rfc3339(start * STEP),
                alerts::time::format_rfc3339((start + len) * STEP)
            )
        })
        .collect()
}

/// Firing events delivered while a silence matching them was active.
fn silenced(ev: &AlertEvent, silences: &[(usize, i64, i64)]) -> bool {
    silences.iter().any(|(h, start, len)| {
        ev.labels.get("host").map(String::as_str) == Some(&format!("h0{h}"))
            && ev.ts >= start * STEP
            && ev.ts < (start + len) * STEP
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_streams_keep_the_invariants(
        walk in proptest::collection::vec(proptest::collection::vec(0u8..8, 32), 20..60),
        for_steps in 0i64..3,
        hold_steps in 0i64..3,
        silences in proptest::collection::vec((0usize..2, 0i64..50, 1i64..20), 0..3),
        host_min in 2u32..5,
    ) {
        let cfg = format!(
            "[lifecycle.default]\nfor = \"{}s\"\nresolve_after = \"{}s\"\nflap_window = \"10m\"\nflap_resolve_after = \"5m\"\n\
             [correlation.host]\nmin_count = {}\nmin_fraction = 0.5\n[correlation.rack]\nmin_count = 2\nmin_fraction = 0.5\n\
             [correlation.cluster]\nmin_count = 2\nmin_fraction = 1.0\n{}",
            for_steps * 30, hold_steps * 30, host_min, silence_toml(&silences)
        );
        let raw: RawEngineConfig = toml::from_str(&cfg).unwrap();
        let mut e = AlertEngine::new(raw.validate().unwrap());
        // 2 racks x 2 hosts x 4 GPUs = 16 GPUs, two kinds (walk columns 0..16 and 16..32).
        let fleet: Vec<Labels> = (0..2).flat_map(|r| (0..2).flat_map(move |h| (0..4).map(move |g| labels(r, h, g)))).collect();
        let risk = [0.1, 0.1, 0.1, 0.1, 0.1, 0.7, 0.9, 0.99];
        let mut events: Vec<AlertEvent> = Vec::new();
        let step_fn = |e: &mut AlertEngine, ts: i64, values: &dyn Fn(usize) -> f64, events: &mut Vec<AlertEvent>| {
            for (k, kind) in ["thermal", "power"].iter().enumerate() {
                for (i, l) in fleet.iter().enumerate() {
                    let obs = Observation { ts_ms: ts, kind, scope: Scope::Gpu, labels: l, severity: Severity::Critical,
                        value: values(k * 16 + i), summary: "s", reasons: &[], eta_hours: None, confirmed: false };
                    events.extend(e.observe(&obs));
                }
            }
            events.extend(e.tick(ts));
            let hidden = e.unaccounted(ts);
            assert!(hidden.is_empty(), "hidden at {ts}: {hidden:?}");
        };
        let steps = walk.len() as i64;
        for (s, row) in walk.iter().enumerate() {
            step_fn(&mut e, s as i64 * STEP, &|i| risk[row[i] as usize], &mut events);
        }
        // Everything clears for longer than any hold (flap hold 5 min).
        for s in steps..steps + 20 {
            step_fn(&mut e, s * STEP, &|_| 0.0, &mut events);
        }
        let mut last: BTreeMap<&str, Status> = BTreeMap::new();
        for ev in &events {
            let prev = last.insert(&ev.dedup_key, ev.status);
            match ev.status {
                Status::Firing => prop_assert!(prev != Some(Status::Firing), "{} fired twice", ev.dedup_key),
                Status::Resolved => prop_assert_eq!(prev, Some(Status::Firing), "{} resolved without firing", &ev.dedup_key),
            }
            if ev.status == Status::Firing {
                prop_assert!(!silenced(ev, &silences), "silenced alert delivered: {}", ev.dedup_key);
            }
        }
        if std::env::var_os("PROP_DEBUG").is_some() {
            let wide = events.iter().filter(|e| e.scope != Scope::Gpu).count();
            eprintln!("events {} wide {wide}", events.len());
        }
        let open: Vec<_> = last.iter().filter(|(_, s)| **s == Status::Firing).collect();
        prop_assert!(open.is_empty(), "still firing after the condition cleared: {:?}", open);
    }
}
