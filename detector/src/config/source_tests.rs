//! Tests of `[source]`: the Kafka source's secrets, TLS files and
//! refused options, and the new sources' keys.

use super::*;

fn kafka(options: &[(&str, &str)]) -> KafkaSource {
    KafkaSource {
        brokers: Some("127.0.0.1:9092".into()),
        topics: default_topics(),
        group_id: default_group_id(),
        dead_letter_topic: None,
        fleet_topic: None,
        options: options
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        secrets: BTreeMap::new(),
        ready_lag: default_ready_lag(),
        dead_letter_file: None,
    }
}

#[test]
fn inline_secrets_are_redacted_in_debug_output() {
    let k = kafka(&[("sasl.password", "hunter2"), ("sasl.username", "ops")]);
    let shown = format!("{k:?}");
    assert!(
        !shown.contains("hunter2") && shown.contains("ops"),
        "{shown}"
    );
    let SourceKind::Kafka(s) = k.validate().expect("valid") else {
        panic!("not kafka");
    };
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("hunter2") && shown.contains("ops"),
        "{shown}"
    );
}

#[test]
fn secrets_name_an_environment_variable_or_a_file() {
    let k: KafkaSource = toml::from_str(
        "brokers = \"b:9093\"\n[secrets]\n\"sasl.password\" = { env = \"KAFKA_PASSWORD\" }\n\"ssl.key.password\" = { file = \"/run/secrets/k\" }\n",
    )
    .expect("parses");
    assert_eq!(
        k.secrets["sasl.password"],
        SecretRef::Env {
            env: "KAFKA_PASSWORD".into()
        }
    );
    assert_eq!(
        k.secrets["ssl.key.password"],
        SecretRef::File {
            file: "/run/secrets/k".into()
        }
    );
    assert!(
        toml::from_str::<KafkaSource>("[secrets]\n\"sasl.password\" = \"inline\"\n").is_err(),
        "a secret is a reference, never the value"
    );
}

#[test]
fn an_option_given_inline_and_as_a_secret_is_refused() {
    let mut k = kafka(&[("sasl.password", "x")]);
    k.secrets.insert(
        "sasl.password".into(),
        SecretRef::Env {
            env: "KAFKA_PASSWORD".into(),
        },
    );
    let e = k.validate().expect_err("twice");
    assert_eq!(e.key, "source.secrets.sasl.password");
}

#[test]
fn cooperative_sticky_is_refused_naming_the_option_and_why() {
    for v in ["cooperative-sticky", "range, Cooperative-Sticky"] {
        let e = kafka(&[("partition.assignment.strategy", v)])
            .validate()
            .expect_err(v);
        assert_eq!(e.key, "source.options.partition.assignment.strategy");
        assert!(e.message.contains("not supported"), "{}", e.message);
        assert!(e.message.contains("incremental"), "{}", e.message);
    }
    let e = kafka(&[("group.protocol", "consumer")])
        .validate()
        .expect_err("KIP-848");
    assert_eq!(e.key, "source.options.group.protocol");
    for ok in ["range", "roundrobin", "range,roundrobin"] {
        assert!(
            kafka(&[("partition.assignment.strategy", ok)])
                .validate()
                .is_ok(),
            "{ok}"
        );
    }
    assert!(kafka(&[("group.protocol", "classic")]).validate().is_ok());
}
