//! The outbox under fire: a receiver that is down for the first part of an
//! incident storm, and the process SIGKILLed mid-storm and restarted
//! (`src/bin/outbox-probe.rs`, which replays its input from the start like
//! the detector re-reading Kafka). The receiver must end with every
//! (dedup_key, status) of the storm, firing before resolved per incident;
//! re-sends are tolerated only as copies with the same dedup_key (at most
//! the one in flight at the kill).
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Receiver, temp_dir, wait_until};

const GPUS: usize = 200;

fn spawn_probe(dir: &std::path::Path, url: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_outbox-probe"))
        .args([dir.to_str().unwrap(), url, &GPUS.to_string(), "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storm_survives_a_down_receiver_and_sigkill() {
    let rx = Receiver::start(common::contract, 200, "", vec![]).await;
    // Down until the first run is killed (not for a fixed time: a slow
    // start on a loaded machine must not change what is tested).
    rx.inner.lock().unwrap().down_until = Some(Instant::now() + Duration::from_secs(3600));
    let dir = temp_dir("crash");
    let pending = |dir: &std::path::Path| {
        std::fs::read_dir(dir.join("hook")).map_or(0, |d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json"))
            })
            .count()
        })
    };

    // First run: killed (SIGKILL: `Child::kill` on Unix) mid-storm, while
    // the receiver is still down and the outbox holds a backlog.
    let mut first = spawn_probe(&dir, &rx.url);
    assert!(
        wait_until(Duration::from_secs(20), || pending(&dir) >= 10).await,
        "the probe queued a backlog while the receiver was down"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let pending_after_kill = pending(&dir);
    rx.inner.lock().unwrap().down_until = None;
    assert!(pending_after_kill > 0, "the kill left a backlog to recover");

    // Restart: replays the whole storm and drains the outbox.
    let second = spawn_probe(&dir, &rx.url);
    let done = tokio::task::spawn_blocking(move || second.wait_with_output().unwrap());
    let output = tokio::time::timeout(Duration::from_secs(40), done)
        .await
        .expect("probe finishes")
        .unwrap();
    assert!(output.status.success() && String::from_utf8_lossy(&output.stdout).contains("done"));
    assert!(wait_until(Duration::from_secs(2), || rx.accepted().len() >= 2 * GPUS).await);
    assert!(rx.invalid().is_empty(), "{:?}", rx.invalid());

    let got = rx.accepted();
    let mut per_incident: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in &got {
        per_incident
            .entry(v["dedup_key"].as_str().unwrap().to_owned())
            .or_default()
            .push(v["status"].as_str().unwrap().to_owned());
    }
    let expected: BTreeSet<String> = (0..GPUS)
        .map(|i| format!("forewarn/gpu/GPU-{i:04}/storm"))
        .collect();
    assert_eq!(
        per_incident.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "nothing lost"
    );
    for (key, statuses) in &per_incident {
        let first_resolved = statuses
            .iter()
            .position(|s| s == "resolved")
            .unwrap_or_else(|| panic!("{key} never resolved"));
        assert!(
            statuses[..first_resolved].iter().any(|s| s == "firing"),
            "{key}: firing before resolved, got {statuses:?}"
        );
    }
    let duplicates = got.len() - 2 * GPUS;
    assert!(
        duplicates <= 2,
        "{duplicates} re-sends (only the entry in flight at the kill may repeat)"
    );
    eprintln!(
        "receiver: {} accepted, {} duplicates, {} pending after kill",
        got.len(),
        duplicates,
        pending_after_kill
    );
}
