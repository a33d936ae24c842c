//! Partition units hand over warm (issue #31 item 1): partition P revoked
//! on instance A and assigned to instance B, which restores it from the
//! shared partition store, leaves B with exactly A's state for P's GPUs,
//! pages what one instance holding everything pages, and neither A nor B
//! raises `gpu_lost` because P moved. In process, no broker.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use alerts::{AlertEngine, AlertEvent};
use datasets::simulator::SimConfig;
use features::Sample;

use super::alerting::AlertStage;
use super::restart_tests::test_config;
use super::shard::{Shard, shard_of};
use super::test_support::{Capture, sim_ticks};
use super::{Pipeline, PipelineConfig};
use crate::checkpoint::{CheckpointStore, Offsets, PartitionKey, PartitionStore};

fn key(p: i32) -> PartitionKey {
    ("telemetry".into(), p)
}

/// The partition of a GPU, as a producer keyed by GPU UUID would pick.
fn part_of(s: &Sample) -> i32 {
    shard_of(&s.gpu, 2) as i32
}

fn fleet(hours: f64) -> Vec<Vec<Sample>> {
    sim_ticks(SimConfig {
        gpus: 96,
        hours,
        seed: 11,
        failure_rate_per_gpu_day: 0.5,
        ..SimConfig::default()
    })
}

/// One instance: a pipeline with a checkpoint directory of its own and the
/// shared partition store.
struct Instance {
    p: Pipeline,
    sink: Capture,
    store: Arc<Mutex<PartitionStore>>,
    /// Next offset per partition (one "message" per tick and partition).
    offsets: Offsets,
}

impl Instance {
    fn start(
        pcfg: &PipelineConfig,
        stage: AlertStage,
        dir: &std::path::Path,
        shared: &std::path::Path,
    ) -> Self {
        let sink = Capture::default();
        let store = CheckpointStore::open(dir).expect("instance store");
        let mut p = Pipeline::start(
            pcfg.new_shards().expect("shards"),
            stage,
            Box::new(sink.clone()),
            crate::state::SharedState::new(),
            Some(store),
        )
        .expect("start");
        let store = Arc::new(Mutex::new(
            PartitionStore::open(shared).expect("partition store"),
        ));
        p.set_partition_store(store.clone());
        Instance {
            p,
            sink,
            store,
            offsets: Offsets::new(),
        }
    }

    /// Takes partition `k`: its newest checkpoint if there is one (then
    /// returns the shard bytes it restored from), else a fresh unit.
    fn assign(&mut self, pcfg: &PipelineConfig, k: &PartitionKey) -> Option<Vec<u8>> {
        let mut store = self.store.lock().expect("store");
        store.claim(k).expect("claim");
        let restored = store
            .latest_with(k, |c| Shard::restore(&c.shard))
            .expect("read");
        drop(store);
        match restored {
            Some((c, shard)) => {
                self.offsets.insert(k.clone(), c.offset);
                self.p.adopt(k, shard).expect("adopt");
                Some(c.shard)
            }
            None => {
                self.p
                    .adopt(k, pcfg.new_unit(k).expect("unit"))
                    .expect("adopt");
                None
            }
        }
    }

    /// Feeds one tick's samples of the partitions in `owned`.
    fn feed(&mut self, tick: &[Sample], owned: &[i32]) {
        let batch: Vec<Sample> = tick
            .iter()
            .filter(|s| owned.contains(&part_of(s)))
            .cloned()
            .collect();
        for s in &batch {
            let id = self.p.partition_id(&key(part_of(s)));
            self.p.note_partition(&s.gpu, id);
        }
        for p in owned {
            *self.offsets.entry(key(*p)).or_insert(0) += 1;
        }
        self.p.send(batch).expect("send");
    }

    /// A revoke: checkpoint (writing `ks`' files), release their units.
    fn revoke(&mut self, ks: &[PartitionKey]) -> super::Written {
        self.p.flush().expect("flush");
        let w = self
            .p
            .handle()
            .checkpoint_release(self.offsets.clone(), ks.to_vec())
            .expect("checkpoint");
        self.p.release_units(ks);
        // The next assignment (without `ks`) settles the rebalance.
        self.p.settle_released().expect("settle");
        let mut store = self.store.lock().expect("store");
        for k in ks {
            store.release(k);
            self.offsets.remove(k);
        }
        w
    }
}

fn engine(cfg: &crate::config::Config) -> AlertStage {
    AlertStage::new(AlertEngine::new(cfg.alerts.engine.clone()))
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fw-units-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Critical pages (firing) of GPUs in partition `p`, by dedup key.
fn pages(events: &[AlertEvent], p: i32, gpus: &BTreeSet<(String, i32)>) -> BTreeSet<String> {
    events
        .iter()
        .filter(|e| {
            e.status == alerts::Status::Firing
                && e.severity == alerts::Severity::Critical
                && e.labels
                    .get("gpu")
                    .is_some_and(|g| gpus.contains(&(g.clone(), p)))
        })
        .map(|e| e.dedup_key.clone())
        .collect()
}

/// `gpu_lost` alerts that fired, of GPUs in partition `p`.
fn lost(events: &[AlertEvent], p: i32, gpus: &BTreeSet<(String, i32)>) -> BTreeSet<String> {
    events
        .iter()
        .filter(|e| {
            e.kind == "gpu_lost"
                && e.status == alerts::Status::Firing
                && e.labels
                    .get("gpu")
                    .is_some_and(|g| gpus.contains(&(g.clone(), p)))
        })
        .map(|e| e.dedup_key.clone())
        .collect()
}

#[test]
fn a_partition_moves_warm_and_nothing_is_lost() {
    let (cfg, pcfg) = test_config(23);
    let ticks = fleet(8.0);
    let gpus: BTreeSet<(String, i32)> = ticks
        .iter()
        .flatten()
        .map(|s| (s.gpu.to_string(), part_of(s)))
        .collect();
    let split = ticks.len() / 2;

    // The reference: one instance holds both partitions throughout.
    let (dir_r, shared_r) = (temp("r"), temp("r-shared"));
    let mut r = Instance::start(&pcfg, engine(&cfg), &dir_r, &shared_r);
    r.assign(&pcfg, &key(0));
    r.assign(&pcfg, &key(1));
    for t in &ticks {
        r.feed(t, &[0, 1]);
    }
    r.p.finish().expect("finish");
    let reference = r.sink.take();
    assert!(
        !pages(&reference, 0, &gpus).is_empty(),
        "partition 0's GPUs page in this fleet"
    );

    // A holds both, then P0 moves to B (same shared store).
    let (dir_a, dir_b, shared) = (temp("a"), temp("b"), temp("shared"));
    let mut a = Instance::start(&pcfg, engine(&cfg), &dir_a, &shared);
    assert_eq!(a.assign(&pcfg, &key(0)), None, "a fresh start");
    a.assign(&pcfg, &key(1));
    for t in &ticks[..split] {
        a.feed(t, &[0, 1]);
    }
    assert_eq!(a.p.partitions(), vec![key(0), key(1)]);
    let w = a.revoke(&[key(0)]);
    assert_eq!(a.p.partitions(), vec![key(1)]);
    let moved = w
        .partitions
        .iter()
        .find(|x| x.key == key(0))
        .expect("P0 written at the revoke")
        .clone();
    assert_eq!(moved.offset, split as i64);
    assert!(moved.gpus > 20, "{moved:?}");
    let mut got_a = a.sink.take();

    // B takes P0 warm: its state is A's, bit for bit.
    let mut b = Instance::start(&pcfg, engine(&cfg), &dir_b, &shared);
    let restored = b.assign(&pcfg, &key(0)).expect("B restores P0");
    assert_eq!(
        b.offsets.get(&key(0)),
        Some(&(split as i64)),
        "B resumes at A's offset"
    );
    let wb =
        b.p.handle()
            .checkpoint_now(b.offsets.clone())
            .expect("checkpoint B");
    let p0_b = b
        .store
        .lock()
        .expect("store")
        .latest(&key(0))
        .expect("read")
        .expect("B's P0");
    assert_eq!(wb.partitions.len(), 1);
    // Hash maps serialize in their own order, so A's bytes are compared
    // with them restored and written again (a fixed point).
    let a_state = Shard::restore(&restored)
        .expect("A's P0")
        .snapshot()
        .expect("snapshot");
    assert!(
        p0_b.shard == a_state,
        "B's state for P0's GPUs is not A's ({} bytes vs {})",
        p0_b.shard.len(),
        a_state.len()
    );
    assert_eq!(p0_b.gpus, moved.gpus);

    for t in &ticks[split..] {
        a.feed(t, &[1]);
        b.feed(t, &[0]);
    }
    a.p.finish().expect("finish a");
    b.p.finish().expect("finish b");
    let after_a = a.sink.take();
    let got_b = b.sink.take();

    // Moved is not lost: A says nothing more about P0's GPUs, and the
    // GPUs lost are those the single instance finds lost.
    assert!(
        after_a.iter().all(|e| e
            .labels
            .get("gpu")
            .is_none_or(|g| !gpus.contains(&(g.clone(), 0)))),
        "A still alerts on P0's GPUs after giving P0 away: {:?}",
        lost(&after_a, 0, &gpus)
    );
    got_a.extend(after_a);
    // No cold start: B pages P0's GPUs as the single instance does.
    let mut both = got_a.clone();
    both.extend(got_b.iter().cloned());
    assert_eq!(pages(&both, 0, &gpus), pages(&reference, 0, &gpus));
    assert_eq!(pages(&both, 1, &gpus), pages(&reference, 1, &gpus));
    for p in [0, 1] {
        assert_eq!(
            lost(&both, p, &gpus),
            lost(&reference, p, &gpus),
            "partition {p}"
        );
    }
    for d in [dir_r, shared_r, dir_a, dir_b, shared] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn without_partitions_the_pipeline_is_untouched() {
    // No partition noted: the FNV path, and no partition files.
    let (cfg, pcfg) = test_config(23);
    let (dir, shared) = (temp("plain"), temp("plain-shared"));
    let mut i = Instance::start(&pcfg, engine(&cfg), &dir, &shared);
    for t in fleet(1.0).iter().take(40) {
        i.p.send(t.clone()).expect("send");
    }
    let w =
        i.p.handle()
            .checkpoint_now(Offsets::new())
            .expect("checkpoint");
    assert!(w.partitions.is_empty());
    assert!(i.p.partitions().is_empty());
    let (summary, shards) = i.p.finish().expect("finish");
    assert_eq!(summary.gpus, 96);
    assert!(shards.iter().all(|s| s.gpu_count() > 0));
    for d in [dir, shared] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn units_export_their_scores_once_through_their_threads_writers() {
    let (cfg, pcfg) = test_config(23);
    let dir = temp("export");
    let settings = crate::export::ExportSettings {
        dir: dir.clone(),
        features: false,
        feature_sample_every: std::num::NonZeroU32::MIN,
        instance: "units".into(),
    };
    let mut p = Pipeline::start_with(
        pcfg.new_shards().expect("shards"),
        engine(&cfg),
        Box::new(Capture::default()),
        crate::state::SharedState::new(),
        None,
        Some(&settings),
    )
    .expect("start");
    // Three partitions on two threads: two units share a thread's writers.
    for k in [key(0), key(1), key(2)] {
        p.adopt(&k, pcfg.new_unit(&k).expect("unit"))
            .expect("adopt");
    }
    for t in fleet(1.0) {
        for s in &t {
            let id = p.partition_id(&key(shard_of(&s.gpu, 3) as i32));
            p.note_partition(&s.gpu, id);
        }
        p.send(t).expect("send");
    }
    let (summary, _) = p.finish().expect("finish");
    assert!(summary.assessments > 1000, "{summary:?}");
    assert_eq!(summary.gpus, 96, "units count in the summary");
    let rows: usize = datasets::export::list_files(&dir, "scores", i64::MIN, i64::MAX)
        .expect("scores")
        .iter()
        .flat_map(|f| datasets::export::read_file(&f.path).expect("read"))
        .map(|b| b.num_rows())
        .sum();
    assert_eq!(rows as u64, summary.assessments, "every score once");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn partitions_assigned_straight_back_keep_their_alerts() {
    // An eager rebalance revokes everything and assigns it again: nothing
    // may page twice, resolve, or go quiet because of it.
    let (cfg, pcfg) = test_config(23);
    let ticks = fleet(8.0);
    let split = ticks.len() / 2;
    let key_of = |e: &AlertEvent| format!("{:?} {}", e.status, e.dedup_key);
    let (dir_r, shared_r) = (temp("bounce-r"), temp("bounce-r-shared"));
    let mut r = Instance::start(&pcfg, engine(&cfg), &dir_r, &shared_r);
    r.assign(&pcfg, &key(0));
    r.assign(&pcfg, &key(1));
    for t in &ticks {
        r.feed(t, &[0, 1]);
    }
    r.p.finish().expect("finish");
    let reference: Vec<String> = r.sink.take().iter().map(key_of).collect();

    let (dir, shared) = (temp("bounce"), temp("bounce-shared"));
    let mut c = Instance::start(&pcfg, engine(&cfg), &dir, &shared);
    c.assign(&pcfg, &key(0));
    c.assign(&pcfg, &key(1));
    for t in &ticks[..split] {
        c.feed(t, &[0, 1]);
    }
    let open_before = c.sink.all().len();
    assert!(open_before > 0, "alerts before the rebalance");
    // Revoke all, then the same assignment: settled with nothing moved.
    c.p.flush().expect("flush");
    c.p.handle()
        .checkpoint_release(c.offsets.clone(), vec![key(0), key(1)])
        .expect("checkpoint");
    c.p.release_units(&[key(0), key(1)]);
    {
        let mut s = c.store.lock().expect("store");
        s.release(&key(0));
        s.release(&key(1));
    }
    assert!(c.assign(&pcfg, &key(0)).is_some() && c.assign(&pcfg, &key(1)).is_some());
    assert_eq!(
        c.p.settle_released().expect("settle"),
        0,
        "nothing handed over"
    );
    for t in &ticks[split..] {
        c.feed(t, &[0, 1]);
    }
    c.p.finish().expect("finish");
    let got: Vec<String> = c.sink.take().iter().map(key_of).collect();
    let count = |v: &[String]| {
        let mut m = std::collections::BTreeMap::new();
        for k in v {
            *m.entry(k.clone()).or_insert(0) += 1;
        }
        m
    };
    assert_eq!(
        count(&got),
        count(&reference),
        "the same events, each as often"
    );
    for d in [dir_r, shared_r, dir, shared] {
        let _ = std::fs::remove_dir_all(d);
    }
}
