//! Two forewarn consumers in one group on librdkafka's mock cluster (in
//! process, 127.0.0.1): the second joins and takes its partition warm from
//! the shared partition store; when the first stops (SIGTERM's path) it
//! leaves the group and the second takes the rest warm; neither pages
//! `gpu_lost` nor says anything more about a GPU whose partition moved
//! away (issue #31 item 1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use alerts::AlertEngine;
use datasets::simulator::{SimConfig, Simulator};
use rdkafka::ClientConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use tokio_util::sync::CancellationToken;

use super::{CheckpointPolicy, KafkaSettings, PartitionUnits};
use crate::checkpoint::{CheckpointStore, Offsets, PartitionKey, PartitionStore};
use crate::pipeline::Pipeline;
use crate::pipeline::alerting::AlertStage;
use crate::pipeline::shard::shard_of;
use crate::pipeline::test_support::Capture;
use crate::sources::DeadLetters;
use crate::state::{SharedState, State};

const TOPIC: &str = "telemetry";

fn key(p: i32) -> PartitionKey {
    (TOPIC.into(), p)
}

/// One forewarn instance: the Kafka source on its own thread.
struct Member {
    stop: CancellationToken,
    state: State,
    sink: Capture,
    thread: JoinHandle<anyhow::Result<u64>>,
}

fn member(brokers: &str, dir: &Path, shared: &Path) -> Member {
    let (cfg, pcfg) = crate::pipeline::restart_tests::test_config(9);
    let settings = KafkaSettings {
        brokers: brokers.to_owned(),
        topics: vec![TOPIC.into()],
        group_id: "forewarn-mock".into(),
        // Small fetches interleave the partitions' backlogs: one drained
        // first would run hours ahead, and the admission gate refuses the
        // other's new GPUs as stale (as it would in production).
        options: BTreeMap::from([("max.partition.fetch.bytes".to_owned(), "16384".to_owned())]),
        secrets: BTreeMap::new(),
        dead_letter_topic: None,
        fleet_topic: None,
        ready_lag: 0,
    };
    let (stop, state, sink) = (
        CancellationToken::new(),
        SharedState::new(),
        Capture::default(),
    );
    let (dir, shared) = (dir.to_owned(), shared.to_owned());
    let (st, sd, sk) = (state.clone(), stop.clone(), sink.clone());
    let thread = std::thread::spawn(move || -> anyhow::Result<u64> {
        let stage = AlertStage::new(AlertEngine::new(cfg.alerts.engine.clone()));
        let mut pipeline = Pipeline::start(
            pcfg.new_shards()?,
            stage,
            Box::new(sk),
            st.clone(),
            Some(CheckpointStore::open(&dir)?),
        )?;
        let store = Arc::new(Mutex::new(PartitionStore::open(&shared)?));
        pipeline.set_partition_store(store.clone());
        let policy = CheckpointPolicy {
            every: Duration::from_millis(300),
            resume: Offsets::new(),
            units: Some(PartitionUnits::new(store, pcfg, None)),
        };
        let mut dead = DeadLetters::open(None)?;
        let n = super::run(&settings, Some(policy), &st, &sd, &mut dead, &mut pipeline)?;
        pipeline.finish()?;
        Ok(n)
    });
    Member {
        stop,
        state,
        sink,
        thread,
    }
}

impl Member {
    fn partitions(&self) -> Vec<String> {
        self.state.partitions()
    }

    fn finish(self) -> anyhow::Result<u64> {
        self.stop.cancel();
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the source thread panicked"))?
    }
}

/// Waits up to `max` for `cond`; the time it took.
fn wait_for(what: &str, max: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < max, "{what}: not within {max:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    t.elapsed()
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fw-mock-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Produces a small fleet's telemetry (one sample per message, keyed by
/// GPU, partition by FNV of the GPU); returns messages and GPUs per
/// partition.
fn produce(brokers: &str) -> ([i64; 2], [BTreeMap<String, ()>; 2]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("producer");
    let mut sim = Simulator::new(SimConfig {
        // librdkafka's mock partitions keep about 5 MB: older messages
        // would be gone before the consumer reads them.
        gpus: 32,
        hours: 1.5,
        // A fleet that alerts before the hand-over (seeds 2, 3 and 7 do).
        seed: 3,
        failure_rate_per_gpu_day: 1.0,
        ..SimConfig::default()
    })
    .expect("sim");
    let (mut counts, mut gpus) = ([0i64; 2], [BTreeMap::new(), BTreeMap::new()]);
    let mut tick = Vec::new();
    while sim.next_tick(&mut tick).is_some() {
        for s in tick.drain(..) {
            let p = shard_of(&s.gpu, 2);
            let payload = serde_json::to_vec(&s).expect("json");
            let mut rec = BaseRecord::<[u8], [u8]>::to(TOPIC)
                .key(s.gpu.as_bytes())
                .payload(&payload)
                .partition(p as i32);
            loop {
                match producer.send(rec) {
                    Ok(()) => break,
                    Err((_, r)) => {
                        rec = r;
                        producer.poll(Duration::from_millis(5));
                    }
                }
            }
            counts[p] += 1;
            gpus[p].insert(s.gpu.to_string(), ());
        }
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    (counts, gpus)
}

#[test]
fn a_second_member_takes_its_partitions_warm_and_nothing_is_lost() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("info,librdkafka=warn")
        .with_test_writer()
        .try_init();
    let mock = MockCluster::new(1).expect("mock cluster");
    mock.create_topic(TOPIC, 2, 1).expect("topic");
    let brokers = mock.bootstrap_servers();
    assert!(
        brokers.contains("127.0.0.1") || brokers.contains("localhost"),
        "{brokers}"
    );
    let (counts, gpus) = produce(&brokers);
    let (dir_a, dir_b, shared) = (temp("a"), temp("b"), temp("shared"));
    let store = PartitionStore::open(&shared).expect("store");
    let offset_of = |p: i32| {
        store
            .latest(&key(p))
            .ok()
            .flatten()
            .map(|c| (c.offset, c.seq, c.gpus))
    };

    // A alone reads everything and checkpoints both partitions.
    let a = member(&brokers, &dir_a, &shared);
    wait_for(
        "A checkpoints all it read",
        Duration::from_secs(120),
        || (0..2).all(|p| offset_of(p).is_some_and(|o| o.0 == counts[p as usize])),
    );
    assert_eq!(a.partitions(), vec!["telemetry-0", "telemetry-1"]);
    let a_before = a.sink.all().len();
    // GPUs A holds per partition (the simulated fleet's failed GPUs that
    // went quiet for good are evicted, as in any run).
    let held: Vec<u64> = (0..2).map(|p| offset_of(p).map_or(0, |o| o.2)).collect();
    assert!(held[0] > 0 && held[1] > 0, "{held:?}");
    assert!(held.iter().sum::<u64>() as usize <= gpus[0].len() + gpus[1].len());

    // B joins: one partition each, B's restored from A's revoke checkpoint.
    let b = member(&brokers, &dir_b, &shared);
    let join = wait_for("B takes a partition", Duration::from_secs(60), || {
        b.partitions().len() == 1 && a.partitions().len() == 1
    });
    let moved: i32 = b.partitions()[0]
        .rsplit('-')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("partition");
    let stays = 1 - moved;
    let (off, _, n) = offset_of(moved).expect("moved partition's checkpoint");
    assert_eq!(off, counts[moved as usize], "B resumes where A stopped");
    // A's lag gauge (and readiness) count only the partition it kept.
    wait_for(
        "A's lag gauge drops the moved partition",
        Duration::from_secs(30),
        || {
            a.state.metrics.lags().keys().cloned().collect::<Vec<_>>()
                == vec![format!("{TOPIC}/{stays}")]
        },
    );
    assert_eq!(n, held[moved as usize], "A handed over every GPU");

    // A stops (SIGTERM's path): it leaves the group, B takes the rest warm.
    let seq_a = offset_of(stays).expect("A's partition").1;
    let t = Instant::now();
    let sink_a = a.sink.clone();
    let read_a = a.finish().expect("A stops cleanly");
    let takeover = wait_for("B takes A's partition", Duration::from_secs(60), || {
        b.partitions().len() == 2
    });
    let takeover = t.elapsed().max(takeover);
    let sink_b = b.sink.clone();
    let read_b = b.finish().expect("B stops cleanly");
    // B's stop checkpointed what it held: written by B (a newer seq than
    // A's last), with every GPU though B read (almost) nothing itself.
    assert!(offset_of(stays).is_some_and(|o| o.1 > seq_a + 1));
    for p in [0, 1] {
        let (off, _, n) = offset_of(p).expect("checkpoint");
        assert_eq!(off, counts[p as usize], "partition {p}");
        assert_eq!(n, held[p as usize], "partition {p} stayed warm");
    }
    assert!(
        read_b < (counts[0] + counts[1]) as u64 / 10,
        "B restored state, it did not re-read it ({read_b} samples)"
    );
    // Everything was read (once the mock's retention kept it all).
    assert!(
        read_a as i64 >= counts[0] + counts[1],
        "A read everything ({read_a})"
    );

    let (ea, eb) = (sink_a.all(), sink_b.all());
    // After the hand-over (the fleet has GPUs lost of their own before).
    let lost: Vec<_> = ea[a_before..]
        .iter()
        .chain(&eb)
        .filter(|e| e.kind == "gpu_lost")
        .map(|e| e.dedup_key.clone())
        .collect();
    assert!(lost.is_empty(), "paged as lost: {lost:?}");
    let about_moved: Vec<_> = ea[a_before..]
        .iter()
        .filter(|e| {
            e.labels
                .get("gpu")
                .is_some_and(|g| gpus[moved as usize].contains_key(g))
        })
        .map(|e| format!("{:?} {}", e.status, e.dedup_key))
        .collect();
    assert!(
        about_moved.is_empty(),
        "A spoke of GPUs it gave away: {about_moved:?}"
    );
    assert!(a_before > 0, "the fleet alerted before the hand-over");
    let bytes: Vec<u64> = (0..2)
        .map(|p| {
            store
                .newest_first(&key(p))
                .ok()
                .and_then(|v| v.first().and_then(|f| std::fs::metadata(&f.1).ok()))
                .map_or(0, |m| m.len())
        })
        .collect();
    eprintln!(
        "mock cluster: B joined and held its partition after {join:?}; after A stopped B held both within {takeover:?}; partition checkpoints {bytes:?} bytes for {held:?} GPUs"
    );
    for d in [dir_a, dir_b, shared] {
        let _ = std::fs::remove_dir_all(d);
    }
}
