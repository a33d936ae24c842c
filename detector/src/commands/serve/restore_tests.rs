//! Restore falls back past a checkpoint damaged in any part, resumes at
//! the offsets of the one it used, and refuses to start empty when none
//! restores; saved silences come back on top.

use std::path::{Path, PathBuf};

use alerts::{AlertEvent, AlertSystem};
use datasets::simulator::{SimConfig, Simulator};

use super::restore_or_new;
use crate::checkpoint::{CheckpointStore, Offsets};
use crate::config::Config;
use crate::pipeline::alerting::AlertStage;
use crate::pipeline::{AlertSink, Command, Pipeline};

struct Null;

impl AlertSink for Null {
    fn deliver(&mut self, _: &[AlertEvent], _: i64) -> anyhow::Result<()> {
        Ok(())
    }
}

fn offsets(n: i64) -> Offsets {
    let mut o = Offsets::new();
    o.insert(("telemetry".into(), 0), n);
    o
}

fn config(dir: &Path) -> Config {
    let (mut cfg, _) = crate::pipeline::restart_tests::test_config(3);
    cfg.shards = 2;
    cfg.checkpoint_dir = Some(dir.join("ckpt"));
    cfg.silences_file = dir
        .join("ckpt")
        .join(crate::silence_file::IN_CHECKPOINT_DIR);
    cfg
}

fn system(cfg: &Config, dir: &Path) -> AlertSystem {
    AlertSystem::open_in(&cfg.alerts, &dir.join("outbox")).expect("alert system")
}

/// One checkpoint of a `gpus`-GPU fleet after `hours` of telemetry.
fn one_checkpoint(cfg: &Config, dir: &Path, gpus: usize, hours: f64) {
    let sys = system(cfg, dir);
    let start = restore_or_new(cfg, &sys, None).expect("fresh");
    let mut p = Pipeline::start(
        start.shards,
        start.stage,
        Box::new(Null),
        crate::state::SharedState::new(),
        start.store,
    )
    .expect("start");
    let mut sim = Simulator::new(SimConfig {
        gpus,
        hours,
        seed: 9,
        ..SimConfig::default()
    })
    .expect("sim");
    let mut tick = Vec::new();
    while sim.next_tick(&mut tick).is_some() {
        p.send(std::mem::take(&mut tick)).expect("send");
    }
    p.flush().expect("flush");
    p.handle().checkpoint_now(offsets(1)).expect("checkpoint");
    p.finish().expect("finish");
}

/// What the checksum costs at restore: `cargo test --release -p detector
/// --lib -- --ignored --nocapture restore_cost` (FOREWARN_RESTORE_GPUS,
/// default 2000 GPUs, 2 h of telemetry).
#[test]
#[ignore = "a measurement"]
fn restore_cost() {
    use std::time::Instant;
    let gpus = std::env::var("FOREWARN_RESTORE_GPUS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = std::env::temp_dir().join(format!("fw-restore-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = config(&dir);
    one_checkpoint(&cfg, &dir, gpus, 2.0);
    let path = files(&dir)[0].clone();
    let bytes = std::fs::read(&path).expect("read");
    let best = |f: &mut dyn FnMut()| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min)
    };
    let crc = best(&mut || {
        std::hint::black_box(crc32fast::hash(&bytes));
    });
    let v3 = best(&mut || {
        crate::checkpoint::read(&path).expect("v3");
    });
    let c = crate::checkpoint::read(&path).expect("v3");
    let enc3 = best(&mut || {
        std::hint::black_box(crate::checkpoint::encode(&c).expect("v3"));
    });
    let enc2 = best(&mut || {
        std::hint::black_box(crate::checkpoint::encode_v2(&c).expect("v2"));
    });
    let v2_bytes = crate::checkpoint::encode_v2(&c).expect("v2");
    let v2_path = dir.join("v2.cbor");
    std::fs::write(&v2_path, &v2_bytes).expect("write v2");
    let v2 = best(&mut || {
        crate::checkpoint::read(&v2_path).expect("v2");
    });
    let sys = system(&cfg, &dir);
    let whole = best(&mut || {
        drop(restore_or_new(&cfg, &sys, None).expect("restore"));
    });
    eprintln!(
        "{gpus} GPUs: file {} bytes (format 2: {} bytes); crc32 {crc:.2} ms; encode: format 3 {enc3:.1} ms, format 2 {enc2:.1} ms; read+verify+decode envelope: format 3 {v3:.1} ms, format 2 {v2:.1} ms; whole restore {whole:.1} ms",
        bytes.len(),
        v2_bytes.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three checkpoints of a 24-GPU fleet, at offsets 100, 200, 300 (the
/// first with no silence, the last two with silence `api-1`).
fn three_checkpoints(cfg: &Config, dir: &Path) {
    let sys = system(cfg, dir);
    let start = restore_or_new(cfg, &sys, None).expect("fresh");
    assert!(start.resume.is_empty());
    let mut p = Pipeline::start(
        start.shards,
        start.stage,
        Box::new(Null),
        crate::state::SharedState::new(),
        start.store,
    )
    .expect("start");
    let mut sim = Simulator::new(SimConfig {
        gpus: 24,
        hours: 2.0,
        seed: 9,
        ..SimConfig::default()
    })
    .expect("sim");
    for n in 1..=3 {
        for _ in 0..40 {
            let mut tick = Vec::new();
            if sim.next_tick(&mut tick).is_some() {
                p.send(tick).expect("send");
            }
        }
        if n == 2 {
            let body = r#"{"matchers":[{"name":"rack","value":"r07","isRegex":false}],"startsAt":"2026-01-01T00:00:00Z","endsAt":"2126-01-01T00:00:00Z","createdBy":"alice","comment":"CDU swap"}"#;
            let s = alerts::Silence::from_json(body, "api-1".into()).expect("silence");
            p.handle().control(Command::AddSilence(s)).expect("silence");
        }
        p.flush().expect("flush");
        p.handle()
            .checkpoint_now(offsets(n * 100))
            .expect("checkpoint");
    }
    p.finish().expect("finish");
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let store = CheckpointStore::open(&dir.join("ckpt")).expect("store");
    store
        .newest_first()
        .expect("list")
        .into_iter()
        .map(|x| x.1)
        .collect()
}

/// Rewrites checkpoint `path` (with a valid checksum) after `f`: damage
/// inside an intact file.
fn damage(dir: &Path, path: &Path, f: impl FnOnce(&mut crate::checkpoint::Checkpoint)) {
    let mut c = crate::checkpoint::read(path).expect("read");
    f(&mut c);
    let mut store = CheckpointStore::open(&dir.join("ckpt")).expect("store");
    store.write(&c).expect("rewrite");
}

#[test]
fn a_damaged_part_falls_back_to_the_checkpoint_before_and_its_offsets() {
    let dir = std::env::temp_dir().join(format!("fw-restore-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = config(&dir);
    three_checkpoints(&cfg, &dir);
    let f = files(&dir);
    assert_eq!(f.len(), 3);

    // Whole: the newest.
    let sys = system(&cfg, &dir);
    let s = restore_or_new(&cfg, &sys, None).expect("restore");
    assert_eq!(s.resume, offsets(300));
    assert!(s.shards.iter().map(|x| x.gpu_count()).sum::<usize>() > 0);
    drop(s);

    // A shard blob of the newest does not decode: the one before, with its
    // offsets (Kafka seeks back to them).
    damage(&dir, &f[0], |c| c.shards[1] = vec![0xa1, 0x01]);
    let s = restore_or_new(&cfg, &sys, None).expect("falls back");
    assert_eq!(s.resume, offsets(200));
    drop(s);

    // The next one's alert stage, and its file torn: the oldest. Saved
    // silences (api-1, added after the oldest checkpoint) still come back.
    damage(&dir, &f[1], |c| c.stage = vec![1, 2, 3]);
    let s = restore_or_new(&cfg, &sys, None).expect("falls back twice");
    assert_eq!(s.resume, offsets(100));
    assert!(s.stage.engine.silences().iter().any(|x| x.id == "api-1"));
    drop(s);
    let bytes = std::fs::read(&f[1]).expect("read");
    std::fs::write(&f[1], &bytes[..bytes.len() / 2]).expect("tear");
    let s = restore_or_new(&cfg, &sys, None).expect("falls back");
    assert_eq!(s.resume, offsets(100));
    drop(s);

    // A bad router snapshot in the last one: nothing restores, and start-up
    // says so, naming every file, rather than starting empty.
    damage(&dir, &f[2], |c| c.sink = vec![0xff; 4]);
    let e = format!(
        "{:#}",
        restore_or_new(&cfg, &sys, None).err().expect("fails")
    );
    assert!(e.contains("none of the 3 checkpoints"), "{e}");
    for p in &f {
        assert!(e.contains(&p.display().to_string()), "{e}");
    }
    assert!(e.contains("move the directory away"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn another_shard_count_is_a_config_error_not_damage() {
    let dir = std::env::temp_dir().join(format!("fw-restore-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = config(&dir);
    three_checkpoints(&cfg, &dir);
    let f = files(&dir);
    // The newest is damaged, the one before has another shard count: stop
    // there, do not fall back further.
    std::fs::write(&f[0], b"\xa3garbage").expect("tear");
    let mut more = cfg.clone();
    more.shards = 3;
    let sys = system(&cfg, &dir);
    let e = format!(
        "{:#}",
        restore_or_new(&more, &sys, None).err().expect("fails")
    );
    assert!(e.contains("has 2 shards but pipeline.shards = 3"), "{e}");
    assert!(e.contains(&f[1].display().to_string()), "{e}");
    // A second process on the same directories is refused.
    let _held = CheckpointStore::open(&dir.join("ckpt")).expect("store");
    let e = format!(
        "{:#}",
        restore_or_new(&cfg, &sys, None).err().expect("locked")
    );
    assert!(e.contains("is locked by another forewarn process"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn silences_survive_a_restart_without_checkpoints() {
    let dir = std::env::temp_dir().join(format!("fw-restore-sil-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = config(&dir);
    cfg.checkpoint_dir = None;
    cfg.silences_file = dir.join("forewarn-silences.json");
    let run = |add: Option<&str>| -> AlertStage {
        let sys = system(&cfg, &dir);
        let start = restore_or_new(&cfg, &sys, None).expect("start");
        let stage = start.stage;
        if let Some(id) = add {
            let p = Pipeline::start(
                start.shards,
                stage,
                Box::new(Null),
                crate::state::SharedState::new(),
                None,
            )
            .expect("start");
            let body = r#"{"matchers":[{"name":"host","value":"h1","isRegex":false}],"startsAt":"2026-01-01T00:00:00Z","endsAt":"2126-01-01T00:00:00Z","createdBy":"bob","comment":"reimage"}"#;
            let s = alerts::Silence::from_json(body, id.into()).expect("silence");
            p.handle().control(Command::AddSilence(s)).expect("add");
            p.handle()
                .control(Command::ExpireSilence("nope".into()))
                .expect_err("unknown");
            p.finish().expect("finish");
            return AlertStage::new(alerts::AlertEngine::new(cfg.alerts.engine.clone()));
        }
        stage
    };
    assert!(run(None).engine.silences().is_empty());
    run(Some("api-7"));
    let back = run(None);
    let ids: Vec<&str> = back
        .engine
        .silences()
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(ids, ["api-7"]);
    let _ = std::fs::remove_dir_all(&dir);
}
