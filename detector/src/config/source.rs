//! `[source]`: where the pipeline's telemetry comes from. One variant per
//! `type`, each with only its own keys, so a key of another source (a
//! Kafka `brokers` under the simulator) is an error rather than silently
//! ignored. A table without `type` is the simulator, as it always was.
//! [`RawSource::validate`] turns the variant into the [`SourceKind`] the
//! `serve` command runs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer};

use super::duration::{self, ConfigDuration, Spelled};
use super::error::{ConfigError, err};
use crate::sources::kafka::{KafkaSettings, SecretRef};

/// The `[source]` table as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum RawSource {
    /// The built-in simulated fleet (the default).
    Simulator(SimulatorSource),
    /// A Kafka consumer group.
    Kafka(KafkaSource),
    /// Telemetry files read in order.
    Files(FileSource),
    /// Prometheus remote-write to `POST /api/v1/write`.
    #[serde(rename = "remote_write")]
    RemoteWrite(RemoteWriteSource),
    /// dcgm-exporter endpoints scraped by forewarn itself.
    Scrape(ScrapeSource),
}

impl Default for RawSource {
    fn default() -> Self {
        RawSource::Simulator(SimulatorSource::default())
    }
}

/// `type = "simulator"`: the demo fleet of `datasets::simulator`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulatorSource {
    /// Simulated GPUs.
    #[serde(default = "default_gpus")]
    pub gpus: usize,
    /// Simulation seed: same seed, same fleet, same failures.
    #[serde(default = "default_sim_seed")]
    pub seed: u64,
    /// Event time per wall second; 0 = as fast as possible.
    #[serde(default = "default_speed")]
    pub speed: f64,
    /// Time between two samples of one GPU, in whole seconds. Default
    /// [`default_interval`].
    pub interval: Option<ConfigDuration>,
    /// Deprecated: `interval` in seconds.
    pub interval_s: Option<u32>,
    /// Undecodable input goes here (JSON lines with the reason).
    pub dead_letter_file: Option<PathBuf>,
}

/// 512: a few racks (8 GPUs a host, 4 hosts a rack: 16 racks), which at
/// the demo's failure rate fills a page with failures a day.
fn default_gpus() -> usize {
    512
}

/// 7: an arbitrary fixed seed, so the demo shows the same fleet every run.
fn default_sim_seed() -> u64 {
    7
}

/// 120: two hours of event time pass in a wall minute of the demo.
fn default_speed() -> f64 {
    120.0
}

/// 30 s: dcgm-exporter's default scrape interval.
pub fn default_interval() -> u32 {
    30
}

impl Default for SimulatorSource {
    fn default() -> Self {
        SimulatorSource {
            gpus: default_gpus(),
            seed: default_sim_seed(),
            speed: default_speed(),
            interval: None,
            interval_s: None,
            dead_letter_file: None,
        }
    }
}

/// `type = "kafka"`: a consumer group on one or more topics. `Debug`
/// shows secret option values redacted (a password given inline too).
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSource {
    /// Bootstrap brokers, `host:port[,host:port]` (required; checked in
    /// `validate`, so the message can say how to write it).
    pub brokers: Option<String>,
    /// Topics to consume; messages keyed by GPU UUID.
    #[serde(default = "default_topics")]
    pub topics: Vec<String>,
    /// Consumer group.
    #[serde(default = "default_group_id")]
    pub group_id: String,
    /// Undecodable messages are also produced here, with a `reason` header.
    pub dead_letter_topic: Option<String>,
    /// The group's internal topic (one partition) through which every
    /// instance shares assessments, alert events and silences: one alert
    /// stage for the whole fleet, and any instance answers REST for any
    /// GPU (docs/scaling.md). Unset: each instance alerts on the
    /// partitions it holds.
    pub fleet_topic: Option<String>,
    /// librdkafka client options passed through (SASL, TLS, tuning), e.g.
    /// `{ "security.protocol" = "SASL_SSL" }`.
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// librdkafka options whose values come from an environment variable
    /// or a file, read when `serve` starts: `"sasl.password" = { env =
    /// "KAFKA_PASSWORD" }` or `{ file = "/run/secrets/kafka" }` (trimmed).
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretRef>,
    /// `/readyz` answers ready once total consumer lag is at most this
    /// many messages.
    #[serde(default = "default_ready_lag")]
    pub ready_lag: u64,
    /// Undecodable input goes here (JSON lines with the reason).
    pub dead_letter_file: Option<PathBuf>,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("brokers", &self.brokers)
            .field("topics", &self.topics)
            .field("group_id", &self.group_id)
            .field("dead_letter_topic", &self.dead_letter_topic)
            .field(
                "options",
                &crate::sources::kafka::secrets::redacted(&self.options),
            )
            .field("secrets", &self.secrets)
            .field("ready_lag", &self.ready_lag)
            .field("dead_letter_file", &self.dead_letter_file)
            .finish()
    }
}

/// `telemetry`: the topic `forewarn replay` produces to by default.
fn default_topics() -> Vec<String> {
    vec!["telemetry".into()]
}

/// `forewarn`: one group per deployment; instances of one service share it.
fn default_group_id() -> String {
    "forewarn".into()
}

/// 10,000 messages: a round number, small next to the backlog a restart
/// replays and large next to the few fetches a consumer that keeps up lags.
fn default_ready_lag() -> u64 {
    10_000
}

/// `type = "files"`: telemetry files read in order (JSON lines, Parquet,
/// dcgm-exporter text, nvidia-smi CSV).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSource {
    /// The files, at least one (checked in `validate`).
    #[serde(default)]
    pub files: Vec<PathBuf>,
    /// Undecodable input goes here (JSON lines with the reason).
    pub dead_letter_file: Option<PathBuf>,
}

/// `type = "remote_write"`: Prometheus (or any remote-write 1.0 sender)
/// posts to `/api/v1/write` on the REST listener.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteWriteSource {
    /// Undecodable input goes here (JSON lines with the reason).
    pub dead_letter_file: Option<PathBuf>,
}

/// `type = "scrape"`: forewarn scrapes dcgm-exporter endpoints itself.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScrapeSource {
    /// `host:port` (scraped at `<scheme>://host:port<metrics_path>`) or
    /// full URLs.
    #[serde(default)]
    pub targets: Vec<String>,
    /// A Prometheus `file_sd` file (JSON or YAML list of `{targets,
    /// labels}`), re-read when it changes.
    pub file_sd: Option<PathBuf>,
    /// Time between two scrapes of a target. Default 30 s.
    pub interval: Option<ConfigDuration>,
    /// A scrape not answered within this is a failed one. Default 10 s
    /// (capped at `interval`).
    pub timeout: Option<ConfigDuration>,
    /// `http` (default) or `https`.
    #[serde(default = "default_scheme")]
    pub scheme: String,
    /// Default `/metrics`.
    #[serde(default = "default_metrics_path")]
    pub metrics_path: String,
    /// Undecodable input goes here (JSON lines with the reason).
    pub dead_letter_file: Option<PathBuf>,
}

fn default_scheme() -> String {
    "http".into()
}

fn default_metrics_path() -> String {
    "/metrics".into()
}

/// Source kinds.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    RemoteWrite,
    Scrape(crate::sources::scrape::ScrapeSettings),
    Simulator {
        gpus: usize,
        seed: u64,
        speed: f64,
        interval_s: u32,
    },
    Files(Vec<PathBuf>),
    Kafka(KafkaSettings),
}

/// Reads `[source]`, taking a table without `type` as the simulator.
/// The variant is decoded from the table once more key by key when it
/// fails, so the error names the key (`source.brokers`) even though the
/// tagged decoding itself reports none.
pub fn deserialize_source<'de, D: Deserializer<'de>>(d: D) -> Result<RawSource, D::Error> {
    let mut table = toml::Table::deserialize(d)?;
    table
        .entry("type")
        .or_insert_with(|| toml::Value::String("simulator".into()));
    let decode = |t: toml::Table| toml::Value::Table(t).try_into::<RawSource>();
    decode(table.clone()).map_err(|e| {
        let only = |key: Option<&str>| {
            let mut t = toml::Table::new();
            for k in std::iter::once("type").chain(key) {
                if let Some(v) = table.get(k) {
                    t.insert(k.into(), v.clone());
                }
            }
            decode(t).is_err()
        };
        let key = if only(None) {
            Some("type")
        } else {
            table
                .keys()
                .map(String::as_str)
                .find(|k| *k != "type" && only(Some(*k)))
        };
        let message = e.message().trim_end().to_string();
        serde::de::Error::custom(match key {
            Some(k) => format!("source.{k}: {message}"),
            None => format!("source: {message}"),
        })
    })
}

/// What a problem of `source.<key>` is reported as.
fn key(k: &str) -> String {
    format!("source.{k}")
}

impl RawSource {
    /// Undecodable input file, whichever the source.
    pub fn dead_letter_file(&self) -> Option<&PathBuf> {
        match self {
            RawSource::Simulator(s) => s.dead_letter_file.as_ref(),
            RawSource::Kafka(k) => k.dead_letter_file.as_ref(),
            RawSource::Files(f) => f.dead_letter_file.as_ref(),
            RawSource::RemoteWrite(r) => r.dead_letter_file.as_ref(),
            RawSource::Scrape(s) => s.dead_letter_file.as_ref(),
        }
    }

    /// Checks what the types cannot say: ranges, required keys, refused
    /// options.
    pub fn validate(&self) -> Result<SourceKind, ConfigError> {
        match self {
            RawSource::Simulator(s) => s.validate(),
            RawSource::Kafka(k) => k.validate(),
            RawSource::Files(f) => {
                if f.files.is_empty() {
                    return Err(err(
                        &key("files"),
                        "type = \"files\" needs at least one file",
                    ));
                }
                Ok(SourceKind::Files(f.files.clone()))
            }
            RawSource::RemoteWrite(_) => Ok(SourceKind::RemoteWrite),
            RawSource::Scrape(s) => s.validate(),
        }
    }
}

impl SimulatorSource {
    fn validate(&self) -> Result<SourceKind, ConfigError> {
        if self.gpus == 0 || self.gpus > 200_000 {
            return Err(err(&key("gpus"), "must be between 1 and 200000"));
        }
        if !(self.speed >= 0.0 && self.speed.is_finite()) {
            return Err(err(
                &key("speed"),
                "must be a finite number >= 0 (0 = as fast as possible)",
            ));
        }
        let spelled = duration::either(
            &key("interval"),
            self.interval,
            &key("interval_s"),
            self.interval_s,
            |s| Some(std::time::Duration::from_secs(s.into())),
        )?;
        let interval_s = match spelled {
            Spelled::Unset => default_interval(),
            Spelled::Old(0) => {
                return Err(err(&key("interval_s"), "must be at least 1"));
            }
            Spelled::Old(s) => s,
            Spelled::New(d) => match u32::try_from(d.as_secs()) {
                Ok(s) if s >= 1 && d.subsec_nanos() == 0 => s,
                _ => {
                    return Err(err(
                        &key("interval"),
                        "must be a whole number of seconds, at least \"1s\"",
                    ));
                }
            },
        };
        Ok(SourceKind::Simulator {
            gpus: self.gpus,
            seed: self.seed,
            speed: self.speed,
            interval_s,
        })
    }
}

impl ScrapeSource {
    fn validate(&self) -> Result<SourceKind, ConfigError> {
        use crate::sources::scrape::{ScrapeSettings, target_url};
        if self.targets.is_empty() && self.file_sd.is_none() {
            return Err(err(
                &key("targets"),
                "type = \"scrape\" needs targets = [\"host:port\", ...] and/or file_sd = \"path\"",
            ));
        }
        if !matches!(self.scheme.as_str(), "http" | "https") {
            return Err(err(&key("scheme"), "must be \"http\" or \"https\""));
        }
        if !self.metrics_path.starts_with('/') {
            return Err(err(&key("metrics_path"), "must start with '/'"));
        }
        let mut targets = Vec::new();
        for t in &self.targets {
            let url = target_url(t, &self.scheme, &self.metrics_path)
                .map_err(|why| err(&key("targets"), format!("{t:?}: {why}")))?;
            targets.push(url);
        }
        let interval = self
            .interval
            .map_or(std::time::Duration::from_secs(30), |d| d.0);
        if interval < std::time::Duration::from_millis(100) {
            return Err(err(&key("interval"), "must be at least \"100ms\""));
        }
        let timeout = self
            .timeout
            .map_or(std::time::Duration::from_secs(10), |d| d.0)
            .min(interval);
        if timeout.is_zero() {
            return Err(err(&key("timeout"), "must be above zero"));
        }
        Ok(SourceKind::Scrape(ScrapeSettings {
            targets,
            file_sd: self.file_sd.clone(),
            interval,
            timeout,
            scheme: self.scheme.clone(),
            metrics_path: self.metrics_path.clone(),
        }))
    }
}

impl KafkaSource {
    fn validate(&self) -> Result<SourceKind, ConfigError> {
        let Some(brokers) = self.brokers.clone().filter(|b| !b.trim().is_empty()) else {
            return Err(err(
                &key("brokers"),
                "type = \"kafka\" needs brokers = \"host:port[,host:port]\"",
            ));
        };
        if self.topics.is_empty() || self.topics.iter().any(|t| t.trim().is_empty()) {
            return Err(err(&key("topics"), "needs at least one non-empty topic"));
        }
        if let Some(f) = &self.fleet_topic
            && (f.trim().is_empty() || self.topics.contains(f))
        {
            return Err(err(
                &key("fleet_topic"),
                "names the group's internal topic: not empty, and not a telemetry topic",
            ));
        }
        let ready_lag = i64::try_from(self.ready_lag)
            .map_err(|_| err(&key("ready_lag"), "must be below 2^63"))?;
        for option in ["enable.auto.commit", "enable.auto.offset.store"] {
            if self.options.contains_key(option) {
                return Err(err(
                    &key(&format!("options.{option}")),
                    "forewarn commits offsets itself, after checkpoints; remove this option",
                ));
            }
        }
        refuse_incremental_rebalance(&self.options)?;
        if let Some(k) = self.secrets.keys().find(|k| self.options.contains_key(*k)) {
            return Err(err(
                &key(&format!("secrets.{k}")),
                "also given in source.options: keep one (the secret)",
            ));
        }
        Ok(SourceKind::Kafka(KafkaSettings {
            brokers,
            topics: self.topics.clone(),
            group_id: self.group_id.clone(),
            options: self.options.clone(),
            secrets: self.secrets.clone(),
            dead_letter_topic: self.dead_letter_topic.clone(),
            fleet_topic: self.fleet_topic.clone(),
            ready_lag,
        }))
    }
}

/// Refuses the incremental (cooperative) rebalance protocols. The source
/// treats every assignment as the whole set and every revoke as "all of
/// it": it drops the batch in hand and relies on the partitions being
/// assigned again to re-read it from what the pipeline holds. Under an
/// incremental revoke the partitions kept are never assigned again, so the
/// dropped messages of those partitions would be skipped.
fn refuse_incremental_rebalance(options: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    let why = "forewarn needs eager rebalancing (all partitions revoked, then assigned): its checkpoint-before-revoke and re-read after assign do not handle incremental assign / revoke, under which the partitions kept would skip the batch dropped at a revoke";
    if let Some(v) = options.get("partition.assignment.strategy")
        && v.split(',')
            .any(|s| s.trim().eq_ignore_ascii_case("cooperative-sticky"))
    {
        return Err(err(
            &key("options.partition.assignment.strategy"),
            format!(
                "{v:?} is not supported: {why}; use \"range\" and/or \"roundrobin\" (the default)"
            ),
        ));
    }
    if let Some(v) = options.get("group.protocol")
        && v.trim().eq_ignore_ascii_case("consumer")
    {
        return Err(err(
            &key("options.group.protocol"),
            format!("{v:?} (KIP-848) is not supported: {why}; use \"classic\" (the default)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
