//! A restart from a checkpoint loses no detection: the pipeline stopped
//! mid-run, restored from its checkpoint and fed the rest gives exactly the
//! alert events of an uninterrupted run (issue 7 item 3, issue 9 "no cold
//! start"). In process, no broker: the Kafka end-to-end test covers the
//! source; this pins the state that a checkpoint must carry.

use std::sync::{Arc, Mutex};

use alerts::{AlertEngine, AlertEvent};
use datasets::simulator::SimConfig;
use features::Sample;

use super::alerting::AlertStage;
use super::shard::Shard;
use super::{AlertSink, Pipeline, PipelineConfig};
use crate::checkpoint::{CheckpointStore, Offsets};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

impl AlertSink for Capture {
    fn deliver(&mut self, events: &[AlertEvent], _: i64) -> anyhow::Result<()> {
        let mut v = self.0.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        for e in events {
            v.push(serde_json::to_string(e)?);
        }
        Ok(())
    }
}

impl Capture {
    fn take(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }
}

fn fleet() -> Vec<Vec<Sample>> {
    super::test_support::sim_ticks(SimConfig {
        gpus: 96,
        hours: 12.0,
        seed: 5,
        failure_rate_per_gpu_day: 0.4,
        ..SimConfig::default()
    })
}

/// The default config and a 2-shard pipeline config (also used by the
/// pipeline's own tests).
pub(crate) fn test_config(seed: u64) -> (crate::config::Config, PipelineConfig) {
    let cfg = crate::config::RawConfig::default()
        .validate()
        .expect("defaults");
    let pcfg = PipelineConfig {
        shards: 2,
        features: cfg.features.clone(),
        seed,
        failure_model: None,
    };
    (cfg, pcfg)
}

/// Shards and alert stage from the newest checkpoint in `dir`.
fn restore(dir: &std::path::Path, cfg: &crate::config::Config) -> (Vec<Shard>, AlertStage) {
    let ckpt = CheckpointStore::open(dir)
        .expect("store")
        .latest()
        .expect("read")
        .expect("a checkpoint");
    let shards = ckpt
        .shards
        .iter()
        .map(|b| Shard::restore(b))
        .collect::<anyhow::Result<Vec<_>>>()
        .expect("shards");
    let stage = AlertStage::restore(cfg.alerts.engine.clone(), &ckpt.stage).expect("stage");
    (shards, stage)
}

fn start(
    shards: Vec<Shard>,
    stage: AlertStage,
    store: Option<CheckpointStore>,
) -> (Pipeline, Capture) {
    let sink = Capture::default();
    let p = Pipeline::start(
        shards,
        stage,
        Box::new(sink.clone()),
        crate::state::SharedState::new(),
        store,
    )
    .expect("start");
    (p, sink)
}

/// The alert events of one uninterrupted run over `ticks`, in order.
fn uninterrupted(pcfg: &PipelineConfig, stage: AlertStage, ticks: &[Vec<Sample>]) -> Vec<String> {
    let (mut p, sink) = start(pcfg.new_shards().expect("shards"), stage, None);
    for t in ticks {
        p.send(t.clone()).expect("send");
    }
    p.finish().expect("finish");
    sink.take()
}

#[test]
fn a_restored_pipeline_alerts_exactly_like_an_uninterrupted_one() {
    let (cfg, pcfg) = test_config(17);
    let engine = || AlertStage::new(AlertEngine::new(cfg.alerts.engine.clone()));
    let ticks = fleet();

    let reference = uninterrupted(&pcfg, engine(), &ticks);
    assert!(
        reference.iter().any(|e| e.contains("\"critical\"")),
        "the fleet pages"
    );

    for split_h in [1.0, 3.5] {
        let split = (split_h * 120.0) as usize;
        let dir = std::env::temp_dir().join(format!("fw-restart-{}-{split}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = CheckpointStore::open(&dir).expect("store");
        let (mut p, sink) = start(pcfg.new_shards().expect("shards"), engine(), Some(store));
        for t in &ticks[..split] {
            p.send(t.clone()).expect("send");
        }
        p.flush().expect("flush");
        p.handle()
            .checkpoint_now(Offsets::new())
            .expect("checkpoint");
        let mut got = sink.take();
        p.finish().expect("finish");

        let (shards, stage) = restore(&dir, &cfg);
        let (mut p, sink) = start(shards, stage, None);
        for t in &ticks[split..] {
            p.send(t.clone()).expect("send");
        }
        p.finish().expect("finish");
        got.extend(sink.take());
        let first_diff = reference
            .iter()
            .zip(&got)
            .position(|(a, b)| a != b)
            .unwrap_or(reference.len().min(got.len()));
        assert!(
            got == reference,
            "restart at {split_h} h: {} events vs {} uninterrupted; first difference at {first_diff}:\n  restarted: {:?}\n  reference: {:?}",
            got.len(),
            reference.len(),
            got.get(first_diff),
            reference.get(first_diff)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Kafka-like arrival: hosts split over two partitions, fetched in turns of
/// `k` ticks each, so one partition runs up to `k` ticks ahead, with the
/// horizon (the event time both have reached) sent along.
fn partitioned(ticks: &[Vec<Sample>], k: usize) -> Vec<(Vec<Sample>, Option<i64>)> {
    let part = |s: &Sample| {
        s.topo
            .host
            .as_deref()
            .map_or(0, |h| h.bytes().map(usize::from).sum::<usize>() % 2)
    };
    let mut streams: [Vec<Vec<Sample>>; 2] = [Vec::new(), Vec::new()];
    for t in ticks {
        let mut a = Vec::new();
        let mut b = Vec::new();
        for s in t {
            if part(s) == 0 {
                a.push(s.clone());
            } else {
                b.push(s.clone());
            }
        }
        streams[0].push(a);
        streams[1].push(b);
    }
    let mut reached = [i64::MIN; 2];
    let mut pos = [0usize; 2];
    let mut out = Vec::new();
    let mut turn = 0;
    while pos[0] < ticks.len() || pos[1] < ticks.len() {
        let p = if pos[turn] < ticks.len() {
            turn
        } else {
            1 - turn
        };
        let end = (pos[p] + k).min(ticks.len());
        let batch: Vec<Sample> = streams[p][pos[p]..end].concat();
        // As the Kafka source: the horizon from before this batch.
        let horizon = if pos[0] >= ticks.len() || pos[1] >= ticks.len() {
            None
        } else {
            Some(reached[0].min(reached[1]))
        };
        pos[p] = end;
        if let Some(m) = batch.iter().map(|s| s.ts_ms).max() {
            reached[p] = reached[p].max(m);
        }
        out.push((batch, horizon));
        turn = 1 - turn;
    }
    out
}

#[test]
fn partitioned_arrival_alerts_like_the_file() {
    let (cfg, pcfg) = test_config(17);
    let engine = || AlertStage::new(AlertEngine::new(cfg.alerts.engine.clone()));
    let ticks = fleet();
    let all = uninterrupted(&pcfg, engine(), &ticks);
    let key = |line: &String| -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        (v["status"] == "firing" && v["severity"] == "critical")
            .then(|| v["dedup_key"].as_str().unwrap_or("").to_owned())
    };
    let reference: std::collections::BTreeSet<String> = all.iter().filter_map(key).collect();
    for k in [4, 16, 60] {
        let (mut p, sink) = start(pcfg.new_shards().expect("shards"), engine(), None);
        for (batch, horizon) in partitioned(&ticks, k) {
            p.send_from(batch, None, horizon).expect("send");
        }
        p.finish().expect("finish");
        let got: std::collections::BTreeSet<String> = sink.take().iter().filter_map(key).collect();
        assert_eq!(got, reference, "pages with partitions {k} ticks apart");
    }
    // And stopped mid-run, restored from the checkpoint, continued.
    let batches = partitioned(&ticks, 16);
    for split in [batches.len() / 12, batches.len() / 4] {
        let dir = std::env::temp_dir().join(format!("fw-prestart-{}-{split}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = CheckpointStore::open(&dir).expect("store");
        let (mut p, sink) = start(pcfg.new_shards().expect("shards"), engine(), Some(store));
        for (batch, horizon) in &batches[..split] {
            p.send_from(batch.clone(), None, *horizon).expect("send");
        }
        p.flush().expect("flush");
        p.handle()
            .checkpoint_now(Offsets::new())
            .expect("checkpoint");
        let mut got: std::collections::BTreeSet<String> =
            sink.take().iter().filter_map(key).collect();
        p.finish().expect("finish");
        let (shards, stage) = restore(&dir, &cfg);
        let (mut p, sink) = start(shards, stage, None);
        for (batch, horizon) in &batches[split..] {
            p.send_from(batch.clone(), None, *horizon).expect("send");
        }
        p.finish().expect("finish");
        got.extend(sink.take().iter().filter_map(key));
        assert_eq!(got, reference, "pages after a restart at batch {split}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
