//! Start-up faults of the real binary (issue 27): `serve` with its REST
//! port taken or a Kafka option it cannot use stops at once, non-zero,
//! naming the cause, and leaves nothing new on disk; `replay` against a
//! dead broker backs off quietly and gives up after `--give-up-after`,
//! naming the brokers.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use forewarn_tests::service::{Service, kafka_config, serve};
use forewarn_tests::{forewarn_bin, free_port, scratch, simulate_fleet};

fn files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

/// Runs `serve` with `config` in a fresh directory; its exit status, how
/// long it took, its log, and the files it left.
fn serve_once(name: &str, config: &str) -> (i32, Duration, String, BTreeSet<String>) {
    let dir = scratch(name);
    std::fs::write(dir.join("forewarn.toml"), config).expect("config");
    let start = Instant::now();
    let mut svc: Service = serve(&dir, free_port());
    let status = loop {
        if let Some(s) = svc.0.try_wait().expect("wait") {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{name}: still running after 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = start.elapsed();
    let log = std::fs::read_to_string(dir.join("serve.log")).expect("log");
    let left = files(&dir);
    std::fs::remove_dir_all(&dir).ok();
    (status.code().unwrap_or(-1), took, log, left)
}

fn only_config_and_log() -> BTreeSet<String> {
    ["forewarn.toml", "serve.log"]
        .into_iter()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_port_in_use_stops_serve_before_it_creates_anything() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = held.local_addr().expect("addr").port();
    // Kafka with checkpoints and an outbox: everything that would be made.
    let config = kafka_config("127.0.0.1:1", "startup", 0, port, free_port());
    let (code, took, log, left) = serve_once("port-in-use", &config);
    eprintln!("REST port in use: exit {code} after {took:?}");
    assert_ne!(code, 0, "{log}");
    assert!(
        log.contains("binding") && log.contains(&port.to_string()),
        "names the port:\n{log}"
    );
    assert_eq!(left, only_config_and_log(), "nothing created:\n{log}");
    drop(held);
}

#[test]
fn a_kafka_option_that_cannot_work_stops_serve_at_start_naming_it() {
    let base = kafka_config("127.0.0.1:1", "startup", 0, free_port(), free_port());
    let cases = [
        (
            "the example's SASL_SSL, password variable unset",
            "\"security.protocol\" = \"SASL_SSL\"\n\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\"sasl.username\" = \"forewarn\"\n[source.secrets]\n\"sasl.password\" = { env = \"FOREWARN_E2E_UNSET_KAFKA_PASSWORD\" }\n",
            vec!["sasl.password", "FOREWARN_E2E_UNSET_KAFKA_PASSWORD"],
        ),
        (
            "SASL_SSL without a mechanism",
            "\"security.protocol\" = \"SASL_SSL\"\n",
            vec!["source.options.sasl.mechanism", "GSSAPI"],
        ),
        (
            "a CA file that does not exist",
            "\"security.protocol\" = \"SSL\"\n\"ssl.ca.location\" = \"/nonexistent/ca.pem\"\n",
            vec!["source.options.ssl.ca.location", "/nonexistent/ca.pem"],
        ),
        (
            "an option librdkafka does not know",
            "\"no.such.option\" = \"1\"\n",
            vec!["source.options.no.such.option"],
        ),
        (
            "a value librdkafka refuses",
            "\"security.protocol\" = \"TLS\"\n",
            vec!["source.options.security.protocol"],
        ),
    ];
    for (what, options, names) in cases {
        let config = format!("{base}\n[source.options]\n{options}");
        let (code, took, log, left) = serve_once("bad-kafka-option", &config);
        eprintln!("{what}: exit {code} after {took:?}");
        assert_ne!(code, 0, "{what}:\n{log}");
        for n in names {
            assert!(log.contains(n), "{what}: names {n}:\n{log}");
        }
        assert!(!log.contains("serving on"), "{what}: never served:\n{log}");
        assert_eq!(left, only_config_and_log(), "{what}: nothing created");
        assert!(took < Duration::from_secs(10), "{what}: {took:?}");
    }
}

#[test]
fn replay_against_a_dead_broker_backs_off_and_gives_up_naming_it() {
    let dir = scratch("replay-dead-broker");
    simulate_fleet(&dir, 8, 1, 5, None);
    let dead = format!("127.0.0.1:{}", free_port());
    let start = Instant::now();
    let out = Command::new(forewarn_bin())
        .args([
            "replay",
            "--input",
            "sim/telemetry.jsonl",
            "--brokers",
            &dead,
        ])
        .args(["--give-up-after", "8s"])
        .current_dir(&dir)
        .env("FOREWARN_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .expect("replay");
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    let count = |level: &str| err.lines().filter(|l| l.contains(level)).count();
    eprintln!(
        "replay against {dead}: {} after {took:?}, {} WARN and {} ERROR lines:\n{err}",
        out.status,
        count("WARN"),
        count("ERROR")
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&dead) && err.contains("giving up"),
        "names the brokers:\n{err}"
    );
    assert!(
        took >= Duration::from_secs(8) && took < Duration::from_secs(20),
        "{took:?}"
    );
    // One line per backoff step (3 s, 6 s), not one per reconnect attempt.
    assert!(count("WARN") <= 3, "{err}");
    assert_eq!(count("ERROR"), 0, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
