//! Tests of the config: every file that was valid before the typed config
//! still is and gives the same settings, the new duration spelling gives
//! what the old one did, and every error names its key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use features::FeatureConfig;

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    RawConfig::from_toml(text).and_then(|r| r.validate())
}

fn valid(text: &str) -> Config {
    match parse(text) {
        Ok(c) => c,
        Err(e) => panic!("{e}\nin:\n{text}"),
    }
}

fn invalid(text: &str) -> ConfigError {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// Every setting as text, to compare two configs (the alert rules are a
/// hash map: sorted here).
fn settings(c: &Config) -> String {
    let mut rules: Vec<String> = c
        .alerts
        .engine
        .rules
        .iter()
        .map(|(k, v)| format!("{k}: {v:?}"))
        .collect();
    rules.sort();
    let a = &c.alerts;
    format!(
        "{:?}",
        (
            (&c.source, &c.dead_letter_file, c.shards, c.seed, c.nice),
            (&c.features, c.listen, &c.token_env, &c.labels_file),
            (&c.checkpoint_dir, c.checkpoint_every, &c.export),
            (&c.model_file, &c.model_dir, c.model_watch_every),
            (rules, &a.engine.default_rule, &a.route, &a.receivers),
            (&a.outbox_dir, &a.retry, &a.shadow_file),
        )
    )
}

/// The settings of an empty file.
fn defaults() -> Config {
    RawConfig::default().validate().expect("defaults are valid")
}

#[test]
fn defaults_validate_and_equal_an_empty_file() {
    let c = defaults();
    assert_eq!(c.shards, 2);
    assert_eq!(
        c.source,
        SourceKind::Simulator {
            gpus: 512,
            seed: 7,
            speed: 120.0,
            interval_s: 30,
        }
    );
    assert_eq!(settings(&c), settings(&valid("")));
}

/// `docs/forewarn.example.toml` as it is and as it was before durations
/// were strings: both give exactly the defaults it documents.
#[test]
fn the_annotated_example_gives_its_documented_settings() {
    for text in [
        include_str!("../../../docs/forewarn.example.toml"),
        include_str!("testdata/example-legacy.toml"),
    ] {
        let c = valid(text);
        assert_eq!(
            c.source,
            SourceKind::Simulator {
                gpus: 512,
                seed: 7,
                speed: 120.0,
                interval_s: 30,
            }
        );
        assert_eq!(c.dead_letter_file, None);
        assert_eq!(c.checkpoint_dir, None);
        assert_eq!(c.checkpoint_every, Duration::from_secs(30));
        assert_eq!((c.shards, c.seed, c.nice), (2, 17, 10));
        assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!(c.token_env, "FOREWARN_API_TOKEN");
        assert_eq!(c.labels_file, PathBuf::from("forewarn-labels.csv"));
        assert_eq!(c.silences_file, PathBuf::from("forewarn-silences.json"));
        assert_eq!((c.model_file.as_ref(), c.model_dir.as_ref()), (None, None));
        assert_eq!(c.model_watch_every, None, "no models.dir, nothing watched");
        let x = c.export.as_ref().expect("exports on");
        assert_eq!(x.dir, PathBuf::from("forewarn-export"));
        assert!(x.features);
        assert_eq!(x.feature_sample_every.get(), 1);
        assert_eq!(x.instance, "forewarn");
        assert_eq!(c.features, FeatureConfig::default());
        assert_eq!(settings(&c), settings(&defaults()));
    }
}

/// The service config of the Kafka end-to-end test (`tests/e2e/kafka.rs`),
/// with its alert policy built the way that test builds it.
fn e2e_kafka_config() -> String {
    let head = DEFAULT_ALERTS
        .split("\n[route]")
        .next()
        .expect("policy head");
    let mut policy = String::new();
    for line in head.lines() {
        match line.strip_prefix('[') {
            Some(rest) if !rest.starts_with('[') => policy.push_str(&format!("[alerts.{rest}\n")),
            _ => {
                policy.push_str(line);
                policy.push('\n');
            }
        }
    }
    include_str!("testdata/e2e-kafka.toml").to_string()
        + &policy
        + include_str!("testdata/e2e-kafka-routes.toml")
}

#[test]
fn the_kafka_end_to_end_config_is_valid() {
    let c = valid(&e2e_kafka_config());
    let SourceKind::Kafka(k) = &c.source else {
        panic!("kafka source: {:?}", c.source)
    };
    assert_eq!(k.brokers, "127.0.0.1:9092");
    assert_eq!(k.topics, ["telemetry"]);
    assert_eq!(k.group_id, "forewarn-e2e");
    assert_eq!(k.ready_lag, 0);
    assert!(k.options.is_empty() && k.dead_letter_topic.is_none());
    assert_eq!(c.checkpoint_dir, Some(PathBuf::from("ckpt")));
    assert_eq!(c.silences_file, PathBuf::from("ckpt/silences.json"));
    assert_eq!(c.checkpoint_every, Duration::from_millis(500));
    assert_eq!(c.listen, SocketAddr::from(([127, 0, 0, 1], 18080)));
    assert_eq!(c.alerts.outbox_dir, PathBuf::from("outbox"));
}

#[test]
fn the_kafka_benchmark_config_is_valid() {
    let c = valid(include_str!("testdata/bench-kafka.toml"));
    let SourceKind::Kafka(k) = &c.source else {
        panic!("kafka source: {:?}", c.source)
    };
    assert_eq!(k.topics, ["telemetry"]);
    assert_eq!(k.group_id, "forewarn");
    assert_eq!(k.ready_lag, 10_000);
    assert_eq!(k.options["fetch.wait.max.ms"], "25");
    assert_eq!(c.checkpoint_every, Duration::from_secs(10));
    let x = c.export.as_ref().expect("exports on");
    assert_eq!(x.dir, PathBuf::from("/tmp/w/export"));
}

#[test]
fn a_source_without_type_is_the_simulator() {
    let c = valid(
        "[source]\ngpus = 64\nseed = 3\nspeed = 0\ninterval_s = 10\ndead_letter_file = \"dl.jsonl\"\n",
    );
    assert_eq!(
        c.source,
        SourceKind::Simulator {
            gpus: 64,
            seed: 3,
            speed: 0.0,
            interval_s: 10,
        }
    );
    assert_eq!(c.dead_letter_file.as_deref(), Some(Path::new("dl.jsonl")));
    let c = valid("[source]\ninterval = \"1m\"\n");
    assert!(matches!(
        c.source,
        SourceKind::Simulator { interval_s: 60, .. }
    ));
}

#[test]
fn a_file_source_with_models_and_exports_off() {
    let c = valid(include_str!("testdata/files.toml"));
    assert_eq!(
        c.source,
        SourceKind::Files(vec!["a.jsonl".into(), "b.parquet".into()])
    );
    assert_eq!(c.dead_letter_file.as_deref(), Some(Path::new("dead.jsonl")));
    assert_eq!(c.model_file.as_deref(), Some(Path::new("m.fwm")));
    assert_eq!(c.model_watch_every, Some(Duration::from_millis(2_500)));
    assert!(c.export.is_none());
    assert_eq!(c.checkpoint_dir, None, "files replay from the start");
}

/// The deprecated number keys and the duration strings give the same
/// settings, including every `[features]` duration.
#[test]
fn old_and_new_duration_spellings_agree() {
    let old = valid(include_str!("testdata/durations-legacy.toml"));
    let new = valid(include_str!("testdata/durations.toml"));
    assert_eq!(settings(&old), settings(&new));
    assert_eq!(new.features.silence_ms, 90_000);
    assert_eq!(new.features.gpu_ttl_ms, 86_400_000);
    assert_eq!(new.features.rls_lambda, 0.999);
    assert_eq!(new.checkpoint_every, Duration::from_millis(1_500));
    assert_eq!(new.model_watch_every, None, "0 turns the watch off");
    assert!(matches!(
        new.source,
        SourceKind::Simulator { interval_s: 10, .. }
    ));
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("[pipeline]\nshards = 0\n", "pipeline.shards"),
        ("[pipeline]\nnice = 20\n", "pipeline.nice"),
        ("[source]\ngpus = 0\n", "source.gpus"),
        ("[source]\nspeed = -1\n", "source.speed"),
        ("[source]\ninterval_s = 0\n", "source.interval_s"),
        ("[source]\ninterval = \"1500ms\"\n", "source.interval"),
        ("[source]\ntype = \"files\"\n", "source.files"),
        ("[source]\ntype = \"kafka\"\n", "source.brokers"),
        (
            "[source]\ntype = \"kafka\"\nbrokers = \"b:9092\"\ntopics = []\n",
            "source.topics",
        ),
        (
            "[source]\ntype = \"kafka\"\nbrokers = \"b:9092\"\n[source.options]\n\"enable.auto.commit\" = \"true\"\n",
            "source.options.enable.auto.commit",
        ),
        ("[checkpoint]\ninterval_s = 0\n", "checkpoint.interval_s"),
        ("[checkpoint]\ninterval = \"0s\"\n", "checkpoint.interval"),
        (
            "[checkpoint]\ninterval = \"5s\"\ninterval_s = 5\n",
            "checkpoint.interval_s",
        ),
        (
            "[models]\nwatch_interval_s = -1\n",
            "models.watch_interval_s",
        ),
        ("[export]\ninstance = \"a b\"\n", "export.instance"),
        ("[features]\nsilence = \"0s\"\n", "features.silence"),
        ("[features]\nsilence_ms = 0\n", "features.silence_ms"),
        ("[features]\nrls_lambda = 2.0\n", "features.rls_lambda"),
    ];
    for (text, key) in cases {
        assert_eq!(invalid(text).key, key, "{text}");
    }
}

/// Mistakes serde finds are reported with their key path and line: a key
/// of another source is not ignored.
#[test]
fn parse_errors_say_where() {
    let cases = [
        ("[pipline]\n", "pipline"),
        ("[source]\nbrokers = \"b:9092\"\n", "source.brokers"),
        (
            "[source]\ntype = \"simulator\"\ntopics = [\"t\"]\n",
            "source.topics",
        ),
        (
            "[source]\ntype = \"kafka\"\nbrokers = \"b:9092\"\ngpus = 8\n",
            "source.gpus",
        ),
        (
            "[source]\ntype = \"files\"\nfiles = [\"a\"]\nspeed = 2\n",
            "source.speed",
        ),
        ("[source]\ngpus = \"many\"\n", "source.gpus"),
        ("[source]\ntype = \"carrier-pigeon\"\n", "source.type"),
        ("[source]\ninterval = \"soon\"\n", "source.interval"),
        ("[checkpoint]\ninterval = \"30\"\n", "interval"),
        ("[api]\nlisten = \"localhost\"\n", "listen"),
        (
            "[export]\nfeature_sample_every = 0\n",
            "feature_sample_every",
        ),
        ("[features]\nsilence = 5\n", "silence"),
    ];
    for (text, named) in cases {
        let e = invalid(text);
        assert!(e.key.ends_with(named), "{text}: {e}");
        assert!(e.at.is_some(), "{text}: no line: {e}");
    }
}

#[test]
fn an_explicit_silences_file_wins_over_the_checkpoint_directory() {
    let c = valid("[api]\nsilences_file = \"state/s.json\"\n[checkpoint]\ndir = \"ckpt\"\n");
    assert_eq!(c.silences_file, PathBuf::from("state/s.json"));
    let c = valid("[checkpoint]\ndir = \"ckpt\"\n");
    assert_eq!(c.silences_file, PathBuf::from("ckpt/silences.json"));
}

#[test]
fn kafka_state_is_partition_aligned_in_the_checkpoint_store() {
    let kafka =
        "[source]\ntype = \"kafka\"\nbrokers = \"127.0.0.1:9092\"\ntopics = [\"telemetry\"]\n";
    use crate::checkpoint::partitions::StoreUrl;
    let c = valid(kafka);
    assert_eq!(
        c.partition_store,
        Some(StoreUrl::Dir(PathBuf::from("forewarn-checkpoints")))
    );
    let c = valid(&format!(
        "{kafka}[checkpoint]\ndir = \"ckpt\"\nstore = \"file:///mnt/shared/fw\"\n"
    ));
    assert_eq!(
        c.partition_store,
        Some(StoreUrl::Dir(PathBuf::from("/mnt/shared/fw")))
    );
    assert_eq!(c.checkpoint_dir, Some(PathBuf::from("ckpt")));
    let c = valid(&format!("{kafka}[checkpoint]\npartitions = false\n"));
    assert_eq!(
        c.partition_store, None,
        "the instance-wide layout on request"
    );
    let c = valid(&format!(
        "{kafka}[checkpoint]\nstore = \"s3://bucket/fw/\"\n"
    ));
    assert_eq!(
        c.partition_store,
        Some(StoreUrl::S3 {
            bucket: "bucket".into(),
            prefix: "fw".into()
        })
    );
    let e = invalid(&format!(
        "{kafka}[checkpoint]\nstore = \"gs://bucket/fw\"\n"
    ));
    assert_eq!(e.key, "checkpoint.store");
    // Files and the simulator never partition their state.
    let c = valid("[checkpoint]\ndir = \"ckpt\"\n");
    assert_eq!(c.partition_store, None);
}
