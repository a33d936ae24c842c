//! `forewarn.toml`: one file for sources, pipeline, features, alerts and
//! REST, read in two layers (STYLE §5). [`RawConfig`] is the file as
//! written: typed tables, unknown keys are errors, each default a function
//! next to its field. [`RawConfig::validate`] checks what the types cannot
//! say (ranges, cross-field rules), with no I/O and errors that name the
//! full key, and builds the [`Config`] the commands run with. An annotated
//! example is `docs/forewarn.example.toml`. Every error names its key path
//! and, where the file has the key, its line and column (`locate.rs`); the
//! `[alerts]` table layers over the built-in policy (`layer.rs`).
//!
//! Layout: `source.rs` (the `[source]` variants), `sections.rs` (pipeline,
//! checkpoint, export, models), `api.rs` (the REST API), `feature_stage.rs` (the feature stage's
//! knobs), `duration.rs` (duration strings and the deprecated number keys).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use features::FeatureConfig;
use serde::Deserialize;

mod api;
mod duration;
mod error;
mod feature_stage;
pub mod layer;
pub mod locate;
mod sections;
mod source;
#[cfg(test)]
mod tests;

pub use api::RawApi;
pub use duration::ConfigDuration;
pub use error::ConfigError;
use error::err;
pub use feature_stage::RawFeatures;
pub use sections::{RawCheckpoint, RawExport, RawModels, RawPipeline};
pub use source::{FileSource, KafkaSource, RawSource, SimulatorSource, SourceKind};

pub use layer::DEFAULT_ALERTS;

/// The file as written. Every table is optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Where telemetry comes from. Default: the built-in simulated fleet.
    #[serde(default, deserialize_with = "source::deserialize_source")]
    pub source: RawSource,
    /// Shards and seeds.
    #[serde(default)]
    pub pipeline: RawPipeline,
    /// Feature-stage knobs (see `features::FeatureConfig`).
    #[serde(default)]
    pub features: RawFeatures,
    /// Alert policy, routes and receivers (see `docs/alerts.md`), layered
    /// over [`DEFAULT_ALERTS`], the built-in policy writing
    /// `forewarn-alerts.jsonl` (`base = "none"`: not layered). Parsed typed
    /// here so that its errors have lines; the layering reads
    /// [`RawConfig::alerts_table`].
    pub alerts: Option<alerts::RawConfig>,
    /// The `[alerts]` table as written, for the layering (set by
    /// [`RawConfig::from_toml`]; a config built in code with `alerts` set and
    /// no table uses `alerts` as the whole policy).
    #[serde(skip)]
    pub alerts_table: Option<toml::Table>,
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

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub source: SourceKind,
    pub dead_letter_file: Option<PathBuf>,
    pub shards: usize,
    pub seed: u64,
    /// GPUs tracked at once (`[pipeline] max_gpus`).
    pub max_gpus: usize,
    /// Nice value of the pipeline threads (`serve`).
    pub nice: i32,
    pub features: FeatureConfig,
    pub alerts: alerts::Config,
    pub listen: SocketAddr,
    pub token_env: String,
    /// Variable holding the read token (none: reads are open).
    pub read_token_env: Option<String>,
    pub labels_file: PathBuf,
    /// Where API-made silences are kept across restarts.
    pub silences_file: PathBuf,
    /// REST timeouts, caps and TLS.
    pub api: crate::api::server::ServerSettings,
    /// Checkpoint directory (none: no checkpoints).
    pub checkpoint_dir: Option<PathBuf>,
    /// Root of the partition checkpoint store: set with the Kafka source
    /// and checkpoints, unless `checkpoint.partitions = false`
    /// (docs/scaling.md).
    pub partition_store: Option<crate::checkpoint::partitions::StoreUrl>,
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

impl RawConfig {
    /// Parses TOML text. The error names the key path and its line and
    /// column.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let mut raw: RawConfig = toml::from_str(text).map_err(|e| parse_error(&e, text))?;
        if raw.alerts.is_some() {
            let mut doc: toml::Table = toml::from_str(text).map_err(|e| parse_error(&e, text))?;
            raw.alerts_table = match doc.remove("alerts") {
                Some(toml::Value::Table(t)) => Some(t),
                _ => None,
            };
        }
        Ok(raw)
    }

    /// Parses and validates `text`; every error placed in the text.
    pub fn parse_and_validate(text: &str) -> Result<Config, ConfigError> {
        let located = locate::Located::new(text);
        Self::from_toml(text)?
            .validate()
            .map_err(|e| e.locate(&located))
    }

    /// A key of the layered alert policy as the file names it: the
    /// layered `receivers[N]` is the file's `receivers[M]` of the same
    /// name, or `receivers[N] (built-in)`.
    pub fn alert_key(&self, key: &str) -> String {
        let Some(rest) = key.strip_prefix("receivers[") else {
            return key.to_owned();
        };
        let Some((index, tail)) = rest.split_once(']') else {
            return key.to_owned();
        };
        let (Ok(n), Some(user)) = (index.parse::<usize>(), &self.alerts_table) else {
            return key.to_owned();
        };
        let name_of = |v: &toml::Value| {
            v.get("name")
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
        };
        let layered = layer::layered(Some(user)).ok();
        let name = layered
            .as_ref()
            .and_then(|t| t.get("receivers"))
            .and_then(toml::Value::as_array)
            .and_then(|a| a.get(n))
            .and_then(name_of);
        let mine = user
            .get("receivers")
            .and_then(toml::Value::as_array)
            .and_then(|a| a.iter().position(|r| name.is_some() && name_of(r) == name));
        match mine {
            Some(m) => format!("receivers[{m}]{tail}"),
            None if self.alerts_table.is_some() && name.is_some() => {
                format!("receivers[{n}]{tail} (built-in)")
            }
            None => key.to_owned(),
        }
    }

    /// The alert policy in force: the `[alerts]` table over the built-in
    /// one (see `layer.rs`).
    pub fn effective_alerts(&self) -> Result<alerts::RawConfig, ConfigError> {
        match (&self.alerts_table, &self.alerts) {
            (Some(t), _) => layer::effective(Some(t)),
            (None, Some(a)) => Ok(a.clone()),
            (None, None) => layer::effective(None),
        }
    }

    /// Checks what the types cannot say; no I/O.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let source = self.source.validate()?;
        self.pipeline.validate()?;
        let features = self.features.validate()?;
        let alerts = self
            .effective_alerts()?
            .validate()
            .map_err(|e| err(&format!("alerts.{}", self.alert_key(&e.key)), e.problem))?;
        // Kafka offsets are committed only after a checkpoint, so that
        // source checkpoints unless told where; the others replay from the
        // start anyway.
        let checkpoint_dir = match (&self.checkpoint.dir, &source) {
            (Some(d), _) => Some(d.clone()),
            (None, SourceKind::Kafka(_)) => Some(sections::default_checkpoint_dir()),
            (None, _) => None,
        };
        let partition_store = self.checkpoint.partition_store(
            matches!(source, SourceKind::Kafka(_)),
            checkpoint_dir.as_deref(),
        )?;
        if let SourceKind::Kafka(k) = &source
            && k.fleet_topic.is_some()
            && partition_store.is_none()
        {
            return Err(err(
                "source.fleet_topic",
                "needs partition-aligned checkpoints (checkpoint.partitions = true, the default)",
            ));
        }
        Ok(Config {
            dead_letter_file: self.source.dead_letter_file().cloned(),
            source,
            shards: self.pipeline.shards,
            seed: self.pipeline.seed,
            max_gpus: self.pipeline.max_gpus,
            nice: self.pipeline.nice,
            features,
            alerts,
            listen: self.api.listen,
            token_env: self.api.token_env.clone(),
            read_token_env: self.api.read_token_env.clone(),
            labels_file: self.api.labels_file.clone(),
            silences_file: crate::silence_file::SilenceFile::locate(
                self.api.silences_file.as_deref(),
                checkpoint_dir.as_deref(),
            )
            .path()
            .to_owned(),
            api: self.api.validate()?,
            partition_store,
            checkpoint_dir,
            checkpoint_every: self.checkpoint.every()?,
            export: self.export.validate()?,
            model_file: self.models.failure.clone(),
            model_dir: self.models.dir.clone(),
            model_watch_every: self.models.watch_every()?,
        })
    }

    /// Reads and validates a file, or the defaults when `path` is `None`.
    pub fn load(path: Option<&std::path::Path>) -> anyhow::Result<Config> {
        match path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| anyhow::anyhow!("reading config {}: {e}", p.display()))?;
                RawConfig::parse_and_validate(&text)
                    .map_err(|e| anyhow::anyhow!("invalid config {}: {e}", p.display()))
            }
            None => RawConfig::default()
                .validate()
                .map_err(|e| anyhow::anyhow!("invalid config: {e}")),
        }
    }
}

/// A parse or type error: the key path holding its span (or the one its
/// message starts with, from `[source]`'s own decoding) and its line and
/// column.
fn parse_error(e: &toml::de::Error, text: &str) -> ConfigError {
    let located = locate::Located::new(text);
    let message = e.message().trim_end();
    // `[source]` is decoded from a table of its own, which has no spans:
    // its messages start with the key (`source.brokers: ...`).
    if let Some((key, rest)) = message.split_once(": ")
        && key.starts_with("source")
        && !key.contains(' ')
    {
        return err(key, rest).locate(&located);
    }
    let span = e.span();
    let key = span
        .as_ref()
        .and_then(|s| located.path_at(s.start))
        .unwrap_or_else(|| "config".to_owned());
    // An unknown key inside a table serde decoded as a whole (a receiver:
    // tagged by `type`) is reported at the table: name the key itself.
    if let Some(field) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    {
        let inner = format!("{key}.{field}");
        let already = key == field || key.ends_with(&format!(".{field}"));
        if !already && located.has(&inner) {
            return err(&inner, message).locate(&located);
        }
    }
    let mut error = err(&key, message);
    error.at = span.map(|s| locate::line_col(text, s.start));
    error
}
