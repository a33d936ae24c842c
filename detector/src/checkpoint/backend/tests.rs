//! Tests of the store backends: the same [`PartitionStore`] behaviour over
//! a directory and over an object store (`object_store`'s in-memory store,
//! which honours conditional puts as S3 does), the lease rules, and calls
//! from inside a tokio runtime. The same over a real S3 server:
//! tests/e2e/s3_store.rs.

use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStoreExt, PutPayload};

use super::lease::{self, Lease, Verdict, Writer};
use super::object::ObjectBackend;
use super::*;
use crate::checkpoint::partitions::tests::{ckpt, key};
use crate::checkpoint::{PartitionStore, partitions};

fn object_store(mem: &Arc<InMemory>) -> PartitionStore {
    let backend = ObjectBackend::new(mem.clone(), "fw", "s3://mem/fw".into()).expect("backend");
    PartitionStore::with_backend(Backend::Object(backend))
}

fn object(mem: &InMemory, name: &str) -> Option<Vec<u8>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("rt");
    rt.block_on(async {
        let got = mem.get(&ObjPath::from(name)).await.ok()?;
        got.bytes().await.ok().map(|b| b.to_vec())
    })
}

fn put(mem: &InMemory, name: &str, bytes: &[u8]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("rt");
    rt.block_on(mem.put(&ObjPath::from(name), PutPayload::from(bytes.to_vec())))
        .expect("put");
}

#[test]
fn the_directory_backend_writes_the_same_files_as_before() {
    let root = std::env::temp_dir().join(format!("fw-backend-dir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let mut store = PartitionStore::open(&root).expect("open");
    store.write(&ckpt(2, 7, 70)).expect("write");
    let file = root.join("partitions/telemetry-2/checkpoint-0000000007.cbor");
    assert_eq!(
        std::fs::read(&file).expect("file"),
        partitions::encode(&ckpt(2, 7, 70)).expect("encode")
    );
    assert!(
        root.join("partitions/telemetry-2/.forewarn-partition.lock")
            .exists()
    );
    assert_eq!(
        store.newest_first(&key(2)).expect("list"),
        vec![(7, file.display().to_string())]
    );
    assert_eq!(store.root(), root.display().to_string());
    drop(store);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_object_store_keeps_the_newest_and_falls_back_past_damage() {
    let mem = Arc::new(InMemory::new());
    let mut store = object_store(&mem);
    assert_eq!(store.latest(&key(3)).expect("none"), None);
    for i in 0..5 {
        let seq = store.next_seq(&key(3)).expect("seq");
        store.write(&ckpt(3, seq, 10 * i)).expect("write");
    }
    let listed = store.newest_first(&key(3)).expect("list");
    assert_eq!(
        listed.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![5, 4, 3],
        "the newest KEEP are kept"
    );
    assert_eq!(
        listed[0].1,
        "s3://mem/fw/partitions/telemetry-3/checkpoint-0000000005.cbor"
    );
    let name = "fw/partitions/telemetry-3/checkpoint-0000000005.cbor";
    assert_eq!(
        object(&mem, name),
        Some(partitions::encode(&ckpt(3, 5, 40)).expect("encode")),
        "the object's bytes are the directory store's file's"
    );
    assert_eq!(store.latest(&key(3)).expect("latest"), Some(ckpt(3, 5, 40)));
    // A torn newest object and a flipped byte fall back to seq 4.
    put(
        &mem,
        "fw/partitions/telemetry-3/checkpoint-0000000007.cbor",
        b"\xa1torn",
    );
    let mut bytes = object(&mem, name).expect("object");
    let n = bytes.len();
    bytes[n - 10] ^= 0x40;
    put(&mem, name, &bytes);
    assert_eq!(store.latest(&key(3)).expect("latest"), Some(ckpt(3, 4, 30)));
    assert_eq!(store.next_seq(&key(3)).expect("seq"), 8);
    // Objects deeper down or of a neighbour partition are not its own.
    put(
        &mem,
        "fw/partitions/telemetry-3/x/checkpoint-0000000009.cbor",
        b"x",
    );
    put(
        &mem,
        "fw/partitions/telemetry-30/checkpoint-0000000009.cbor",
        b"x",
    );
    assert_eq!(store.next_seq(&key(3)).expect("seq"), 8);
    assert_eq!(store.latest(&key(4)).expect("none"), None);
}

#[test]
fn one_writer_per_partition_on_an_object_store() {
    let mem = Arc::new(InMemory::new());
    let mut a = object_store(&mem).with_writer("host-a:/ckpt".into());
    let mut b = object_store(&mem).with_writer("host-b:/ckpt".into());
    a.claim(&key(0)).expect("a claims");
    let lease = object(&mem, "fw/partitions/telemetry-0/owner").expect("lease object");
    let l = Lease::from_json(&lease).expect("lease");
    assert_eq!(l.holder, "host-a:/ckpt");
    let e = format!("{:#}", b.claim(&key(0)).expect_err("held"));
    assert!(
        e.contains("s3://mem/fw/partitions/telemetry-0/owner") && e.contains("held by host-a"),
        "{e}"
    );
    let e = format!("{:#}", b.write(&ckpt(0, 1, 5)).expect_err("refused"));
    assert!(e.contains("held by host-a"), "{e}");
    assert_eq!(b.newest_first(&key(0)).expect("list"), vec![]);
    b.claim(&key(1)).expect("another partition is free");
    a.write(&ckpt(0, 1, 5)).expect("the owner writes");
    assert_eq!(a.owned(), vec![key(0)]);
    a.release(&key(0));
    assert!(!a.owns(&key(0)));
    assert_eq!(object(&mem, "fw/partitions/telemetry-0/owner"), None);
    b.claim(&key(0)).expect("free after release");
    assert_eq!(b.latest(&key(0)).expect("read").map(|c| c.offset), Some(5));
    // Dropping a store lets go of its leases.
    drop(b);
    assert_eq!(object(&mem, "fw/partitions/telemetry-0/owner"), None);
    assert_eq!(object(&mem, "fw/partitions/telemetry-1/owner"), None);
}

#[test]
fn an_expired_lease_is_taken_over_and_its_old_holder_is_fenced() {
    let mem = Arc::new(InMemory::new());
    let mut a = object_store(&mem)
        .with_writer("host-a:/ckpt".into())
        .with_lease_ttl(Duration::from_millis(1));
    let mut b = object_store(&mem).with_writer("host-b:/ckpt".into());
    a.write(&ckpt(0, 1, 5)).expect("a writes");
    std::thread::sleep(Duration::from_millis(20));
    // a stalled past its TTL: b takes the partition over.
    b.claim(&key(0)).expect("expired: taken over");
    let e = format!("{:#}", a.write(&ckpt(0, 2, 9)).expect_err("fenced"));
    assert!(e.contains("was taken over"), "{e}");
    assert!(!a.owns(&key(0)), "a no longer counts it as its own");
    assert_eq!(
        b.latest(&key(0)).expect("read").map(|c| c.seq),
        Some(1),
        "a's refused write left nothing"
    );
    b.write(&ckpt(0, 2, 9)).expect("b writes");
    // a's release leaves b's lease alone.
    drop(a);
    let l = Lease::from_json(&object(&mem, "fw/partitions/telemetry-0/owner").expect("lease"))
        .expect("lease");
    assert_eq!(l.holder, "host-b:/ckpt");
}

#[test]
fn a_restarted_instance_takes_its_own_lease_back_at_once() {
    let mem = Arc::new(InMemory::new());
    let a = object_store(&mem).with_writer("host-a:/ckpt".into());
    let mut a1 = a;
    a1.claim(&key(0)).expect("claim");
    // The process dies: its store is never dropped, the lease stays.
    std::mem::forget(a1);
    let mut b = object_store(&mem).with_writer("host-b:/ckpt".into());
    assert!(b.claim(&key(0)).is_err(), "still held for others");
    let mut a2 = object_store(&mem).with_writer("host-a:/ckpt".into());
    a2.write(&ckpt(0, 1, 5)).expect("same instance, new run");
}

#[test]
fn the_lease_rules() {
    let me = Writer::new("host-a:/ckpt".into());
    let other = Writer::new("host-b:/ckpt".into());
    let now = 1_000_000;
    let mine = me.lease(now).to_json();
    assert_eq!(lease::judge(&mine, &me, now), Verdict::Ours);
    let theirs = other.lease(now - 1000).to_json();
    assert!(matches!(
        lease::judge(&theirs, &me, now),
        Verdict::Refuse(why) if why.contains("held by host-b:/ckpt")
    ));
    let stale = other
        .lease(now - 1000 - lease::DEFAULT_TTL.as_millis() as i64)
        .to_json();
    assert!(matches!(
        lease::judge(&stale, &me, now),
        Verdict::TakeOver(_)
    ));
    let my_last_run = Writer::new("host-a:/ckpt".into()).lease(now).to_json();
    assert!(matches!(
        lease::judge(&my_last_run, &me, now),
        Verdict::TakeOver(_)
    ));
    assert!(matches!(
        lease::judge(b"garbage", &me, now),
        Verdict::TakeOver(_)
    ));
    // Two anonymous stores (tests, tools) are two writers.
    let (x, y) = (Writer::new(String::new()), Writer::new(String::new()));
    assert!(matches!(
        lease::judge(&x.lease(now).to_json(), &y, now),
        Verdict::Refuse(_)
    ));
    assert_eq!(
        partitions::lease_ttl(Duration::from_secs(60)),
        Duration::from_secs(240)
    );
    assert_eq!(
        partitions::lease_ttl(Duration::from_secs(5)),
        lease::DEFAULT_TTL
    );
}

fn inside_a_runtime() {
    let mem = Arc::new(InMemory::new());
    let mut store = object_store(&mem);
    store.write(&ckpt(5, 1, 3)).expect("write");
    assert_eq!(
        store.latest(&key(5)).expect("read").map(|c| c.offset),
        Some(3)
    );
    drop(store);
}

#[tokio::test(flavor = "current_thread")]
async fn calls_from_inside_a_current_thread_runtime_do_not_panic() {
    inside_a_runtime();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_from_inside_a_multi_thread_runtime_do_not_panic() {
    inside_a_runtime();
    tokio::task::spawn_blocking(inside_a_runtime)
        .await
        .expect("from a blocking task");
}

#[test]
fn an_s3_store_opens_from_the_environment_without_a_request() {
    // Building the client makes no request; a missing bucket shows at the
    // first read or write, naming the URL.
    let url = StoreUrl::parse("s3://some-bucket/fw").expect("url");
    let store = PartitionStore::open_url(&url).expect("open");
    assert_eq!(store.root(), "s3://some-bucket/fw");
    assert_eq!(
        store.dir_of(&key(1)),
        std::path::PathBuf::from("s3://some-bucket/fw/partitions/telemetry-1")
    );
}
