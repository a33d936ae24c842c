//! The fleet stage's logic without Kafka: records round-trip, replays are
//! dropped, an orphaned partition holds time back, a new owner does not
//! re-deliver what its predecessor did, silences apply.

use alerts::{AlertEngine, Status};
use models::assess::{Assessment, HealthState, KINDS, Kind};

use super::stage::{self, FleetStage};
use super::*;
use crate::pipeline::alerting::AlertStage;

const HOUR: i64 = 3_600_000;
const T0: i64 = 1_800_000_000_000;

fn stage() -> FleetStage {
    let (cfg, _) = crate::pipeline::restart_tests::test_config(1);
    FleetStage::new(AlertStage::new(AlertEngine::new(cfg.alerts.engine.clone())))
}

fn restore(bytes: &[u8]) -> FleetStage {
    let (cfg, _) = crate::pipeline::restart_tests::test_config(1);
    FleetStage::restore(bytes, |b| AlertStage::restore(cfg.alerts.engine.clone(), b))
        .expect("restores")
}

fn assessment(gpu: &str, ts_ms: i64, hard: bool) -> Assessment {
    let mut components = [0.0; KINDS];
    if hard {
        components[Kind::HardFailure as usize] = 1.0;
    }
    let mut a = Assessment {
        ts_ms,
        gpu: gpu.into(),
        topo: Default::default(),
        risk: if hard { 1.0 } else { 0.0 },
        state: if hard {
            HealthState::Failing
        } else {
            HealthState::Healthy
        },
        kind: Kind::HardFailure,
        components,
        anomaly_grade: 0.0,
        eta_hours: None,
        reasons: Vec::new(),
        confirmed: 0,
    };
    a.topo.host = Some("node-1".into());
    a.topo.rack = Some("rack-1".into());
    a
}

fn round(partition: &str, horizon: Option<i64>, a: &[Assessment]) -> Record {
    Record::Round(Round {
        instance: "i1".into(),
        partitions: vec![partition.into()],
        horizon_ms: horizon,
        assessments: a.iter().map(WireAssessment::from).collect(),
        racks: Vec::new(),
        evicted: Vec::new(),
    })
}

fn firing(events: &[alerts::AlertEvent]) -> usize {
    events.iter().filter(|e| e.status == Status::Firing).count()
}

#[test]
fn a_round_keeps_its_topology_through_the_wire() {
    let r = round("t-0", Some(T0), &[assessment("GPU-a", T0, true)]);
    let back = decode(&encode(&r).expect("encodes"), 7).expect("decodes");
    let Record::Round(back) = back else {
        panic!("a round")
    };
    let a = back.assessments[0].clone().into_assessment();
    assert_eq!(a, assessment("GPU-a", T0, true), "the assessment whole");
    assert_eq!(a.topo.host.as_deref(), Some("node-1"));
    assert_eq!(a.topo.rack.as_deref(), Some("rack-1"));
    let bad = decode(b"\xff\x00junk", 42).expect_err("junk");
    assert!(bad.to_string().contains("offset 42"), "{bad}");
}

#[test]
fn a_replayed_round_pages_nothing_again() {
    let mut s = stage();
    let mut fired = 0;
    for k in 0..20 {
        let r = round("t-0", None, &[assessment("GPU-a", T0 + k * 30_000, true)]);
        fired += firing(&s.apply(r).events);
    }
    assert_eq!(fired, 1, "one hard failure pages once");
    // The partition's next owner replays the last ten samples.
    let mut again = 0;
    for k in 10..20 {
        let r = round("t-0", None, &[assessment("GPU-a", T0 + k * 30_000, true)]);
        again += s.apply(r).events.len();
    }
    assert_eq!(again, 0, "replayed assessments are dropped");
}

#[test]
fn an_orphaned_partition_holds_the_clock_where_it_stopped() {
    let mut s = stage();
    // Partition 0's owner died at T0 (mid-stream, so its horizon held).
    s.apply(round("t-0", Some(T0), &[assessment("GPU-a", T0, false)]));
    // Partition 1's owner goes on for hours.
    for k in 0..8 {
        let t = T0 + k * HOUR / 2;
        s.apply(round("t-1", None, &[assessment("GPU-b", t, false)]));
    }
    assert!(
        s.clock_ms() <= T0,
        "clock {} ran past the orphaned partition ({T0})",
        s.clock_ms()
    );
    let mut ev = Vec::new();
    s.tick(&mut ev);
    assert!(
        ev.iter().all(|e| e.kind != "gpu_lost"),
        "GPU-a is not lost while nobody reads its partition: {ev:?}"
    );
    // Its next owner reports it caught up: the clock moves on.
    s.apply(round(
        "t-0",
        None,
        &[assessment("GPU-a", T0 + 4 * HOUR, false)],
    ));
    assert!(s.clock_ms() >= T0 + 3 * HOUR, "clock {}", s.clock_ms());
}

#[test]
fn a_new_owner_delivers_only_what_its_predecessor_did_not() {
    let mut old = stage();
    old.apply(round("t-0", None, &[assessment("GPU-a", T0, false)]));
    let snap = old.snapshot().expect("snapshot");
    // After the checkpoint: the old owner pages GPU-a and publishes it,
    // then dies before GPU-b's page.
    let ra = round("t-0", None, &[assessment("GPU-a", T0 + 60_000, true)]);
    let delivered = old.apply(ra.clone()).events;
    assert_eq!(firing(&delivered), 1);
    let rb = round("t-0", None, &[assessment("GPU-b", T0 + 90_000, true)]);

    let mut new = restore(&snap);
    new.start_catch_up();
    assert!(new.apply(ra).events.is_empty(), "held while catching up");
    // The views' record says nothing about delivery; the receivers' does.
    assert!(
        new.apply(Record::Events(delivered.clone()))
            .events
            .is_empty()
    );
    let keys = delivered.iter().map(stage::key_of).collect();
    assert!(new.apply(Record::Delivered(keys)).events.is_empty());
    assert!(new.apply(rb).events.is_empty());
    let out = new.caught_up();
    assert_eq!(firing(&out), 1, "{out:?}");
    assert!(
        out.iter()
            .all(|e| e.labels.get("gpu").map(String::as_str) == Some("GPU-b")),
        "only GPU-b's page goes out: {out:?}"
    );
    assert!(!new.is_catching_up());
}

/// A page in the dead owner's outbox when it checkpointed, that no
/// receiver had taken: the outbox is on the dead machine, so the next
/// owner sends it again, unless the topic says it was delivered.
#[test]
fn a_page_its_predecessor_checkpointed_unsent_goes_out_from_the_next_owner() {
    let mut old = stage();
    let page = old
        .apply(round("t-0", None, &[assessment("GPU-a", T0, true)]))
        .events;
    assert_eq!(firing(&page), 1);
    old.handed(&page);
    let snap = old.snapshot().expect("snapshot");

    // Nothing after the checkpoint: delivered at takeover.
    let mut idle = restore(&snap);
    let pending = idle.take_unconfirmed();
    assert_eq!(firing(&pending), 1, "{pending:?}");
    // Later records to catch up on: held with them.
    let mut busy = restore(&snap);
    busy.start_catch_up();
    busy.apply(round(
        "t-0",
        None,
        &[assessment("GPU-b", T0 + 30_000, false)],
    ));
    assert_eq!(firing(&busy.caught_up()), 1);
    // The predecessor's receivers took it after the checkpoint: not again.
    let mut told = restore(&snap);
    told.start_catch_up();
    told.apply(Record::Delivered(page.iter().map(stage::key_of).collect()));
    assert!(told.caught_up().is_empty());
    // Confirmed before the checkpoint: nothing is carried.
    assert_eq!(old.confirmed().len(), 1);
    let mut after = restore(&old.snapshot().expect("snapshot"));
    assert!(after.take_unconfirmed().is_empty());
}

#[test]
fn silences_from_any_instance_reach_the_stage() {
    let mut s = stage();
    let sil = alerts::Silence::from_json(
        r#"{"matchers":[{"name":"host","value":"node-1","isRegex":false}],
            "startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z",
            "createdBy":"ops","comment":"maintenance"}"#,
        "s-1".into(),
    )
    .expect("silence");
    let applied = s.apply(Record::Silence(SilenceCommand::Add(WireSilence::from(
        &sil,
    ))));
    assert!(applied.silences_changed);
    assert_eq!(s.silences().len(), 1);
    assert_eq!(s.silences()[0].to_silence().expect("compiles"), sil);
    // A silenced GPU's hard failure does not page.
    let mut ev = Vec::new();
    for k in 0..10 {
        let r = round("t-0", None, &[assessment("GPU-a", T0 + k * 30_000, true)]);
        ev.extend(s.apply(r).events);
    }
    assert_eq!(firing(&ev), 0, "silenced: {ev:?}");
    let expired = s.apply(Record::Silence(SilenceCommand::Expire {
        id: "s-1".into(),
        at_ms: T0,
    }));
    assert!(expired.silences_changed);
}

#[test]
fn a_rack_split_over_instances_is_judged_once_every_piece_is_in() {
    let piece = |samples| features::expected::rack::RackReading {
        rack: "rack-1".into(),
        cluster: None,
        end_ms: T0 + 60_000,
        shift_c: 9.0,
        samples,
        hosts: 2,
        host_keys: Vec::new(),
    };
    let with_racks = |partition: &str, horizon: i64, racks: Vec<_>| {
        Record::Round(Round {
            instance: partition.into(),
            partitions: vec![partition.into()],
            horizon_ms: Some(horizon),
            assessments: Vec::new(),
            racks,
            evicted: Vec::new(),
        })
    };
    let mut s = stage();
    s.apply(with_racks("t-1", T0, Vec::new()));
    // t-0 is past the bucket; t-1 is not: its piece may still come.
    s.apply(with_racks("t-0", T0 + 120_000, vec![piece(40)]));
    assert_eq!(s.held_racks(), 1);
    // A replay of the same piece is not counted twice.
    s.apply(with_racks("t-0", T0 + 120_000, vec![piece(40)]));
    assert_eq!(s.held_racks(), 1);
    // t-1's piece, and t-1 past the bucket: judged together.
    s.apply(with_racks("t-1", T0 + 120_000, vec![piece(24)]));
    assert_eq!(s.held_racks(), 0);
    // Late pieces of a judged bucket are replays.
    s.apply(with_racks("t-1", T0 + 180_000, vec![piece(24)]));
    assert_eq!(s.held_racks(), 0);
}
