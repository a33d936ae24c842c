//! Scenario tests of upward correlation (part of the engine's scenario
//! tests, [`super`]): a rack incident pages once, survivors surface when it
//! resolves, one GPU per host is no rack incident, the resolve hold, late
//! members.

use super::*;

#[test]
fn rack_cooling_incident_pages_once_for_the_rack() {
    let mut e = engine("[lifecycle.default]\nfor = \"2m\"\n");
    let fleet = Fleet::new(4, 8);
    let mut events = Vec::new();
    for step in 0..20 {
        let ts = step * 30_000;
        // Rack r1 heats from minute 2 on; the others stay cool.
        events.extend(fleet.step(&mut e, "thermal", ts, |l| {
            if l["rack"] == "r1" && ts >= 2 * MIN {
                0.95
            } else {
                0.1
            }
        }));
    }
    let fired = firing(&events);
    assert_eq!(fired.len(), 1, "{fired:#?}");
    let rack = fired[0];
    assert_eq!(
        (rack.scope, rack.dedup_key.as_str()),
        (Scope::Rack, "forewarn/rack/r1/thermal")
    );
    assert_eq!(
        rack.labels.get("cluster").map(String::as_str),
        Some("east-1")
    );
    assert_eq!(
        rack.reasons.iter().filter(|r| r.signal == "member").count(),
        8,
        "every host listed"
    );
    assert!(rack.summary.contains("8 of 8 hosts"), "{}", rack.summary);
    // Cooling: the rack resolves, and no member surfaces afterwards.
    let mut after = Vec::new();
    for step in 20..60 {
        after.extend(fleet.step(&mut e, "thermal", step * 30_000, |_| 0.1));
    }
    assert_eq!(after.len(), 1, "{after:#?}");
    assert_eq!(
        (after[0].status, after[0].scope),
        (Status::Resolved, Scope::Rack)
    );
}

#[test]
fn surviving_members_surface_when_the_rack_resolves() {
    let mut e = engine("[lifecycle.default]\nfor = \"1m\"\nresolve_after = \"1m\"\n");
    let fleet = Fleet::new(2, 4);
    let mut events = Vec::new();
    for step in 0..10 {
        events.extend(fleet.step(&mut e, "thermal", step * 30_000, |l| {
            if l["rack"] == "r0" { 0.95 } else { 0.1 }
        }));
    }
    assert_eq!(firing(&events).len(), 1);
    // All of r0 cools except one GPU of host 2.
    let mut later = Vec::new();
    for step in 10..20 {
        later.extend(fleet.step(&mut e, "thermal", step * 30_000, |l| {
            if l["gpu"] == "GPU-r0h2g5" { 0.95 } else { 0.1 }
        }));
    }
    let resolved: Vec<_> = later
        .iter()
        .filter(|e| e.status == Status::Resolved)
        .collect();
    let surfaced = firing(&later);
    assert_eq!(resolved.len(), 1, "{later:#?}");
    assert_eq!(resolved[0].scope, Scope::Rack);
    assert_eq!(surfaced.len(), 1, "{later:#?}");
    assert_eq!(surfaced[0].dedup_key, "forewarn/gpu/GPU-r0h2g5/thermal");
}

/// A rack alert from one alerting GPU on each of two hosts (the default
/// asks for four member alerts), then the lifecycle table.
const ONE_PER_HOST: &str =
    "[correlation.rack]\nmin_count = 2\nmin_fraction = 0.5\nmin_alerts = 2\n[lifecycle.default]\n";

#[test]
fn one_hot_gpu_on_each_of_two_hosts_is_two_gpu_alerts_not_a_rack_incident() {
    // Half of a 4-host rack has a hot GPU: by default that is two GPUs'
    // own faults, each delivered with its name; two hot GPUs on each of
    // the two hosts is the rack's.
    for (per_host, want) in [
        (1, vec![(Scope::Gpu, 5), (Scope::Gpu, 5)]),
        (2, vec![(Scope::Rack, 5)]),
    ] {
        let mut e = engine("[lifecycle.default]\nfor = \"5m\"\nresolve_after = \"10m\"\n");
        let fleet = Fleet::new(1, 4);
        let mut events = Vec::new();
        for step in 0..30 {
            let ts = step * 30_000;
            events.extend(fleet.step(&mut e, "thermal", ts, |l| {
                let g = l["gpu"].as_str();
                let hot = ["GPU-r0h0g", "GPU-r0h1g"]
                    .iter()
                    .any(|h| (0..per_host).any(|i| g == format!("{h}{i}")));
                if hot { 0.95 } else { 0.1 }
            }));
        }
        let got: Vec<_> = firing(&events)
            .iter()
            .map(|e| (e.scope, e.ts / MIN))
            .collect();
        assert_eq!(got, want, "{per_host} per host: {events:#?}");
    }
}

#[test]
fn a_rack_alert_holds_while_its_pending_members_come_and_go() {
    // Seen on a simulated fleet: a rack alert formed from one firing GPU and
    // a pending one on another host; each time the pending one dropped the
    // rack resolved, and it fired again when it came back. (Two member
    // alerts are enough here: the hold is under test, not the thresholds.)
    let mut e = engine(&format!(
        "{ONE_PER_HOST}for = \"5m\"\nresolve_after = \"10m\"\n"
    ));
    let fleet = Fleet::new(2, 4);
    let mut events = Vec::new();
    for step in 0..90 {
        let ts = step * 30_000;
        events.extend(fleet.step(&mut e, "thermal", ts, |l| {
            let hot = match l["gpu"].as_str() {
                "GPU-r0h0g0" => ts < 20 * MIN,
                // Pending from minute 3, drops at 7 (short of its `for`),
                // back from 8 until 20.
                "GPU-r0h1g0" => {
                    (3 * MIN..7 * MIN).contains(&ts) || (8 * MIN..20 * MIN).contains(&ts)
                }
                _ => false,
            };
            if hot { 0.95 } else { 0.1 }
        }));
    }
    let got: Vec<_> = events
        .iter()
        .map(|e| (e.status, e.scope, e.ts / MIN))
        .collect();
    // One rack episode: fired when the first GPU fired (minute 5, host 1
    // pending), kept through the gap, resolved a hold after its members
    // resolved (minute 30: 20 + their 10-minute hold) — no member surfaced.
    assert_eq!(
        got,
        [
            (Status::Firing, Scope::Rack, 5),
            (Status::Resolved, Scope::Rack, 40)
        ],
        "{events:#?}"
    );
    assert!(
        events[1].summary.contains("members no longer bad together"),
        "{}",
        events[1].summary
    );
}

#[test]
fn a_gpu_that_joins_a_rack_alert_hours_later_surfaces_on_its_own() {
    // Two hosts of a rack hot from the start (a rack alert); a GPU of the
    // rack's third host turns bad 3 h later while it still fires: news,
    // not more of that incident. One that turns bad 20 min in is folded.
    let mut e = engine(&format!(
        "{ONE_PER_HOST}for = \"5m\"\nresolve_after = \"10m\"\n"
    ));
    let fleet = Fleet::new(1, 4);
    let mut events = Vec::new();
    for step in 0..(5 * 120) {
        let ts = step * 30_000;
        events.extend(fleet.step(&mut e, "thermal", ts, |l| {
            let hot = match l["gpu"].as_str() {
                "GPU-r0h0g0" | "GPU-r0h1g0" => true,
                "GPU-r0h2g0" => ts >= 20 * MIN,
                "GPU-r0h3g0" => ts >= 180 * MIN,
                _ => false,
            };
            if hot { 0.95 } else { 0.1 }
        }));
    }
    let got: Vec<_> = firing(&events)
        .iter()
        .map(|e| (e.scope, e.labels.get("gpu").cloned(), e.ts / MIN))
        .collect();
    assert_eq!(
        got,
        [
            (Scope::Rack, None, 5),
            (Scope::Gpu, Some("GPU-r0h3g0".to_string()), 185)
        ],
        "{events:#?}"
    );
}
