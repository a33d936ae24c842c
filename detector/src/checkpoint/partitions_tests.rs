//! Tests of the partition checkpoint store.

use super::*;

/// A partition of `telemetry` (also the backend tests').
pub(crate) fn key(p: i32) -> PartitionKey {
    ("telemetry".into(), p)
}

/// A small checkpoint of partition `p` (also the backend tests').
pub(crate) fn ckpt(p: i32, seq: u64, offset: i64) -> PartitionCheckpoint {
    PartitionCheckpoint {
        topic: "telemetry".into(),
        partition: p,
        seq,
        created_ms: 1,
        offset,
        gpus: 2,
        writer: "me".into(),
        instance_seq: seq,
        shard: vec![seq as u8; 100],
    }
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fw-pstore-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

#[test]
fn writes_atomically_keeps_the_newest_and_falls_back_past_damage() {
    let root = temp("write");
    let mut store = PartitionStore::open(&root).expect("open");
    assert_eq!(store.latest(&key(3)).expect("none"), None);
    for i in 0..5 {
        let seq = store.next_seq(&key(3)).expect("seq");
        store.write(&ckpt(3, seq, 10 * i)).expect("write");
    }
    let seqs: Vec<u64> = store
        .newest_first(&key(3))
        .expect("list")
        .iter()
        .map(|x| x.0)
        .collect();
    assert_eq!(seqs, vec![5, 4, 3], "the newest KEEP are kept");
    assert_eq!(store.latest(&key(3)).expect("latest"), Some(ckpt(3, 5, 40)));
    assert!(
        root.join("partitions/telemetry-3/checkpoint-0000000005.cbor")
            .exists()
    );
    // A torn newest file and a flipped byte fall back to seq 4.
    let dir = store.dir_of(&key(3));
    fs::write(dir.join("checkpoint-0000000007.cbor"), b"\xa1torn").expect("write");
    let mut bytes = fs::read(dir.join("checkpoint-0000000005.cbor")).expect("read");
    let n = bytes.len();
    bytes[n - 10] ^= 0x40;
    fs::write(dir.join("checkpoint-0000000005.cbor"), &bytes).expect("write");
    assert_eq!(store.latest(&key(3)).expect("latest"), Some(ckpt(3, 4, 30)));
    // A check that refuses (a shard that does not restore) falls back too.
    let got = store
        .latest_with(&key(3), |c| {
            anyhow::ensure!(c.seq < 4, "refused");
            Ok(c.seq)
        })
        .expect("latest_with");
    assert_eq!(got.map(|x| x.1), Some(3));
    // Files an instance wrote past the instance checkpoint it restored
    // are passed over.
    let got = store
        .latest_where(
            &key(3),
            |c| c.writer == "me" && c.instance_seq > 3,
            |c| Ok(c.seq),
        )
        .expect("latest_where");
    assert_eq!(got.map(|x| x.1), Some(3));
    // Other partitions are apart.
    assert_eq!(store.latest(&key(4)).expect("none"), None);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn one_writer_per_partition_until_it_releases() {
    let root = temp("lock");
    let mut a = PartitionStore::open(&root).expect("a");
    let mut b = PartitionStore::open(&root).expect("b");
    a.claim(&key(0)).expect("a claims");
    fs::write(
        a.dir_of(&key(0)).join("checkpoint-0000000009.cbor.tmp"),
        b"x",
    )
    .expect("tmp");
    let e = b.claim(&key(0)).expect_err("held").to_string();
    assert!(e.contains("locked by another forewarn process"), "{e}");
    let e = b.write(&ckpt(0, 1, 5)).expect_err("refused").to_string();
    assert!(e.contains("locked"), "{e}");
    assert!(
        a.dir_of(&key(0))
            .join("checkpoint-0000000009.cbor.tmp")
            .exists(),
        "the holder's write in progress is untouched"
    );
    b.claim(&key(1)).expect("another partition is free");
    a.write(&ckpt(0, 1, 5)).expect("the owner writes");
    assert_eq!(a.owned(), vec![key(0)]);
    a.release(&key(0));
    assert!(!a.owns(&key(0)));
    b.claim(&key(0)).expect("free after release");
    assert!(
        !b.dir_of(&key(0))
            .join("checkpoint-0000000009.cbor.tmp")
            .exists()
    );
    assert_eq!(b.latest(&key(0)).expect("read").map(|c| c.offset), Some(5));
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn store_urls() {
    let dir = |p: &str| StoreUrl::Dir(PathBuf::from(p));
    assert_eq!(
        store_url("file:///var/lib/fw").expect("file"),
        dir("/var/lib/fw")
    );
    assert_eq!(store_url("ckpt").expect("path"), dir("ckpt"));
    let s3 = store_url("s3://bucket/x/y/").expect("s3");
    assert_eq!(
        s3,
        StoreUrl::S3 {
            bucket: "bucket".into(),
            prefix: "x/y".into()
        }
    );
    assert_eq!(s3.to_string(), "s3://bucket/x/y");
    assert_eq!(
        store_url("s3://bucket").expect("no prefix").to_string(),
        "s3://bucket"
    );
    let e = store_url("gs://bucket/x").expect_err("gs").to_string();
    assert!(e.contains("not implemented"), "{e}");
    assert!(store_url("file://").is_err());
    assert!(store_url("s3://").is_err());
    assert!(store_url("s3:///x").is_err());
    assert!(store_url("").is_err());
}

#[test]
fn a_file_of_another_partition_is_refused() {
    let root = temp("other");
    let mut store = PartitionStore::open(&root).expect("open");
    store.write(&ckpt(1, 1, 5)).expect("write");
    let from = store.dir_of(&key(1)).join("checkpoint-0000000001.cbor");
    fs::create_dir_all(store.dir_of(&key(2))).expect("dir");
    fs::copy(
        &from,
        store.dir_of(&key(2)).join("checkpoint-0000000001.cbor"),
    )
    .expect("copy");
    assert_eq!(store.latest(&key(2)).expect("read"), None);
    let _ = fs::remove_dir_all(&root);
}
