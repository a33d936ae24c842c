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

/// One random case: a fleet of 2 racks x 2 hosts x 4 GPUs, two kinds (walk
/// columns 0..16 and 16..32), the walk's risk levels, then everything clear
/// for longer than any hold. Returns the first broken invariant.
fn run_case(
    walk: &[Vec<u8>],
    for_steps: i64,
    hold_steps: i64,
    silences: &[(usize, i64, i64)],
    host_min: u32,
    wide_alerts: u32,
) -> Result<Vec<AlertEvent>, String> {
    let cfg = format!(
        "[lifecycle.default]\nfor = \"{}s\"\nresolve_after = \"{}s\"\nflap_window = \"10m\"\nflap_resolve_after = \"5m\"\n\
         [correlation.host]\nmin_count = {}\nmin_fraction = 0.5\n[correlation.rack]\nmin_count = 2\nmin_fraction = 0.5\nmin_alerts = {wide_alerts}\n\
         [correlation.cluster]\nmin_count = 2\nmin_fraction = 1.0\nmin_alerts = {wide_alerts}\n{}",
        for_steps * 30,
        hold_steps * 30,
        host_min,
        silence_toml(silences)
    );
    let raw: RawEngineConfig = toml::from_str(&cfg).unwrap();
    let mut e = AlertEngine::new(raw.validate().unwrap());
    let fleet: Vec<Labels> = (0..2)
        .flat_map(|r| (0..2).flat_map(move |h| (0..4).map(move |g| labels(r, h, g))))
        .collect();
    let risk = [0.1, 0.1, 0.1, 0.1, 0.1, 0.7, 0.9, 0.99];
    let mut events: Vec<AlertEvent> = Vec::new();
    let mut step = |ts: i64, values: &dyn Fn(usize) -> f64| -> Result<(), String> {
        for (k, kind) in ["thermal", "power"].iter().enumerate() {
            for (i, l) in fleet.iter().enumerate() {
                let obs = Observation {
                    ts_ms: ts,
                    kind,
                    scope: Scope::Gpu,
                    labels: l,
                    severity: Severity::Critical,
                    value: values(k * 16 + i),
                    summary: "s",
                    reasons: &[],
                    eta_hours: None,
                    confirmed: false,
                };
                events.extend(e.observe(&obs));
            }
        }
        events.extend(e.tick(ts));
        let hidden = e.unaccounted(ts);
        if hidden.is_empty() {
            Ok(())
        } else {
            Err(format!("hidden at {ts}: {hidden:?}"))
        }
    };
    let steps = walk.len() as i64;
    for (s, row) in walk.iter().enumerate() {
        step(s as i64 * STEP, &|i| risk[usize::from(row[i])])?;
    }
    // Everything clears for longer than any hold (flap hold 5 min).
    for s in steps..steps + 20 {
        step(s * STEP, &|_| 0.0)?;
    }
    if std::env::var_os("PROP_DEBUG").is_some() {
        for ev in &events {
            eprintln!(
                "{} {:?} {} {}",
                ev.ts / STEP,
                ev.status,
                ev.dedup_key,
                ev.summary
            );
        }
    }
    let mut last: BTreeMap<&str, Status> = BTreeMap::new();
    for ev in &events {
        let prev = last.insert(&ev.dedup_key, ev.status);
        match ev.status {
            Status::Firing if prev == Some(Status::Firing) => {
                return Err(format!("{} fired twice (at {})", ev.dedup_key, ev.ts));
            }
            Status::Firing if silenced(ev, silences) => {
                return Err(format!("silenced alert delivered: {}", ev.dedup_key));
            }
            Status::Resolved if prev != Some(Status::Firing) => {
                return Err(format!("{} resolved without firing", ev.dedup_key));
            }
            _ => {}
        }
    }
    let open: Vec<_> = last.iter().filter(|(_, s)| **s == Status::Firing).collect();
    if !open.is_empty() {
        return Err(format!(
            "still firing after the condition cleared: {open:?}"
        ));
    }
    Ok(events)
}

proptest! {
    // A fixed seed: the same cases on every run, so a failure here is a
    // regression, not luck; `PROPTEST_RNG_SEED` explores other streams.
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(
            std::env::var("PROPTEST_RNG_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(29),
        ),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_streams_keep_the_invariants(
        walk in proptest::collection::vec(proptest::collection::vec(0u8..8, 32), 20..60),
        for_steps in 0i64..3,
        hold_steps in 0i64..3,
        silences in proptest::collection::vec((0usize..2, 0i64..50, 1i64..20), 0..3),
        host_min in 2u32..5,
        wide_alerts in 1u32..6,
    ) {
        if let Err(broken) = run_case(&walk, for_steps, hold_steps, &silences, host_min, wide_alerts) {
            prop_assert!(false, "{}", broken);
        }
    }
}

/// The stream a random run found on 2026-12-05 (CI at 616af1a): the rack
/// alert `forewarn/rack/r1/power` fired twice without a resolve between.
#[test]
fn a_rack_alert_fires_once_until_it_resolves() {
    let walk: Vec<Vec<u8>> = [
        "00000000000000000000000000000006",
        "00000000000000000001432450473615",
        "17275330267273423440004623211662",
        "51632333064777714574115654571406",
        "26713114262704504746432607314721",
        "41611136416152155016143356725255",
        "52017112204115402250671062103412",
        "66225632536045654411742230044717",
        "34241146300052175133062047746525",
        "53134137414275476125452320123373",
        "04005237717574244625527671500510",
        "33355251400272260205532335043322",
        "14101212211003621021624320266325",
        "70463457543647062272661530713276",
        "04455210247726502514720137417245",
        "11010002107156511551221252235271",
        "41113655116051640642706446640756",
        "34201122276453637064310055122324",
        "70144165543772130554122423671341",
        "13602034142501344774247472627367",
        "14440733225775050230005732073301",
        "61445374741322712562470175716240",
        "74523127525046043313040335176337",
    ]
    .iter()
    .map(|row| row.bytes().map(|b| b - b'0').collect())
    .collect();
    if let Err(broken) = run_case(&walk, 1, 0, &[(1, 39, 1)], 2, 1) {
        panic!("{broken}");
    }
}
