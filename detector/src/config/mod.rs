//! `forewarn.toml`: one file for sources, pipeline, features, alerts and
//! REST, read in two layers (STYLE §5). [`RawConfig`] is the file as
//! written: typed tables, unknown keys are errors, each default a function
//! next to its field. [`RawConfig::validate`] checks what the types cannot
//! say (ranges, cross-field rules), with no I/O and errors that name the
//! full key, and builds the [`Config`] the commands run with. An annotated
//! example is `docs/forewarn.example.toml`.
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

/// The alert policy used when the file has no `[alerts]` table.
pub const DEFAULT_ALERTS: &str = include_str!("default_alerts.toml");

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
    /// Alert policy, routes and receivers (see `docs/alerts.md`). None:
    /// [`DEFAULT_ALERTS`], the built-in policy writing
    /// `forewarn-alerts.jsonl`.
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
    /// Parses TOML text. The message says where (line, column, the line
    /// itself) and, for `[source]`, which key.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| err("config", e.to_string().trim_end()))
    }

    /// Checks what the types cannot say; no I/O.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let source = self.source.validate()?;
        self.pipeline.validate()?;
        let features = self.features.validate()?;
        let raw_alerts = match &self.alerts {
            Some(a) => a.clone(),
            None => alerts::RawConfig::from_toml(DEFAULT_ALERTS)
                .map_err(|e| err("alerts (built-in default)", e.to_string()))?,
        };
        let alerts = raw_alerts
            .validate()
            .map_err(|e| err("alerts", e.to_string()))?;
        // Kafka offsets are committed only after a checkpoint, so that
        // source checkpoints unless told where; the others replay from the
        // start anyway.
        let checkpoint_dir = match (&self.checkpoint.dir, &source) {
            (Some(d), _) => Some(d.clone()),
            (None, SourceKind::Kafka(_)) => Some(sections::default_checkpoint_dir()),
            (None, _) => None,
        };
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
