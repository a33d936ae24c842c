//! The fleet topic's writer against librdkafka's in-process mock broker:
//! a barrier's [`Publisher::confirm`] says whether every round sent before
//! it reached the topic.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

use super::publish::Publisher;
use crate::sources::kafka::KafkaSettings;

fn settings(brokers: &str) -> KafkaSettings {
    KafkaSettings {
        brokers: brokers.to_owned(),
        topics: vec!["telemetry".into()],
        group_id: "g".into(),
        options: BTreeMap::from([("message.timeout.ms".to_owned(), "3000".to_owned())]),
        secrets: BTreeMap::new(),
        dead_letter_topic: None,
        fleet_topic: Some("fleet".into()),
        ready_lag: 0,
    }
}

#[test]
fn a_barrier_is_confirmed_only_when_every_round_before_it_reached_the_topic() {
    let mock = MockCluster::new(1).expect("mock cluster");
    mock.create_topic("fleet", 1, 1).expect("topic");
    let p = Publisher::open(&settings(&mock.bootstrap_servers()), "fleet", "i1").expect("open");
    let wait = Duration::from_secs(10);

    p.round(vec!["telemetry-0".into()], None, &[], &[], &[]);
    assert!(p.confirm(wait).is_ok(), "a delivered round");

    // The broker refuses the next write for good (not retriable): the
    // round is lost, and the barrier must not checkpoint past it.
    mock.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
    );
    p.round(vec!["telemetry-0".into()], Some(1), &[], &[], &[]);
    let refused = p.confirm(wait);
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("not delivered")),
        "{refused:?}"
    );

    // The next barrier judges only what was sent after the last one.
    p.round(vec!["telemetry-0".into()], Some(2), &[], &[], &[]);
    assert!(p.confirm(wait).is_ok(), "delivered again");
}
