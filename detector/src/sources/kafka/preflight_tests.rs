//! The start-up check against the real librdkafka of this build: TLS and
//! SASL are in it, and each bad option is named.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaConfRes;

use super::*;

fn settings(options: &[(&str, &str)]) -> KafkaSettings {
    KafkaSettings {
        brokers: "127.0.0.1:9093".into(),
        topics: vec!["telemetry".into()],
        group_id: "forewarn".into(),
        options: options
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        secrets: BTreeMap::new(),
        dead_letter_topic: None,
        fleet_topic: None,
        ready_lag: 0,
    }
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fw-preflight-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch");
    d
}

/// A CA certificate and a client certificate + key it signed, as PEM files.
fn pem_files(dir: &std::path::Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let key = rcgen::KeyPair::generate().expect("key");
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let cert = rcgen::CertificateParams::new(vec!["client".to_string()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("cert");
    let paths = (
        dir.join("ca.pem"),
        dir.join("client.pem"),
        dir.join("client.key"),
    );
    std::fs::write(&paths.0, ca_cert.pem()).expect("ca");
    std::fs::write(&paths.1, cert.pem()).expect("cert");
    std::fs::write(&paths.2, key.serialize_pem()).expect("key");
    (paths.0, paths.1, paths.2)
}

#[test]
fn tls_and_sasl_scram_are_built_in() {
    let dir = scratch("ok");
    let (ca, cert, key) = pem_files(&dir);
    for mechanism in MECHANISMS {
        let mut s = settings(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", mechanism),
            ("sasl.username", "forewarn"),
            ("ssl.ca.location", ca.to_str().expect("utf-8")),
            ("ssl.certificate.location", cert.to_str().expect("utf-8")),
            ("ssl.key.location", key.to_str().expect("utf-8")),
        ]);
        let pw = dir.join("pw");
        std::fs::write(&pw, "hunter2\n").expect("pw");
        s.secrets
            .insert("sasl.password".into(), SecretRef::File { file: pw });
        preflight(&mut s).unwrap_or_else(|e| panic!("{mechanism}: {e}"));
        assert_eq!(s.options["sasl.password"], "hunter2", "resolved, trimmed");
        assert!(s.secrets.is_empty());
        let shown = format!("{s:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn each_bad_option_is_named() {
    let e = preflight(&mut settings(&[("no.such.option", "1")])).expect_err("unknown");
    assert_eq!(e.key, "source.options.no.such.option", "{e}");
    let e = preflight(&mut settings(&[("security.protocol", "TLS")])).expect_err("value");
    assert_eq!(e.key, "source.options.security.protocol", "{e}");

    let e = preflight(&mut settings(&[("security.protocol", "SASL_SSL")])).expect_err("mech");
    assert_eq!(e.key, "source.options.sasl.mechanism", "{e}");
    assert!(e.message.contains("GSSAPI"), "{e}");
    let e = preflight(&mut settings(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", "GSSAPI"),
    ]))
    .expect_err("gssapi");
    assert_eq!(e.key, "source.options.sasl.mechanisms", "{e}");
    let e = preflight(&mut settings(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "forewarn"),
    ]))
    .expect_err("no password");
    assert_eq!(e.key, "source.options.sasl.password", "{e}");
    assert!(e.message.contains("source.secrets"), "{e}");

    let mut s = settings(&[]);
    s.secrets.insert(
        "sasl.password".into(),
        SecretRef::Env {
            env: "FOREWARN_TEST_UNSET_PASSWORD".into(),
        },
    );
    let e = preflight(&mut s).expect_err("unset env");
    assert!(
        e.to_string().contains("sasl.password")
            && e.to_string().contains("FOREWARN_TEST_UNSET_PASSWORD"),
        "{e}"
    );
}

#[test]
fn tls_files_must_exist_and_be_pem() {
    let dir = scratch("files");
    let (ca, _, key) = pem_files(&dir);
    let missing = dir.join("missing.pem");
    let e = preflight(&mut settings(&[(
        "ssl.ca.location",
        missing.to_str().expect("utf-8"),
    )]))
    .expect_err("missing");
    assert_eq!(e.key, "source.options.ssl.ca.location");
    assert!(e.message.contains("missing.pem"), "{e}");

    let e = preflight(&mut settings(&[(
        "ssl.certificate.location",
        key.to_str().expect("utf-8"),
    )]))
    .expect_err("a key is no certificate");
    assert_eq!(e.key, "source.options.ssl.certificate.location");
    assert!(e.message.contains("does not look like"), "{e}");

    let e = preflight(&mut settings(&[(
        "ssl.key.location",
        ca.to_str().expect("utf-8"),
    )]))
    .expect_err("a certificate is no key");
    assert_eq!(e.key, "source.options.ssl.key.location");

    // PEM-shaped but broken: librdkafka refuses it and says which option.
    let broken = dir.join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
    )
    .expect("write");
    let e = preflight(&mut settings(&[
        ("security.protocol", "SSL"),
        ("ssl.ca.location", broken.to_str().expect("utf-8")),
    ]))
    .expect_err("broken");
    assert_eq!(e.key, "source.options.ssl.ca.location", "{e}");

    assert!(
        preflight(&mut settings(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", ca.to_str().expect("utf-8")),
        ]))
        .is_ok()
    );
    assert!(
        preflight(&mut settings(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", dir.to_str().expect("utf-8")),
        ]))
        .is_ok(),
        "a directory of CA certificates"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn refused_secret_values_are_not_repeated() {
    let options = BTreeMap::from([("sasl.password".to_string(), "hunter2".to_string())]);
    let e = KafkaError::ClientConfig(
        RDKafkaConfRes::RD_KAFKA_CONF_INVALID,
        "Invalid value \"hunter2\" for configuration property \"sasl.password\"".into(),
        "sasl.password".into(),
        "hunter2".into(),
    );
    let shown = explain(&e, &options, "source.options").to_string();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("source.options.sasl.password"), "{shown}");
}
