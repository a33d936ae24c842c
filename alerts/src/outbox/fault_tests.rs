//! The outbox when its directory fails mid-enqueue: what was stored leaves
//! the caller's queue, the rest stays, and a retry once the fault is gone
//! stores every entry exactly once (and a replay of the same changes none).
//! The fault is real I/O: a receiver's directory replaced by a plain file,
//! so creating an entry there fails with "not a directory".

use std::collections::VecDeque;
use std::path::Path;

use super::Outbox;
use crate::alert::{AlertEvent, Scope, Severity, Status};
use crate::route::Notification;

fn event(gpu: &str, status: Status, ts: i64) -> AlertEvent {
    AlertEvent {
        ts,
        status,
        severity: Severity::Critical,
        kind: "gpu_hard_failure".into(),
        scope: Scope::Gpu,
        labels: [("gpu".to_owned(), gpu.to_owned())].into(),
        dedup_key: format!("forewarn/gpu/{gpu}/gpu_hard_failure"),
        summary: "s".into(),
        risk: 1.0,
        eta_hours: None,
        reasons: vec![],
    }
}

fn notification(receiver: &str, events: Vec<AlertEvent>) -> Notification {
    Notification {
        receiver: receiver.to_owned(),
        group_key: "0/".into(),
        ts: events.first().map_or(0, |e| e.ts),
        events,
        resend: false,
        firing_in_group: 0,
        shadow: false,
    }
}

/// Replaces `dir` by a file (entries cannot be created in it) and back.
fn break_dir(dir: &Path) {
    std::fs::rename(dir, dir.with_extension("away")).expect("move away");
    std::fs::write(dir, b"not a directory").expect("block");
}

fn mend_dir(dir: &Path) {
    std::fs::remove_file(dir).expect("unblock");
    std::fs::rename(dir.with_extension("away"), dir).expect("move back");
}

#[test]
fn a_failing_directory_keeps_the_rest_and_a_retry_stores_each_entry_once() {
    let root = std::env::temp_dir().join(format!("fw-outbox-fault-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let outbox = Outbox::open(
        &root,
        &[("pd".to_owned(), true), ("slack".to_owned(), false)],
    )
    .expect("outbox");
    let batch = vec![
        notification("pd", vec![event("GPU-1", Status::Firing, 1_000)]),
        notification(
            "slack",
            vec![
                event("GPU-1", Status::Firing, 1_000),
                event("GPU-2", Status::Firing, 1_000),
            ],
        ),
        notification(
            "pd",
            vec![
                event("GPU-2", Status::Firing, 1_000),
                event("GPU-3", Status::Firing, 1_000),
            ],
        ),
    ];

    // The second receiver's directory fails: the first notification is
    // stored, the failing one and everything after it wait, unchanged.
    break_dir(&root.join("slack"));
    let mut queue: VecDeque<Notification> = batch.iter().cloned().collect();
    let err = outbox
        .enqueue_from(&mut queue)
        .expect_err("slack cannot be written");
    assert!(err.to_string().contains("slack"), "names the path: {err}");
    assert_eq!(queue.len(), 2, "the stored one left the queue");
    assert_eq!(queue[0], batch[1]);
    assert_eq!(outbox.pending("pd"), 1);
    assert_eq!(outbox.pending("slack"), 0);
    assert!(
        std::fs::read_dir(root.join("pd"))
            .expect("pd dir")
            .all(|e| e
                .expect("entry")
                .path()
                .extension()
                .is_none_or(|x| x != "tmp")),
        "a failed write leaves no temporary file"
    );

    // Still failing: nothing more is stored, nothing is duplicated.
    assert!(outbox.enqueue_from(&mut queue).is_err());
    assert_eq!(queue.len(), 2);
    assert_eq!(outbox.pending("pd"), 1);

    // The fault is gone: the rest is stored, once.
    mend_dir(&root.join("slack"));
    assert_eq!(outbox.enqueue_from(&mut queue).expect("stored"), 3);
    assert!(queue.is_empty());
    assert_eq!(outbox.pending("pd"), 3, "one entry per event for pd");
    assert_eq!(outbox.pending("slack"), 1, "one entry per notification");

    // The same changes again (a replay after a restart): all in the ledger.
    assert_eq!(outbox.enqueue(&batch).expect("replay"), 0);
    let ledger = std::fs::read_to_string(root.join("ledger.log")).expect("ledger");
    assert_eq!(
        ledger.lines().count(),
        5,
        "one line per stored event:\n{ledger}"
    );

    // Reopened (a restart): the same pending entries, nothing lost.
    drop(outbox);
    let again = Outbox::open(
        &root,
        &[("pd".to_owned(), true), ("slack".to_owned(), false)],
    )
    .expect("reopen");
    assert_eq!((again.pending("pd"), again.pending("slack")), (3, 1));
    assert_eq!(again.enqueue(&batch).expect("replay"), 0);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_delivered_entry_leaves_the_queue_even_if_its_file_cannot_be_removed() {
    let root = std::env::temp_dir().join(format!("fw-outbox-ack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let outbox = Outbox::open(&root, &[("pd".to_owned(), true)]).expect("outbox");
    outbox
        .enqueue(&[notification(
            "pd",
            vec![event("GPU-1", Status::Firing, 1_000)],
        )])
        .expect("stored");
    let peeked = outbox.peek("pd", 10).expect("peek");
    assert_eq!(peeked.len(), 1);
    let seq = peeked[0].0;
    // Removing the entry fails (its directory is gone for a while).
    break_dir(&root.join("pd"));
    assert!(outbox.ack("pd", &[seq]).is_err());
    assert_eq!(outbox.pending("pd"), 0, "not sent again by this process");
    mend_dir(&root.join("pd"));
    // The next acknowledgement also removes the stale file.
    outbox.ack("pd", &[]).expect("retried");
    assert!(!root.join("pd").join(format!("{seq:020}.json")).exists());
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn notifications_waiting_for_the_disk_survive_a_checkpoint() {
    use crate::pipeline::AlertRouter;
    use crate::route::RawRoute;
    let root = std::env::temp_dir().join(format!("fw-outbox-snap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let raw: RawRoute =
        toml::from_str("receiver = \"pd\"\ngroup_by = [\"...\"]\ngroup_wait = \"0s\"\n")
            .expect("parses");
    let route = raw.validate(&["pd"]).expect("valid");
    let outbox =
        std::sync::Arc::new(Outbox::open(&root, &[("pd".to_owned(), true)]).expect("outbox"));
    let mut router = AlertRouter::new(&route, &[], outbox.clone());
    break_dir(&root.join("pd"));
    router.push(&[event("GPU-1", Status::Firing, 1_000)]);
    assert!(router.flush(1_000).is_err(), "the disk fails");
    router.push(&[event("GPU-2", Status::Firing, 2_000)]);
    assert!(router.flush(2_000).is_err());
    assert_eq!(router.unwritten(), 2, "both wait, in order");
    // A checkpoint now, restored by the next process once the disk is back.
    let snap = router.snapshot();
    drop(router);
    mend_dir(&root.join("pd"));
    let mut restored = AlertRouter::restore(&route, &[], outbox.clone(), snap).expect("restore");
    assert_eq!(restored.unwritten(), 2);
    assert_eq!(restored.retry().expect("stored"), 2);
    assert_eq!(restored.unwritten(), 0);
    let keys: Vec<String> = outbox
        .peek("pd", 10)
        .expect("peek")
        .into_iter()
        .map(|(_, n)| n.events[0].labels["gpu"].clone())
        .collect();
    assert_eq!(
        keys,
        ["GPU-1", "GPU-2"],
        "stored in the order they were made"
    );
    let _ = std::fs::remove_dir_all(&root);
}
