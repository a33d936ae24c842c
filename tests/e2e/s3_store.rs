//! The partition checkpoint store on a real S3-protocol server (moto, see
//! `tests/src/s3.rs`): the store itself (writes, the newest three kept,
//! falling back past a damaged object, one writer per partition through
//! its lease object), then `forewarn serve` on a real broker with
//! `checkpoint.store = "s3://..."`: the partitions' checkpoints land in the
//! bucket, and a second instance with its own checkpoint directory
//! restores each partition from them.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use detector::checkpoint::backend::Backend;
use detector::checkpoint::backend::object::ObjectBackend;
use detector::checkpoint::{PartitionCheckpoint, PartitionStore, partitions};
use forewarn_tests::broker::Broker;
use forewarn_tests::receiver::Receiver;
use forewarn_tests::s3::S3Server;
use forewarn_tests::service::{Service, kafka_config, wait_for};
use forewarn_tests::{forewarn, forewarn_bin, free_port, http_get, metric, scratch};

fn ckpt(p: i32, seq: u64, offset: i64) -> PartitionCheckpoint {
    PartitionCheckpoint {
        topic: "telemetry".into(),
        partition: p,
        seq,
        created_ms: 1,
        offset,
        gpus: 2,
        writer: String::new(),
        instance_seq: 0,
        shard: vec![seq as u8; 64],
    }
}

fn store(s3: &S3Server, bucket: &str, writer: &str) -> PartitionStore {
    let settings = s3.settings();
    let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let backend = ObjectBackend::s3_with(bucket, "e2e", &settings).expect("S3 backend");
    PartitionStore::with_backend(Backend::Object(backend)).with_writer(writer.into())
}

#[test]
fn the_partition_store_on_a_real_s3_server() {
    let dir = scratch("s3-store");
    let Some(s3) = S3Server::start(&dir) else {
        return;
    };
    s3.create_bucket("fw-store");
    let key = ("telemetry".to_string(), 0);
    let mut a = store(&s3, "fw-store", "host-a:/ckpt");
    let mut b = store(&s3, "fw-store", "host-b:/ckpt");
    assert_eq!(a.latest(&key).expect("empty"), None);
    for i in 0..5 {
        let seq = a.next_seq(&key).expect("seq");
        a.write(&ckpt(0, seq, 100 * i)).expect("write");
    }
    let folder = "e2e/partitions/telemetry-0/";
    assert_eq!(
        s3.list("fw-store", folder),
        [3, 4, 5]
            .iter()
            .map(|s| format!("{folder}checkpoint-{s:010}.cbor"))
            .chain([format!("{folder}owner")])
            .collect::<Vec<_>>(),
        "the newest three and the lease"
    );
    assert_eq!(a.latest(&key).expect("latest").map(|c| c.offset), Some(400));
    // A flipped byte in the newest object and a torn newer one: the
    // reader falls back to seq 4.
    let newest = format!("{folder}checkpoint-0000000005.cbor");
    let mut bytes = s3.get("fw-store", &newest).expect("object");
    let n = bytes.len();
    bytes[n - 10] ^= 0x40;
    s3.put("fw-store", &newest, &bytes);
    s3.put(
        "fw-store",
        &format!("{folder}checkpoint-0000000006.cbor"),
        b"\xa1torn",
    );
    assert_eq!(a.latest(&key).expect("latest").map(|c| c.seq), Some(4));
    // One writer per partition.
    let e = format!("{:#}", b.claim(&key).expect_err("held"));
    assert!(
        e.contains("s3://fw-store/e2e/partitions/telemetry-0/owner")
            && e.contains("held by host-a:/ckpt"),
        "{e}"
    );
    let e = format!("{:#}", b.write(&ckpt(0, 7, 1)).expect_err("refused"));
    assert!(e.contains("held by host-a:/ckpt"), "{e}");
    assert!(
        s3.get("fw-store", &format!("{folder}checkpoint-0000000007.cbor"))
            .is_none()
    );
    a.release(&key);
    assert!(s3.get("fw-store", &format!("{folder}owner")).is_none());
    b.claim(&key).expect("free after release");
    b.write(&ckpt(0, 7, 700)).expect("the new owner writes");
    assert_eq!(b.latest(&key).expect("latest").map(|c| c.offset), Some(700));
    // A bucket that does not exist: the error names the object's URL.
    let mut c = store(&s3, "no-such-bucket", "host-c:/ckpt");
    let e = format!("{:#}", c.write(&ckpt(1, 1, 1)).expect_err("no bucket"));
    assert!(
        e.contains("s3://no-such-bucket/e2e/partitions/telemetry-1/owner"),
        "{e}"
    );
    drop((a, b, c, s3));
    std::fs::remove_dir_all(&dir).ok();
}

/// `forewarn serve --config <config>` with the server's `AWS_*`
/// variables; its log in `<log>`.
fn serve(dir: &Path, config: &str, log: &str, s3: &S3Server, pd: u16) -> Service {
    let child = Command::new(forewarn_bin())
        .args(["serve", "--config", config])
        .current_dir(dir)
        .envs(s3.env())
        .env("FW_E2E_PD_KEY", "e2e-routing-key")
        .env("FW_E2E_SLACK_URL", format!("http://127.0.0.1:{pd}/slack"))
        .env("FOREWARN_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(log)).expect("serve log"))
        .spawn()
        .expect("spawn forewarn serve");
    Service(child)
}

/// A clean stop: the instance leaves the group, checkpointing and
/// releasing its partitions.
fn stop(svc: &mut Service) {
    forewarn_tests::terminate(&mut svc.0);
}

/// The newest checkpoint object of partition `p` in the bucket.
fn newest(s3: &S3Server, p: i32) -> Option<PartitionCheckpoint> {
    let folder = format!("fleet/partitions/telemetry-{p}/");
    let key = s3
        .list("fw-serve", &folder)
        .into_iter()
        .rfind(|k| k.ends_with(".cbor"))?;
    let bytes = s3.get("fw-serve", &key)?;
    Some(partitions::decode(&bytes, Path::new(&key)).expect("a whole checkpoint"))
}

#[test]
fn serve_checkpoints_partitions_to_s3_and_another_instance_restores_them() {
    let dir = scratch("s3-serve");
    let Some(s3) = S3Server::start(&dir.join("s3")) else {
        return;
    };
    let Some(broker) = Broker::start(&dir.join("broker")) else {
        return;
    };
    s3.create_bucket("fw-serve");
    broker.create_topic("telemetry", 2);
    forewarn_tests::simulate_fleet(&dir, 96, 3, 11, None);
    let pd = Receiver::start();
    let (api_a, api_b) = (free_port(), free_port());
    let config = |api: u16, ckpt: &str| {
        kafka_config(&broker.addr(), "forewarn-s3", 0, api, pd.port).replace(
            "dir = \"ckpt\"\ninterval_s = 0.5\n",
            &format!("dir = \"{ckpt}\"\ninterval_s = 0.5\nstore = \"s3://fw-serve/fleet\"\n"),
        )
    };
    std::fs::write(dir.join("a.toml"), config(api_a, "ckpt-a")).expect("config a");
    std::fs::write(dir.join("b.toml"), config(api_b, "ckpt-b")).expect("config b");
    assert!(
        std::fs::read_to_string(dir.join("a.toml"))
            .expect("config")
            .contains("s3://fw-serve/fleet")
    );

    let mut a = serve(&dir, "a.toml", "serve-a.log", &s3, pd.port);
    wait_for("instance A's API", Duration::from_secs(60), || {
        http_get(api_a, "/healthz").is_some()
    });
    forewarn(
        &[
            "replay",
            "--input",
            "sim/telemetry.jsonl",
            "--brokers",
            &broker.addr(),
            "--topic",
            "telemetry",
            // 3 s: several checkpoints while it streams in.
            "--speed",
            "3600",
            // Keyed by host, the fleet's 12 hosts spread over both
            // partitions (its few racks may not).
            "--key",
            "host",
        ],
        &dir,
    );
    wait_for(
        "A to catch up and checkpoint both partitions to the bucket",
        Duration::from_secs(180),
        || {
            http_get(api_a, "/metrics").is_some_and(|m| {
                m.contains("forewarn_consumer_lag{")
                    && metric(&m, "forewarn_consumer_lag") == 0.0
                    && metric(&m, "forewarn_checkpoints_total") >= 2.0
            }) && (0..2).all(|p| newest(&s3, p).is_some_and(|c| c.gpus > 0))
        },
    );
    stop(&mut a);
    let keys = s3.list("fw-serve", "fleet/");
    let at_stop: Vec<PartitionCheckpoint> = (0..2)
        .map(|p| newest(&s3, p).expect("a checkpoint"))
        .collect();
    eprintln!("bucket after A: {keys:?}");
    for c in &at_stop {
        assert!(c.writer.ends_with("ckpt-a"), "written by A: {c:?}");
        assert!(c.offset > 0 && c.gpus > 0, "{c:?}");
        let objects = keys
            .iter()
            .filter(|k| k.starts_with(&format!("fleet/partitions/telemetry-{}/", c.partition)))
            .filter(|k| k.ends_with(".cbor"))
            .count();
        assert!((1..=3).contains(&objects), "at most three kept: {keys:?}");
    }
    assert!(
        !keys.iter().any(|k| k.ends_with("/owner")),
        "a clean stop releases the leases: {keys:?}"
    );

    // Another instance, with its own checkpoint directory: every partition
    // is restored from the bucket at A's last offsets.
    let mut b = serve(&dir, "b.toml", "serve-b.log", &s3, pd.port);
    let log_b = dir.join("serve-b.log");
    wait_for(
        "B to restore both partitions from the bucket",
        Duration::from_secs(120),
        || {
            let log = std::fs::read_to_string(&log_b).unwrap_or_default();
            at_stop.iter().all(|c| {
                log.lines().any(|l| {
                    l.contains("partition state restored")
                        && l.contains(&format!("partition={}", c.partition))
                        && l.contains(&format!("offset={}", c.offset))
                })
            })
        },
    );
    wait_for("B to hold both leases", Duration::from_secs(30), || {
        (0..2).all(|p| {
            s3.get("fw-serve", &format!("fleet/partitions/telemetry-{p}/owner"))
                .is_some_and(|l| String::from_utf8_lossy(&l).contains("ckpt-b"))
        })
    });
    let log = std::fs::read_to_string(&log_b).unwrap_or_default();
    assert!(
        !log.contains("its state starts fresh"),
        "no partition started cold: {log}"
    );
    stop(&mut b);
    drop((broker, s3));
    std::fs::remove_dir_all(&dir).ok();
}
