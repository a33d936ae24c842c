use super::*;
use crate::simulator::{SimEventKind, Simulator};

fn small(name: &str, seed: u64) -> ScenarioRun {
    let mut run = scenario(name, seed, true).expect("known scenario");
    run.config.gpus = 32;
    run
}

#[test]
fn every_name_builds_and_unknown_names_do_not() {
    for name in NAMES {
        let run = scenario(name, 1, true).expect("known");
        assert_eq!(run.name, name);
        assert!(Simulator::new(run.config).is_ok(), "{name}");
    }
    assert!(scenario("nope", 1, false).is_none());
    assert_eq!(suite(1, true).len(), NAMES.len() - NOT_IN_SUITE.len());
}

#[test]
fn seeds_differ_per_scenario_and_per_suite_seed() {
    let a = scenario("quiet", 1, true).expect("quiet").config.seed;
    let b = scenario("quiet", 2, true).expect("quiet").config.seed;
    let c = scenario("thermal", 1, true).expect("thermal").config.seed;
    assert_ne!(a, b);
    assert_ne!(a, c);
}

#[test]
fn replacement_pairs_newcomers_with_incumbent_twins() {
    let mut run = scenario("replacement", 3, true).expect("replacement");
    run.config.hours = 20.0;
    let sim = Simulator::new(run.config).expect("valid");
    let newcomers: Vec<_> = sim.gpus().iter().filter(|g| g.replaces.is_some()).collect();
    assert!(newcomers.len() >= 2, "{} newcomers", newcomers.len());
    for n in &newcomers {
        let joined = n.active_from_ms.expect("a newcomer has a join time");
        let mine = sim
            .labels()
            .iter()
            .find(|l| l.gpu.as_ref() == Some(&n.uuid))
            .expect("the newcomer degrades");
        assert_eq!(mine.kind, FailureKind::HbmEcc);
        assert!(mine.onset_ms > joined);
        // Its twin: another GPU of the same host, same kind, same clock.
        let twin = sim.labels().iter().find(|l| {
            l.gpu.as_ref() != Some(&n.uuid)
                && l.host == mine.host
                && l.kind == FailureKind::HbmEcc
                && l.onset_ms == mine.onset_ms
                && l.failure_ms == mine.failure_ms
        });
        assert!(twin.is_some(), "no twin for {}", n.uuid);
        // The old GPU died before the newcomer joined.
        let old = n.replaces.as_ref().expect("replaces");
        let died = sim
            .labels()
            .iter()
            .find(|l| l.gpu.as_ref() == Some(old))
            .expect("old GPU label");
        assert_eq!(died.kind, FailureKind::SuddenDeath);
        assert!(died.failure_ms.is_some_and(|t| t < joined));
    }
    assert!(
        sim.events()
            .iter()
            .any(|e| matches!(e.kind, SimEventKind::GpuReplaced { .. }))
    );
}

/// A 64-GPU `replacement` run and its first newcomer.
fn replacement_with_newcomer() -> (Simulator, crate::simulator::GpuInfo) {
    let mut run = small("replacement", 5);
    run.config.gpus = 64;
    let sim = Simulator::new(run.config).expect("valid");
    let n = sim
        .gpus()
        .iter()
        .find(|g| g.replaces.is_some())
        .cloned()
        .expect("a newcomer");
    (sim, n)
}

#[test]
fn newcomers_report_from_their_join_time_and_degrade() {
    let (mut sim, n) = replacement_with_newcomer();
    let joined = n.active_from_ms.expect("join time");
    let mut buf = Vec::new();
    let (mut first, mut sbe_last) = (None, 0.0);
    while let Some(ts) = sim.next_tick(&mut buf) {
        for s in buf.iter().filter(|s| s.gpu == n.uuid) {
            first.get_or_insert(ts);
            if let Some(v) = s.metrics.get(features::Field::EccSbeVolTotal) {
                sbe_last = v;
            }
        }
        buf.clear();
    }
    assert_eq!(first, Some(joined));
    assert!(sbe_last > 0.0, "the newcomer's HBM never degraded");
}

#[test]
fn a_newcomer_and_its_twin_see_the_same_error_counts() {
    let (mut sim, n) = replacement_with_newcomer();
    let mine = sim
        .labels()
        .iter()
        .find(|l| l.gpu.as_ref() == Some(&n.uuid))
        .cloned()
        .expect("the newcomer degrades");
    let twin = sim
        .labels()
        .iter()
        .find(|l| {
            l.gpu.as_ref() != Some(&n.uuid)
                && l.host == mine.host
                && l.onset_ms == mine.onset_ms
                && l.kind == mine.kind
        })
        .and_then(|l| l.gpu.clone())
        .expect("a twin");
    let end = mine.failure_ms.expect("HBM fails");
    let mut buf = Vec::new();
    // SBE total of each at the onset tick and just before the failure.
    let mut at: std::collections::HashMap<(bool, bool), f64> = Default::default();
    while let Some(ts) = sim.next_tick(&mut buf) {
        for s in &buf {
            let who = if s.gpu == n.uuid {
                false
            } else if s.gpu == twin {
                true
            } else {
                continue;
            };
            let v = s
                .metrics
                .get(features::Field::EccSbeVolTotal)
                .unwrap_or(0.0);
            if ts == mine.onset_ms {
                at.insert((who, false), v);
            } else if ts == end - 30_000 {
                at.insert((who, true), v);
            }
        }
        buf.clear();
    }
    let delta = |who| at[&(who, true)] - at[&(who, false)];
    let (newcomer, incumbent) = (delta(false), delta(true));
    assert!(newcomer > 20.0, "newcomer gained {newcomer} SBEs");
    // Equal but for the background errors each GPU draws from the noise.
    assert!(
        (newcomer - incumbent).abs() <= 3.0,
        "newcomer {newcomer} vs twin {incumbent}"
    );
}

#[test]
fn ambient_change_warms_every_gpu_and_labels_nothing() {
    let run = small("ambient_change", 7);
    let cfg = run.config.clone();
    let (on, delta) = crate::simulator::ambient_change(&cfg).expect("an ambient change");
    assert!((4.0..=7.0).contains(&delta));
    let mut sim = Simulator::new(cfg.clone()).expect("valid");
    assert!(sim.labels().is_empty());
    let mut quiet_sim = Simulator::new(SimConfig {
        scenario: Scenario::Quiet,
        ..cfg
    })
    .expect("valid");
    let (mut hot, mut base) = (Vec::new(), Vec::new());
    while let Some(ts) = sim.next_tick(&mut hot) {
        quiet_sim.next_tick(&mut base);
        if ts > on + 3 * 3_600_000 {
            break;
        }
        hot.clear();
        base.clear();
    }
    let temp = |v: &[features::Sample]| {
        v.iter()
            .filter_map(|s| s.metrics.get(features::Field::GpuTemp))
            .sum::<f64>()
            / v.len().max(1) as f64
    };
    assert!(
        temp(&hot) > temp(&base) + 2.0,
        "{} vs {}",
        temp(&hot),
        temp(&base)
    );
}
