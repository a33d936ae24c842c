//! `forewarn.toml`: one file for sources, pipeline, features, alerts and
//! REST, in two layers (STYLE §5): [`RawConfig`] is the file as written
//! (unknown keys are errors, every field documented); [`RawConfig::validate`]
//! builds [`Config`] with no I/O and errors that name the key. An annotated
//! example is `docs/forewarn.example.toml`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use features::FeatureConfig;
use serde::Deserialize;

use crate::sources::kafka::KafkaSettings;

/// The alert policy used when the file has no `[alerts]` table.
pub const DEFAULT_ALERTS: &str = include_str!("default_alerts.toml");

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Where telemetry comes from. Default: the built-in simulated fleet.
    #[serde(default)]
    pub source: RawSource,
    /// Shards and seeds.
    #[serde(default)]
    pub pipeline: RawPipeline,
    /// Feature-stage knobs (see `features::FeatureConfig`).
    pub features: Option<FeatureConfig>,
    /// Alert policy, routes and receivers (see `docs/alerts.md`). Default:
    /// the built-in policy writing `forewarn-alerts.jsonl`.
    pub alerts: Option<alerts::RawConfig>,
    /// REST API.
    #[serde(default)]
    pub api: RawApi,
    /// Periodic state snapshots for restarts.
    #[serde(default)]
    pub checkpoint: RawCheckpoint,
    /// Parquet exports of features, scores and alerts (training input).
    #[serde(default)]
    pub export: RawExport,
    /// The failure model and where new ones are picked up.
    #[serde(default)]
    pub models: RawModels,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModels {
    /// Failure model artifact to start with (`forewarn train --out`);
    /// `serve --model` overrides it. Default none: rules, trends and the
    /// anomaly forest only.
    pub failure: Option<PathBuf>,
    /// Directory watched for new artifacts (`*.fwm`; the newest by
    /// modification time wins). Write a new one under a temporary or
    /// hidden name and rename it in. Default none.
    pub dir: Option<PathBuf>,
    /// Seconds between looks at `dir`. Default 10; 0 turns the watch off
    /// (`POST /v1/models/reload` still works).
    pub watch_interval_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExport {
    /// Write exports. Default true for `serve`.
    pub enabled: Option<bool>,
    /// Root directory. Default `forewarn-export`.
    pub dir: Option<PathBuf>,
    /// Also write feature rows (most of the bytes). Default true.
    pub features: Option<bool>,
    /// Keep every Nth feature row per GPU. Default 1.
    pub feature_sample_every: Option<u32>,
    /// Writer id prefix, unique per process and stable across restarts.
    /// Default `forewarn`.
    pub instance: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCheckpoint {
    /// Directory of checkpoint files. Default `forewarn-checkpoints` with
    /// the Kafka source; none (no checkpoints) with the simulator or files.
    pub dir: Option<PathBuf>,
    /// Seconds between checkpoints. Default 30.
    pub interval_s: Option<f64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSource {
    /// `simulator` (default), `kafka` or `files`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Simulated GPUs. Default 512: a few racks, a page of failures a day.
    pub gpus: Option<usize>,
    /// Simulation seed. Default 7.
    pub seed: Option<u64>,
    /// Event time per wall second. Default 120: two demo hours pass in a minute.
    pub speed: Option<f64>,
    /// Seconds between samples. Default 30 (dcgm-exporter's default scrape).
    pub interval_s: Option<u32>,
    /// Files for `type = "files"`.
    #[serde(default)]
    pub files: Vec<PathBuf>,
    /// Undecodable input goes here (JSON lines with the reason). Default none.
    pub dead_letter_file: Option<PathBuf>,
    /// Kafka: bootstrap brokers, `host:port[,host:port]`.
    pub brokers: Option<String>,
    /// Kafka: topics to consume. Default `["telemetry"]`.
    pub topics: Option<Vec<String>>,
    /// Kafka: consumer group. Default `forewarn`.
    pub group_id: Option<String>,
    /// Kafka: undecodable messages are also produced here, with a `reason` header.
    pub dead_letter_topic: Option<String>,
    /// Kafka: librdkafka client options passed through (SASL, TLS, tuning),
    /// e.g. `{ "security.protocol" = "SASL_SSL" }`.
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// Kafka: `/readyz` answers ready once total consumer lag is at most
    /// this many messages. Default 10000.
    pub ready_lag: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    /// Shard threads. Default 2: this is a 2-core machine's worth.
    pub shards: Option<usize>,
    /// Seed of every model's randomness. Default 17.
    pub seed: Option<u64>,
    /// Nice value (0–19) of the pipeline threads under `serve`, so REST
    /// lookups are served first when ingest keeps every core busy.
    /// Default 10; 0 leaves them at the process's priority.
    pub nice: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawApi {
    /// Listen address. Default 127.0.0.1:8080.
    pub listen: Option<String>,
    /// Environment variable holding the bearer token for changes (silences,
    /// labels, reloads). Default `FOREWARN_API_TOKEN`; unset = changes refused.
    pub token_env: Option<String>,
    /// Label store: `POST /v1/labels` appends here (the contract's
    /// `gpu,ts,kind` CSV, read by `forewarn train --labels`). Default
    /// `forewarn-labels.csv`.
    pub labels_file: Option<PathBuf>,
}

/// Source kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    Simulator {
        gpus: usize,
        seed: u64,
        speed: f64,
        interval_s: u32,
    },
    Files(Vec<PathBuf>),
    Kafka(KafkaSettings),
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub source: SourceKind,
    pub dead_letter_file: Option<PathBuf>,
    pub shards: usize,
    pub seed: u64,
    /// Nice value of the pipeline threads (`serve`).
    pub nice: i32,
    pub features: FeatureConfig,
    pub alerts: alerts::Config,
    pub listen: SocketAddr,
    pub token_env: String,
    pub labels_file: PathBuf,
    /// Checkpoint directory (none: no checkpoints).
    pub checkpoint_dir: Option<PathBuf>,
    pub checkpoint_every: Duration,
    /// Parquet exports (none: disabled).
    pub export: Option<crate::export::ExportSettings>,
    /// Failure model to start with.
    pub model_file: Option<PathBuf>,
    /// Directory of new model artifacts.
    pub model_dir: Option<PathBuf>,
    /// How often `model_dir` is looked at (none: not watched).
    pub model_watch_every: Option<Duration>,
}

/// A config problem, naming the key.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}

impl RawConfig {
    /// Parses TOML text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| {
            err(
                "config",
                e.message().to_string()
                    + &e.span().map_or(String::new(), |s| {
                        format!(" (bytes {}..{})", s.start, s.end)
                    }),
            )
        })
    }

    /// Checks everything; no I/O.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let s = &self.source;
        let source = match s.kind.as_deref().unwrap_or("simulator") {
            "simulator" => {
                let gpus = s.gpus.unwrap_or(512);
                if gpus == 0 || gpus > 200_000 {
                    return Err(err("source.gpus", "must be between 1 and 200000"));
                }
                let speed = s.speed.unwrap_or(120.0);
                if !(speed >= 0.0 && speed.is_finite()) {
                    return Err(err(
                        "source.speed",
                        "must be a finite number >= 0 (0 = as fast as possible)",
                    ));
                }
                let interval_s = s.interval_s.unwrap_or(30);
                if interval_s == 0 {
                    return Err(err("source.interval_s", "must be at least 1"));
                }
                SourceKind::Simulator {
                    gpus,
                    seed: s.seed.unwrap_or(7),
                    speed,
                    interval_s,
                }
            }
            "files" => {
                if s.files.is_empty() {
                    return Err(err(
                        "source.files",
                        "type = \"files\" needs at least one file",
                    ));
                }
                SourceKind::Files(s.files.clone())
            }
            "kafka" => {
                let Some(brokers) = s.brokers.clone().filter(|b| !b.trim().is_empty()) else {
                    return Err(err(
                        "source.brokers",
                        "type = \"kafka\" needs brokers = \"host:port[,host:port]\"",
                    ));
                };
                let topics = s.topics.clone().unwrap_or_else(|| vec!["telemetry".into()]);
                if topics.is_empty() || topics.iter().any(|t| t.trim().is_empty()) {
                    return Err(err("source.topics", "needs at least one non-empty topic"));
                }
                let ready_lag = s.ready_lag.unwrap_or(10_000);
                if ready_lag < 0 {
                    return Err(err("source.ready_lag", "must be >= 0"));
                }
                for key in ["enable.auto.commit", "enable.auto.offset.store"] {
                    if s.options.contains_key(key) {
                        return Err(err(
                            &format!("source.options.{key}"),
                            "forewarn commits offsets itself, after checkpoints; remove this option",
                        ));
                    }
                }
                SourceKind::Kafka(KafkaSettings {
                    brokers,
                    topics,
                    group_id: s.group_id.clone().unwrap_or_else(|| "forewarn".into()),
                    options: s.options.clone(),
                    dead_letter_topic: s.dead_letter_topic.clone(),
                    ready_lag,
                })
            }
            other => {
                return Err(err(
                    "source.type",
                    format!("unknown source {other:?}: expected simulator, kafka or files"),
                ));
            }
        };
        let nice = self.pipeline.nice.unwrap_or(10);
        if !(0..=19).contains(&nice) {
            return Err(err("pipeline.nice", "must be between 0 and 19"));
        }
        let shards = self.pipeline.shards.unwrap_or(2);
        if !(1..=256).contains(&shards) {
            return Err(err("pipeline.shards", "must be between 1 and 256"));
        }
        let features = self.features.clone().unwrap_or_default();
        features
            .validate()
            .map_err(|e| err("features", e.to_string()))?;
        let raw_alerts = match &self.alerts {
            Some(a) => a.clone(),
            None => alerts::RawConfig::from_toml(DEFAULT_ALERTS)
                .map_err(|e| err("alerts (built-in default)", e.to_string()))?,
        };
        let alerts = raw_alerts
            .validate()
            .map_err(|e| err("alerts", e.to_string()))?;
        let listen_text = self.api.listen.as_deref().unwrap_or("127.0.0.1:8080");
        let listen = listen_text.parse().map_err(|e| {
            err(
                "api.listen",
                format!("{listen_text:?} is not an address:port: {e}"),
            )
        })?;
        let checkpoint_every = self.checkpoint.interval_s.unwrap_or(30.0);
        if !(checkpoint_every > 0.0 && checkpoint_every.is_finite()) {
            return Err(err(
                "checkpoint.interval_s",
                "must be a positive number of seconds",
            ));
        }
        let checkpoint_dir = match (&self.checkpoint.dir, &source) {
            (Some(d), _) => Some(d.clone()),
            (None, SourceKind::Kafka(_)) => Some(PathBuf::from("forewarn-checkpoints")),
            (None, _) => None,
        };
        let x = &self.export;
        let every = x.feature_sample_every.unwrap_or(1);
        let Some(feature_sample_every) = std::num::NonZeroU32::new(every) else {
            return Err(err("export.feature_sample_every", "must be at least 1"));
        };
        let instance = x.instance.clone().unwrap_or_else(|| "forewarn".into());
        if instance.is_empty()
            || !instance
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(err("export.instance", "must be [A-Za-z0-9_-]+"));
        }
        let export = x
            .enabled
            .unwrap_or(true)
            .then(|| crate::export::ExportSettings {
                dir: x
                    .dir
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("forewarn-export")),
                features: x.features.unwrap_or(true),
                feature_sample_every,
                instance,
            });
        let watch = self.models.watch_interval_s.unwrap_or(10.0);
        if !(watch >= 0.0 && watch.is_finite()) {
            return Err(err(
                "models.watch_interval_s",
                "must be a number of seconds >= 0 (0 = no watch)",
            ));
        }
        Ok(Config {
            model_file: self.models.failure.clone(),
            model_dir: self.models.dir.clone(),
            model_watch_every: (watch > 0.0 && self.models.dir.is_some())
                .then(|| Duration::from_secs_f64(watch)),
            export,
            checkpoint_dir,
            checkpoint_every: Duration::from_secs_f64(checkpoint_every),
            source,
            dead_letter_file: s.dead_letter_file.clone(),
            shards,
            nice,
            seed: self.pipeline.seed.unwrap_or(17),
            features,
            alerts,
            listen,
            labels_file: self
                .api
                .labels_file
                .clone()
                .unwrap_or_else(|| PathBuf::from("forewarn-labels.csv")),
            token_env: self
                .api
                .token_env
                .clone()
                .unwrap_or_else(|| "FOREWARN_API_TOKEN".into()),
        })
    }

    /// Reads and validates a file, or the defaults when `path` is `None`.
    pub fn load(path: Option<&std::path::Path>) -> anyhow::Result<Config> {
        let raw = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| anyhow::anyhow!("reading config {}: {e}", p.display()))?;
                RawConfig::from_toml(&text).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
            }
            None => RawConfig::default(),
        };
        raw.validate()
            .map_err(|e| anyhow::anyhow!("invalid config: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let c = RawConfig::default().validate().expect("defaults are valid");
        assert_eq!(c.shards, 2);
        assert!(matches!(c.source, SourceKind::Simulator { gpus: 512, .. }));
    }

    #[test]
    fn errors_name_the_key() {
        let e = RawConfig::from_toml("[pipeline]\nshards = 0\n")
            .and_then(|r| r.validate().map(|_| ()))
            .expect_err("0 shards");
        assert_eq!(e.key, "pipeline.shards");
        let e = RawConfig::from_toml("[source]\ntype = \"carrier-pigeon\"\n")
            .and_then(|r| r.validate().map(|_| ()))
            .expect_err("bad type");
        assert_eq!(e.key, "source.type");
        assert!(
            RawConfig::from_toml("[pipline]\n").is_err(),
            "unknown keys are errors"
        );
    }

    #[test]
    fn the_annotated_example_is_valid() {
        let raw = RawConfig::from_toml(include_str!("../../../docs/forewarn.example.toml"))
            .expect("example parses");
        raw.validate().expect("example validates");
    }

    #[test]
    fn kafka_needs_brokers_and_refuses_auto_commit() {
        let e = RawConfig::from_toml("[source]\ntype = \"kafka\"\n")
            .and_then(|r| r.validate().map(|_| ()))
            .expect_err("no brokers");
        assert_eq!(e.key, "source.brokers");
        let e = RawConfig::from_toml(
            "[source]\ntype = \"kafka\"\nbrokers = \"127.0.0.1:9092\"\n[source.options]\n\"enable.auto.commit\" = \"true\"\n",
        )
        .and_then(|r| r.validate().map(|_| ()))
        .expect_err("auto commit");
        assert_eq!(e.key, "source.options.enable.auto.commit");
        let c = RawConfig::from_toml(
            "[source]\ntype = \"kafka\"\nbrokers = \"127.0.0.1:9092\"\n[checkpoint]\ninterval_s = 5\n",
        )
        .expect("parses")
        .validate()
        .expect("valid");
        let SourceKind::Kafka(k) = &c.source else {
            panic!("kafka source")
        };
        assert_eq!(k.topics, vec!["telemetry".to_string()]);
        assert_eq!(k.group_id, "forewarn");
        assert_eq!(
            c.checkpoint_dir.as_deref(),
            Some(std::path::Path::new("forewarn-checkpoints"))
        );
        assert_eq!(c.checkpoint_every, Duration::from_secs(5));
    }
}
