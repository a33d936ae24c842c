//! The pipeline's own tests: round cutting, and commands and checkpoints
//! travelling in order with the data.

use alerts::AlertEvent;

use super::alerting::AlertStage;
use super::shard::Shard;
use super::*;
use crate::checkpoint::{CheckpointStore, Offsets};

struct Null;
impl AlertSink for Null {
    fn deliver(&mut self, _: &[AlertEvent], _: i64) -> anyhow::Result<()> {
        Ok(())
    }
}

#[test]
fn long_batches_are_cut_into_rounds_of_a_minute() {
    let at = |ts: i64| features::Sample::new("GPU-a", ts);
    assert!(super::feed::round_cuts(&[]).is_empty());
    // 0 s .. 60 s is one round; 60.001 s starts the next, and so on
    // from each round's first sample (a late sample stays in its round).
    let batch: Vec<_> = [0, 30_000, 60_000, 60_001, 20_000, 120_001, 180_000, 400_000]
        .into_iter()
        .map(at)
        .collect();
    assert_eq!(super::feed::round_cuts(&batch), vec![3, 6, 7]);
}

#[test]
fn silences_reach_the_engine_in_order_and_a_checkpoint_restores_them() {
    let (cfg, pcfg) = super::restart_tests::test_config(1);
    let dir = std::env::temp_dir().join(format!("fw-pipe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let state = crate::state::SharedState::new();
    let stage = AlertStage::new(alerts::AlertEngine::new(cfg.alerts.engine.clone()));
    let p = Pipeline::start(
        pcfg.new_shards().expect("shards"),
        stage,
        Box::new(Null),
        state.clone(),
        Some(CheckpointStore::open(&dir).expect("store")),
    )
    .expect("start");
    let h = p.handle();
    let body = r#"{"matchers":[{"name":"rack","value":"r07","isRegex":false}],"startsAt":"2026-11-30T00:00:00Z","endsAt":"2026-11-30T04:00:00Z","createdBy":"alice","comment":"CDU swap"}"#;
    let s = alerts::Silence::from_json(body, "api-1".into()).expect("silence");
    let v = h.control(Command::AddSilence(s)).expect("added");
    assert_eq!(v["id"], "api-1");
    assert!(
        state
            .silences
            .read()
            .expect("lock")
            .iter()
            .any(|s| s.id == "api-1")
    );
    let e = h
        .control(Command::ExpireSilence("nope".into()))
        .expect_err("unknown id");
    assert!(
        matches!(&e, ControlError::UnknownSilence(id) if id == "nope"),
        "{e}"
    );
    let mut offsets = Offsets::new();
    offsets.insert(("t".into(), 0), 7);
    let w = h.checkpoint_now(offsets).expect("checkpoint");
    // The handle does not keep the pipeline alive: finish closes the
    // inputs, and the handle then reports a stopped pipeline.
    let h2 = h.clone();
    assert_eq!(w.offsets.get(&("t".to_string(), 0)), Some(&7));
    p.finish().expect("finish");
    assert!(matches!(
        h2.control(Command::ExpireSilence("api-1".into())),
        Err(ControlError::Stopped)
    ));
    let ckpt = CheckpointStore::open(&dir)
        .expect("store")
        .latest()
        .expect("read")
        .expect("one");
    assert_eq!(ckpt.shards.len(), 2);
    let stage = AlertStage::restore(cfg.alerts.engine.clone(), &ckpt.stage).expect("restore");
    assert!(stage.engine.silences().iter().any(|s| s.id == "api-1"));
    for b in &ckpt.shards {
        Shard::restore(b).expect("shard restores");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pipeline on the test config (`seed`), its alert events
/// collected.
pub(super) fn collecting_pipeline(seed: u64) -> (Pipeline, Events) {
    let (cfg, pcfg) = super::restart_tests::test_config(seed);
    let events = Events::default();
    let stage = AlertStage::new(alerts::AlertEngine::new(cfg.alerts.engine.clone()));
    let p = Pipeline::start(
        pcfg.new_shards().expect("shards"),
        stage,
        Box::new(events.clone()),
        crate::state::SharedState::new(),
        None,
    )
    .expect("start");
    (p, events)
}

/// Collects every alert event.
#[derive(Clone, Default)]
pub(super) struct Events(pub(super) std::sync::Arc<std::sync::Mutex<Vec<AlertEvent>>>);
impl AlertSink for Events {
    fn deliver(&mut self, events: &[AlertEvent], _: i64) -> anyhow::Result<()> {
        if let Ok(mut v) = self.0.lock() {
            v.extend_from_slice(events);
        }
        Ok(())
    }
}

/// Extreme timestamps anywhere in the stream, first included, in every
/// source mode: every stage survives them (no panic, no hang: the test
/// finishes) and none of them pages or moves the alert clock.
#[test]
fn extreme_timestamps_neither_panic_nor_page() {
    const EXTREMES: [i64; 8] = [
        i64::MIN,
        -1,
        0,
        1_000,
        253_402_300_799_999, // 9999-12-31
        4_102_444_800_000,   // 2100-01-01
        i64::MAX - 1,
        i64::MAX,
    ];
    let t0 = 1_793_491_200_000_i64;
    for (first, live, partitioned) in [
        (true, false, false),
        (false, false, true),
        (true, true, false),
    ] {
        let (mut p, events) = collecting_pipeline(3);
        p.set_live(live);
        let mut n = 0;
        for tick in 0..40_i64 {
            let mut batch: Vec<features::Sample> = (0..8)
                .map(|g| {
                    let mut s = features::Sample::new(format!("GPU-{g}"), t0 + tick * 30_000);
                    s.topo.host = Some(format!("node-{}", g / 4).into());
                    s.metrics.set(features::Field::GpuTemp, 50.0);
                    s
                })
                .collect();
            for (k, ts) in EXTREMES.iter().enumerate() {
                if (tick as usize) % EXTREMES.len() == k {
                    let liar = features::Sample::new(format!("GPU-liar-{n}"), *ts);
                    n += 1;
                    if first {
                        batch.insert(0, liar);
                    } else {
                        batch.push(liar);
                    }
                    // A fleet GPU's own clock jumping too.
                    batch[4].ts_ms = *ts;
                }
            }
            let horizon = partitioned.then_some(t0 + (tick - 1) * 30_000);
            p.send_from(batch, None, horizon).expect("send");
        }
        let (summary, _) = p.finish().expect("finish");
        assert!(summary.rejected > 0);
        let got = events.0.lock().expect("lock").clone();
        for e in &got {
            let ts = e.ts;
            assert!(
                (t0..t0 + 3_600_000).contains(&ts),
                "an event outside the fleet's time: {e:?}"
            );
            assert!(!e.dedup_key.contains("liar"), "a liar paged: {e:?}");
        }
    }
}
