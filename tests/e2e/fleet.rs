//! Scale-out on a real broker (issue #31): three `forewarn serve` instances
//! in one consumer group share a checkpoint store (a shared directory, or a
//! bucket on a real S3-protocol server) and the fleet topic; one is killed with SIGKILL mid-stream and a fourth, started in a
//! fresh directory, takes its partitions (and, if it held it, the fleet's
//! alert stage) over warm. The PagerDuty receiver must get exactly the
//! incidents `forewarn backtest` pages on the same telemetry, each once, no
//! `gpu_lost`; every instance must rank the same GPUs riskiest; a silence
//! added on one instance must show on all.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use forewarn_tests::broker::Broker;
use forewarn_tests::receiver::Receiver;
use forewarn_tests::s3::S3Server;
use forewarn_tests::service::{
    expected_pages, incidents, kafka_config, reference_events, wait_for, wait_settled,
};
use forewarn_tests::{forewarn, forewarn_bin, free_port, http_get, http_status, metric, scratch};
use serde_json::Value;

const TOKEN: &str = "fleet-e2e-token";
const FLEET_TOPIC: &str = "forewarn-fleet";

struct Instance {
    child: Child,
    api: u16,
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shared checkpoint store: its `checkpoint.store` and the variables
/// its client needs.
struct Store {
    url: String,
    env: Vec<(&'static str, String)>,
}

fn start(dir: &Path, brokers: &str, store: &Store, pd: u16) -> Instance {
    std::fs::create_dir_all(dir).expect("instance dir");
    let api = free_port();
    let config = kafka_config(brokers, "forewarn-fleet-e2e", 0, api, pd)
        .replacen(
            "ready_lag = 0",
            &format!("ready_lag = 0\nfleet_topic = \"{FLEET_TOPIC}\""),
            1,
        )
        .replacen(
            "interval_s = 0.5",
            &format!("interval_s = 0.5\nstore = \"{}\"", store.url),
            1,
        )
        .replacen(
            &format!("listen = \"127.0.0.1:{api}\""),
            &format!("listen = \"127.0.0.1:{api}\"\ntoken_env = \"FW_E2E_TOKEN\""),
            1,
        )
        + "\n[export]\nenabled = true\ndir = \"export\"\nfeatures = false\n";
    std::fs::write(dir.join("forewarn.toml"), config).expect("config");
    let child = Command::new(forewarn_bin())
        .args(["serve", "--config", "forewarn.toml"])
        .current_dir(dir)
        .envs(store.env.iter().map(|(k, v)| (k, v)))
        .env("FW_E2E_PD_KEY", "e2e-routing-key")
        .env("FW_E2E_SLACK_URL", format!("http://127.0.0.1:{pd}/slack"))
        .env("FW_E2E_TOKEN", TOKEN)
        .env("FOREWARN_LOG", "info,detector::fleet=debug")
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.join("serve.log"))
                .expect("serve log"),
        )
        .spawn()
        .expect("spawn forewarn serve");
    wait_for("an instance's API", Duration::from_secs(60), || {
        http_get(api, "/healthz").is_some()
    });
    Instance { child, api }
}

/// `POST` with the admin token; the status and body.
fn post(port: u16, path: &str, body: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

/// Dedup keys of the critical `firing` rows of the alert exports under
/// each of `dirs` (`<dir>/export/alerts/…`), and the directories that hold
/// any alert row.
fn exported_pages(dirs: &[std::path::PathBuf]) -> (BTreeSet<String>, usize) {
    use arrow::array::{Array, StringArray};
    let (mut keys, mut writers) = (BTreeSet::new(), 0);
    for d in dirs {
        let files = datasets::export::list_files(&d.join("export"), "alerts", i64::MIN, i64::MAX)
            .unwrap_or_default();
        let mut rows = 0;
        for f in files {
            for b in datasets::export::read_file(&f.path).expect("an alert export file") {
                rows += b.num_rows();
                let col = |n: &str| {
                    b.column_by_name(n)
                        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                        .cloned()
                        .unwrap_or_else(|| panic!("alert export column {n}"))
                };
                let (status, severity, key) = (col("status"), col("severity"), col("dedup_key"));
                for i in 0..b.num_rows() {
                    if status.value(i) == "firing" && severity.value(i) == "critical" {
                        keys.insert(key.value(i).to_owned());
                    }
                }
            }
        }
        writers += usize::from(rows > 0);
    }
    (keys, writers)
}

/// Whether the instance on `api` runs the fleet's alert stage (`/readyz`
/// says so, ready or not).
fn owns_stage(api: u16) -> bool {
    http_status(api, "/readyz").is_some_and(|(_, b)| b.contains("fleet alert stage: here"))
}

fn top_gpus(api: u16, n: usize) -> Vec<String> {
    let body = http_get(api, &format!("/v1/gpus?sort=risk&limit={n}")).unwrap_or_default();
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    v["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i["gpu"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Prints what docs/performance.md records: each takeover's log line (its
/// restore time), partition checkpoint sizes (directory store) and the
/// fleet topic's bytes per assessment.
fn report(dir: &Path, live: &[Instance]) {
    for i in ["i1", "i2", "i3", "i4"] {
        let log = std::fs::read_to_string(dir.join(i).join("serve.log")).unwrap_or_default();
        for line in log.lines().filter(|l| {
            l.contains("partitions taken over") || l.contains("fleet alert stage taken over")
        }) {
            eprintln!("{i}: {line}");
        }
    }
    if let Ok(parts) = std::fs::read_dir(dir.join("store/partitions")) {
        for p in parts.flatten() {
            let newest = std::fs::read_dir(p.path())
                .into_iter()
                .flatten()
                .flatten()
                .filter(|f| f.file_name().to_string_lossy().ends_with(".cbor"))
                .filter_map(|f| Some((f.file_name(), f.metadata().ok()?.len())))
                .max();
            if let Some((name, len)) = newest {
                eprintln!(
                    "checkpoint {}/{}: {len} bytes",
                    p.file_name().to_string_lossy(),
                    name.to_string_lossy()
                );
            }
        }
    }
    let (mut bytes, mut assessed) = (0.0, 0.0);
    for i in live {
        if let Some(m) = http_get(i.api, "/metrics") {
            bytes += metric(&m, "forewarn_fleet_bytes_total");
            assessed += metric(&m, "forewarn_assessments_total");
        }
    }
    eprintln!(
        "fleet topic (live instances): {bytes} bytes for {assessed} assessments, {:.0} B each",
        bytes / assessed.max(1.0)
    );
}

fn gpu_count(api: u16) -> u64 {
    http_get(api, "/v1/fleet")
        .and_then(|b| serde_json::from_str::<Value>(&b).ok())
        .and_then(|v| v["gpus"].as_u64())
        .unwrap_or(0)
}

#[test]
fn three_instances_one_killed_a_fourth_joins_page_each_incident_once() {
    let dir = scratch("fleet");
    let store = Store {
        url: dir.join("store").display().to_string(),
        env: Vec::new(),
    };
    three_instances(&dir, &store);
}

/// The same on a bucket: a dead owner's leases outlive it there (the
/// replacement runs its partitions and the stage before they expire).
#[test]
fn three_instances_on_an_s3_store() {
    let dir = scratch("fleet-s3");
    let Some(s3) = S3Server::start(&dir.join("s3")) else {
        return;
    };
    s3.create_bucket("fw-fleet");
    let store = Store {
        url: "s3://fw-fleet/e2e".into(),
        env: s3.env(),
    };
    three_instances(&dir, &store);
    drop(s3);
}

fn three_instances(dir: &Path, store: &Store) {
    let Some(broker) = Broker::start(&dir.join("broker")) else {
        return;
    };
    broker.create_topic("telemetry", 4);
    broker.create_topic(FLEET_TOPIC, 1);
    // Failures and one rack cooling incident: 4 racks, keyed by rack.
    forewarn(
        &[
            "simulate",
            "--gpus",
            "128",
            "--hours",
            "12",
            "--seed",
            "5",
            "--failure-rate",
            "0.4",
            "--rack-incident",
            "--format",
            "jsonl",
            "--out",
            "sim",
        ],
        dir,
    );
    let pd = Receiver::start();
    // The uninterrupted reference: one process, the same policy.
    let plain = kafka_config(&broker.addr(), "unused", 0, free_port(), pd.port);
    std::fs::write(dir.join("forewarn.toml"), &plain).expect("config");
    let reference = reference_events(dir, "sim/telemetry.jsonl");
    let mut expected = expected_pages(&reference);
    // `backtest` runs its timers out at the end of its file; a live
    // consumer cannot know the stream ended, so a GPU that falls silent in
    // its last minutes is judged lost only as time goes on (it never does
    // here). Pages that fire in the last 15 minutes may come or not.
    let late: BTreeSet<String> = reference
        .iter()
        .filter(|e| {
            e["status"] == "firing"
                && e["ts"]
                    .as_str()
                    .is_some_and(|t| t >= "2026-11-01T11:45:00Z")
        })
        .filter_map(|e| e["dedup_key"].as_str().map(str::to_owned))
        .collect();
    expected.retain(|k, _| !late.contains(k));
    assert!(
        expected.keys().any(|k| k.contains("/gpu/"))
            && expected.keys().any(|k| k.ends_with("/rack_cooling")),
        "the fleet has failures and a rack incident that page: {expected:?}"
    );

    let brokers = broker.addr();
    let mut live = vec![
        start(&dir.join("i1"), &brokers, store, pd.port),
        start(&dir.join("i2"), &brokers, store, pd.port),
        start(&dir.join("i3"), &brokers, store, pd.port),
    ];
    // Every member in the group before the data flows (tansu 0.6 wedges a
    // group whose members join while it rebalances under load).
    std::thread::sleep(Duration::from_secs(8));
    let mut replay = Command::new(forewarn_bin())
        .args([
            "replay",
            "--input",
            "sim/telemetry.jsonl",
            "--brokers",
            &brokers,
            "--topic",
            "telemetry",
            "--key",
            "rack",
            "--speed",
            "3600",
        ])
        .current_dir(dir)
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn replay");
    // Kill -9 the instance that runs the fleet's alert stage, mid-stream,
    // after it checkpointed: both its partitions and the stage move.
    let mut owner = None;
    wait_for("a fleet alert stage owner", Duration::from_secs(60), || {
        owner = live.iter().position(|i| owns_stage(i.api));
        owner.is_some()
    });
    let owner = owner.expect("owner");
    let victim = live[owner].api;
    wait_for(
        "a checkpoint and a page mid-stream",
        Duration::from_secs(120),
        || {
            let ingested: f64 = live
                .iter()
                .filter_map(|i| http_get(i.api, "/metrics"))
                .map(|m| metric(&m, "forewarn_samples_ingested_total"))
                .sum();
            ingested > 40_000.0
                && http_get(victim, "/metrics")
                    .is_some_and(|m| metric(&m, "forewarn_checkpoints_total") >= 2.0)
                && !pd.bodies("/v2/enqueue").is_empty()
        },
    );
    let killed_at = Instant::now();
    let mut gone = live.remove(owner);
    gone.child.kill().expect("kill -9");
    gone.child.wait().expect("reap");
    drop(gone);
    // A replacement after the dead member's session expired (10 s): tansu
    // 0.6 moves a SIGKILLed member's partitions only when another joins.
    std::thread::sleep(Duration::from_secs(11));
    live.push(start(&dir.join("i4"), &brokers, store, pd.port));
    assert!(replay.wait().expect("replay").success(), "replay failed");

    // A silence added on one instance holds on every one.
    let silence = r#"{"matchers":[{"name":"host","value":"no-such-host","isRegex":false}],
        "startsAt":"2020-01-01T00:00:00Z","endsAt":"2099-01-01T00:00:00Z",
        "createdBy":"e2e","comment":"fleet-wide"}"#;
    let (status, body) = post(live[0].api, "/v1/silences", silence);
    assert!((200..300).contains(&status), "{status} {body}");

    // Caught up: every live instance reads nothing behind, the views
    // hold the whole fleet, the receivers go quiet.
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let seen: Vec<(Option<f64>, u64)> = live
            .iter()
            .map(|i| {
                let lag = http_get(i.api, "/metrics")
                    .filter(|m| m.contains("forewarn_consumer_lag{"))
                    .map(|m| metric(&m, "forewarn_consumer_lag"));
                (lag, gpu_count(i.api))
            })
            .collect();
        if seen
            .iter()
            .all(|(lag, gpus)| *lag == Some(0.0) && *gpus == 128)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the instances did not catch up: (lag, GPUs) per instance {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let takeover_s = killed_at.elapsed().as_secs_f64();
    // The stage's own group moves the killed owner's stage on its own
    // clock (it may settle after the telemetry group).
    wait_for(
        "one fleet alert stage owner",
        Duration::from_secs(60),
        || live.iter().filter(|i| owns_stage(i.api)).count() == 1,
    );
    let stage_s = killed_at.elapsed().as_secs_f64();
    // The last alerts of the stream (a GPU silent at its very end) wait
    // for every partition to go idle (5 s without messages) before the
    // fleet's clock runs past them: give them that, then make sure
    // nothing more (a double page) follows.
    let until = Instant::now() + Duration::from_secs(60);
    while incidents(&pd.bodies("/v2/enqueue"))
        .keys()
        .filter(|k| !late.contains(*k))
        .count()
        < expected.len()
        && Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(250));
    }
    wait_settled(&pd.log, Duration::from_secs(90));

    report(dir, &live);

    let events = pd.bodies("/v2/enqueue");
    let got = incidents(&events);
    let tops: Vec<Vec<String>> = live.iter().map(|i| top_gpus(i.api, 5)).collect();
    let silenced: Vec<bool> = live
        .iter()
        .map(|i| http_get(i.api, "/v1/silences").is_some_and(|b| b.contains("fleet-wide")))
        .collect();
    eprintln!(
        "{} PagerDuty events; incidents {got:?}; expected {expected:?}; top {tops:?}; caught up {takeover_s:.1} s after the kill, one stage owner after {stage_s:.1} s",
        events.len()
    );
    assert!(
        got.keys()
            .filter(|k| k.ends_with("/gpu_lost"))
            .all(|k| expected.contains_key(k) || late.contains(k)),
        "no GPU is lost because its partition moved: {got:?}"
    );
    let mut got_early = got.clone();
    got_early.retain(|k, n| !(late.contains(k) && *n == 1));
    assert_eq!(
        got_early, expected,
        "every incident of the uninterrupted run, each paged once (late ones at most once: {late:?})"
    );
    assert!(
        tops.windows(2).all(|w| w[0] == w[1]) && !tops[0].is_empty(),
        "every instance ranks the same GPUs riskiest: {tops:?}"
    );
    assert!(
        silenced.iter().all(|s| *s),
        "the silence shows on every instance: {silenced:?}"
    );
    // Metrics per partition: samples taken in, and on the replacement the
    // restore time of each partition it took over.
    let pages: Vec<String> = live
        .iter()
        .map(|i| http_get(i.api, "/metrics").unwrap_or_default())
        .collect();
    assert!(
        pages
            .iter()
            .map(|m| metric(m, "forewarn_partition_samples_total"))
            .sum::<f64>()
            > 0.0,
        "samples per partition"
    );
    assert!(
        pages
            .last()
            .is_some_and(|m| m.contains("forewarn_partition_restore_seconds{partition=")),
        "the replacement's restore times"
    );
    // The Parquet alert export is written by whichever instance runs the
    // stage: after a clean stop of the live ones, every page it holds was
    // paged, and it holds most of them (the killed owner's unfinished
    // hour is lost, as docs/exports.md says of any crash: 0–2 of 13 here).
    for i in &mut live {
        forewarn_tests::terminate(&mut i.child);
    }
    let dirs: Vec<_> = ["i1", "i2", "i3", "i4"]
        .iter()
        .map(|d| dir.join(d))
        .collect();
    let (exported, writers) = exported_pages(&dirs);
    eprintln!("exported pages {exported:?} from {writers} instance(s)");
    // (Late pages — the stream's last 15 minutes — may come or not, here
    // too: once a `gpu_lost` of the last minutes was exported by the owner
    // stopped below but had not reached the receiver.)
    assert!(
        exported
            .iter()
            .filter(|k| !late.contains(*k))
            .all(|k| got.contains_key(k)),
        "the export holds only what was paged: {exported:?} vs {got:?}"
    );
    assert!(
        exported.len() * 3 >= expected.len() * 2 && writers >= 1,
        "the export holds the stage's pages: {exported:?} of {expected:?}"
    );
    drop(live);
    drop(broker);
    std::fs::remove_dir_all(dir).ok();
}
