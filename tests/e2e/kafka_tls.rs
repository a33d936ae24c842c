//! Secure Kafka end to end: a simulated fleet → `forewarn replay` over TLS
//! → stunnel (TLS terminator, `tests/src/tls.rs`) → tansu → `forewarn
//! serve` over TLS with the CA from a file → PagerDuty receiver: the
//! incidents of the uninterrupted reference are found. With SASL too:
//! tansu requires SCRAM-SHA-512, the password comes from a file
//! (`[source.secrets]`, `replay --option-file`) and never shows in the
//! logs. A wrong CA or a wrong password stops `serve` and `replay` within
//! seconds, non-zero, naming the brokers and the cause.

use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use forewarn_tests::broker::Broker;
use forewarn_tests::receiver::Receiver;
use forewarn_tests::service::{
    Service, expected_pages, incidents, kafka_config, reference_events, serve, wait_for,
    wait_settled,
};
use forewarn_tests::tls::{Certs, Stunnel};
use forewarn_tests::{forewarn_bin, free_port, http_get, metric, scratch, simulate_fleet};

/// The broker behind stunnel, advertising the TLS port; `None` (skipped)
/// without tansu, as the other Kafka tests.
fn secure_broker(dir: &Path, sasl: bool) -> Option<(Broker, Stunnel, Certs)> {
    let certs = Certs::generate(&dir.join("certs"));
    let tls_port = free_port();
    let mut broker = Broker::start_with(&dir.join("broker"), Some(tls_port), false)?;
    broker.create_topic("telemetry", 2);
    if sasl {
        // tansu's CLI cannot authenticate: users first, then SASL on.
        broker.create_user("forewarn", PASSWORD, "scram512");
        broker.require_authentication();
    }
    let tunnel = Stunnel::start(&dir.join("stunnel"), tls_port, broker.port, &certs);
    Some((broker, tunnel, certs))
}

const PASSWORD: &str = "e2e-kafka-Pa55word";

/// `[source.options]` (and secrets) for TLS with `ca`, SASL when `sasl`.
fn secure_options(ca: &Path, sasl: bool) -> String {
    let mut s = format!(
        "\n[source.options]\n\"security.protocol\" = \"{}\"\n\"ssl.ca.location\" = \"{}\"\n",
        if sasl { "SASL_SSL" } else { "SSL" },
        ca.display()
    );
    if sasl {
        s.push_str(
            "\"sasl.mechanism\" = \"SCRAM-SHA-512\"\n\"sasl.username\" = \"forewarn\"\n\n[source.secrets]\n\"sasl.password\" = { file = \"kafka.password\" }\n",
        );
    }
    s
}

/// `forewarn replay` of the fleet over TLS (and SASL), paced.
fn replay(dir: &Path, brokers: &str, ca: &Path, sasl: bool, speed: &str) -> Command {
    let mut c = Command::new(forewarn_bin());
    c.args([
        "replay",
        "--input",
        "sim/telemetry.jsonl",
        "--brokers",
        brokers,
    ])
    .args([
        "--topic",
        "telemetry",
        "--speed",
        speed,
        "--give-up-after",
        "30s",
    ])
    .arg("--option")
    .arg(if sasl {
        "security.protocol=SASL_SSL"
    } else {
        "security.protocol=SSL"
    })
    .arg("--option")
    .arg(format!("ssl.ca.location={}", ca.display()))
    .current_dir(dir)
    .env("FOREWARN_LOG", "info");
    if sasl {
        c.args(["--option", "sasl.mechanism=SCRAM-SHA-512"])
            .args(["--option", "sasl.username=forewarn"])
            .args(["--option-file", "sasl.password=kafka.password"]);
    }
    c
}

/// Waits for the child to exit; its status and how long it took.
fn exit_within(svc: &mut Service, limit: Duration) -> (ExitStatus, Duration) {
    let start = Instant::now();
    loop {
        if let Some(s) = svc.0.try_wait().expect("wait") {
            return (s, start.elapsed());
        }
        assert!(
            start.elapsed() < limit,
            "still running after {limit:?}: it should have stopped"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn timed(mut c: Command) -> (Output, Duration) {
    let start = Instant::now();
    let out = c.stdin(Stdio::null()).output().expect("run");
    (out, start.elapsed())
}

#[test]
fn a_fleet_over_tls_is_consumed_and_its_incidents_found() {
    let started = Instant::now();
    let dir = scratch("kafka-tls");
    let Some((broker, tunnel, certs)) = secure_broker(&dir, false) else {
        return;
    };
    simulate_fleet(&dir, 64, 12, 5, Some(0.4));
    let pd = Receiver::start();
    let api = free_port();
    let mut config = kafka_config(&tunnel.addr(), "forewarn-tls", 0, api, pd.port);
    config.push_str(&secure_options(&certs.ca, false));
    std::fs::write(dir.join("forewarn.toml"), &config).expect("config");
    let expected = expected_pages(&reference_events(&dir, "sim/telemetry.jsonl"));
    assert!(!expected.is_empty(), "the fleet has failures that page");

    let svc = serve(&dir, pd.port);
    wait_for("the API", Duration::from_secs(60), || {
        http_get(api, "/healthz").is_some()
    });
    let (out, took) = timed(replay(&dir, &tunnel.addr(), &certs.ca, false, "3600"));
    assert!(
        out.status.success(),
        "replay over TLS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("replay over TLS took {took:?}");
    let total = std::fs::read_to_string(dir.join("sim/telemetry.jsonl"))
        .expect("telemetry")
        .lines()
        .count();
    wait_for("the service to catch up", Duration::from_secs(180), || {
        http_get(api, "/readyz").is_some()
            && http_get(api, "/metrics").is_some_and(|m| {
                metric(&m, "forewarn_samples_ingested_total") >= total as f64
                    && m.contains("forewarn_consumer_lag{")
                    && metric(&m, "forewarn_consumer_lag") == 0.0
            })
    });
    wait_settled(&pd.log, Duration::from_secs(60));
    let got = incidents(&pd.bodies("/v2/enqueue"));
    drop(svc);
    eprintln!(
        "{total} samples over TLS; incidents {got:?}; expected {expected:?}; test took {:?}",
        started.elapsed()
    );
    assert_eq!(got, expected, "every incident of the reference, once");
    drop((tunnel, broker));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_wrong_ca_stops_serve_and_replay_naming_the_brokers() {
    let dir = scratch("kafka-tls-wrong-ca");
    let Some((broker, tunnel, certs)) = secure_broker(&dir, false) else {
        return;
    };
    simulate_fleet(&dir, 8, 1, 5, None);
    let api = free_port();
    let mut config = kafka_config(&tunnel.addr(), "forewarn-tls", 0, api, free_port());
    config.push_str(&secure_options(&certs.wrong_ca, false));
    std::fs::write(dir.join("forewarn.toml"), &config).expect("config");
    let mut svc = serve(&dir, free_port());
    let (status, took) = exit_within(&mut svc, Duration::from_secs(60));
    let log = std::fs::read_to_string(dir.join("serve.log")).expect("log");
    eprintln!("serve with the wrong CA: {status} after {took:?}");
    assert!(!status.success(), "exit {status}:\n{log}");
    assert!(
        log.contains(&tunnel.addr()) && log.contains("certificate verify failed"),
        "the log names the brokers and the cause:\n{log}"
    );

    let (out, took) = timed(replay(&dir, &tunnel.addr(), &certs.wrong_ca, false, "0"));
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("replay with the wrong CA: {} after {took:?}", out.status);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&tunnel.addr()) && err.contains("certificate verify failed"),
        "{err}"
    );
    assert!(
        took < Duration::from_secs(30),
        "{took:?}: before the give-up"
    );
    drop((tunnel, broker));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sasl_scram_over_tls_with_the_password_from_a_file() {
    let dir = scratch("kafka-sasl");
    let Some((broker, tunnel, certs)) = secure_broker(&dir, true) else {
        return;
    };
    std::fs::write(dir.join("kafka.password"), format!("{PASSWORD}\n")).expect("password");
    simulate_fleet(&dir, 16, 2, 5, None);
    let total = std::fs::read_to_string(dir.join("sim/telemetry.jsonl"))
        .expect("telemetry")
        .lines()
        .count();
    let api = free_port();
    let mut config = kafka_config(&tunnel.addr(), "forewarn-sasl", 0, api, free_port());
    config.push_str(&secure_options(&certs.ca, true));
    std::fs::write(dir.join("forewarn.toml"), &config).expect("config");

    let (out, took) = timed(replay(&dir, &tunnel.addr(), &certs.ca, true, "0"));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "replay over SASL_SSL: {err}");
    eprintln!("replay over SASL_SSL: {total} samples in {took:?}");
    let svc = serve(&dir, free_port());
    wait_for(
        "every sample consumed over SASL_SSL",
        Duration::from_secs(120),
        || {
            http_get(api, "/metrics")
                .is_some_and(|m| metric(&m, "forewarn_samples_ingested_total") >= total as f64)
        },
    );
    drop(svc);
    let log = std::fs::read_to_string(dir.join("serve.log")).expect("log");
    assert!(!log.contains(PASSWORD) && !err.contains(PASSWORD), "{log}");

    // A wrong password: refused from the start, so the service stops.
    std::fs::write(dir.join("kafka.password"), "not-the-password\n").expect("password");
    std::fs::write(dir.join("serve.log"), "").expect("log");
    let mut svc = serve(&dir, free_port());
    let (status, took) = exit_within(&mut svc, Duration::from_secs(60));
    let log = std::fs::read_to_string(dir.join("serve.log")).expect("log");
    eprintln!("serve with a wrong SASL password: {status} after {took:?}");
    assert!(!status.success(), "exit {status}:\n{log}");
    assert!(
        log.contains(&tunnel.addr()) && log.contains("refused"),
        "the log names the brokers:\n{log}"
    );
    assert!(!log.contains("not-the-password"), "{log}");
    drop((tunnel, broker));
    std::fs::remove_dir_all(&dir).ok();
}
