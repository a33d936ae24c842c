//! The small tables of `forewarn.toml`: `[pipeline]`, `[checkpoint]`,
//! `[export]` and `[models]` (`[api]` is in `api.rs`). Each default is a function
//! next to its field saying where the number comes from; each table's
//! `validate` checks only what its types cannot say.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::duration::{self, ConfigDuration, Spelled};
use super::error::{ConfigError, err};

/// `[pipeline]`: shards and seeds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPipeline {
    /// Shard threads; a host's GPUs share one (a hash of the host label,
    /// of the UUID without one), or a Kafka partition's with partition units.
    #[serde(default = "default_shards")]
    pub shards: usize,
    /// Seed of every model's randomness.
    #[serde(default = "default_pipeline_seed")]
    pub seed: u64,
    /// Nice value (0–19) of the pipeline threads under `serve`, so REST
    /// lookups are served first when ingest keeps every core busy; 0
    /// leaves them at the process's priority.
    #[serde(default = "default_nice")]
    pub nice: i32,
    /// GPUs tracked at once. A new GPU beyond it first displaces the
    /// oldest GPU seen fewer than three times, else is refused
    /// (`gpu_limit`), so a flood of made-up ids cannot exhaust memory.
    #[serde(default = "default_max_gpus")]
    pub max_gpus: usize,
}

/// 200,000: twice a 100,000-GPU fleet, at a few KB of state each.
fn default_max_gpus() -> usize {
    200_000
}

/// 2: a 2-core machine's worth.
fn default_shards() -> usize {
    2
}

/// 17: an arbitrary fixed seed; scores, alerts and checkpoints depend on
/// it, so changing it changes every baseline.
fn default_pipeline_seed() -> u64 {
    17
}

/// 10: the increment `nice(1)` applies when given none.
fn default_nice() -> i32 {
    10
}

impl Default for RawPipeline {
    fn default() -> Self {
        RawPipeline {
            shards: default_shards(),
            seed: default_pipeline_seed(),
            nice: default_nice(),
            max_gpus: default_max_gpus(),
        }
    }
}

impl RawPipeline {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(0..=19).contains(&self.nice) {
            return Err(err("pipeline.nice", "must be between 0 and 19"));
        }
        if !(1..=256).contains(&self.shards) {
            return Err(err("pipeline.shards", "must be between 1 and 256"));
        }
        if self.max_gpus == 0 {
            return Err(err("pipeline.max_gpus", "must be at least 1"));
        }
        Ok(())
    }
}

/// `[checkpoint]`: periodic state snapshots for restarts.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCheckpoint {
    /// Directory of checkpoint files. Default [`default_checkpoint_dir`]
    /// with the Kafka source; none (no checkpoints) with the simulator or
    /// files.
    pub dir: Option<PathBuf>,
    /// Time between checkpoints; offsets are committed after each one.
    /// Default [`default_checkpoint_interval`].
    pub interval: Option<ConfigDuration>,
    /// Deprecated: `interval` in seconds.
    pub interval_s: Option<f64>,
    /// With the Kafka source: where each partition's state is checkpointed,
    /// as a URL (`file:///shared/dir`, `s3://bucket/prefix`) or a path.
    /// Every instance of the consumer group must see the same store for a
    /// partition to move warm (docs/scaling.md). Default: `dir`.
    pub store: Option<String>,
    /// With the Kafka source: partition-aligned state (default true). False
    /// keeps the instance-wide layout (GPUs sharded by hash, one file).
    pub partitions: Option<bool>,
}

/// `forewarn-checkpoints` in the working directory, next to the other
/// `forewarn-*` outputs.
pub fn default_checkpoint_dir() -> PathBuf {
    PathBuf::from("forewarn-checkpoints")
}

/// 30 s: a restart re-reads at most this much of the stream, and writing
/// every shard's state this often is a small share of the pipeline's time.
fn default_checkpoint_interval() -> Duration {
    Duration::from_secs(30)
}

impl RawCheckpoint {
    /// The partition store's root (see [`Self::store`]): `None` unless the
    /// source is Kafka with checkpoints and partitions are on.
    pub fn partition_store(
        &self,
        kafka: bool,
        dir: Option<&std::path::Path>,
    ) -> Result<Option<crate::checkpoint::partitions::StoreUrl>, ConfigError> {
        use crate::checkpoint::partitions::StoreUrl;
        let Some(dir) = dir.filter(|_| kafka && self.partitions != Some(false)) else {
            return Ok(None);
        };
        match &self.store {
            None => Ok(Some(StoreUrl::Dir(dir.to_owned()))),
            Some(url) => crate::checkpoint::partitions::store_url(url)
                .map(Some)
                .map_err(|e| err("checkpoint.store", e.to_string())),
        }
    }

    /// The time between checkpoints.
    pub fn every(&self) -> Result<Duration, ConfigError> {
        let spelled = duration::either(
            "checkpoint.interval",
            self.interval,
            "checkpoint.interval_s",
            self.interval_s,
            duration::from_secs,
        )?;
        match spelled {
            Spelled::Unset => Ok(default_checkpoint_interval()),
            Spelled::New(d) if d.is_zero() => Err(err(
                "checkpoint.interval",
                "must be longer than 0 (e.g. \"30s\")",
            )),
            Spelled::New(d) => Ok(d),
            Spelled::Old(s) if s > 0.0 && s.is_finite() => Ok(Duration::from_secs_f64(s)),
            Spelled::Old(_) => Err(err(
                "checkpoint.interval_s",
                "must be a positive number of seconds",
            )),
        }
    }
}

/// `[export]`: Parquet exports of features, scores and alerts (the input
/// of `forewarn train`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExport {
    /// Write exports (`serve` only; backtest writes none).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Root directory.
    #[serde(default = "default_export_dir")]
    pub dir: PathBuf,
    /// Also write feature rows (most of the bytes).
    #[serde(default = "yes")]
    pub features: bool,
    /// Keep every Nth feature row per GPU.
    #[serde(default = "default_feature_sample_every")]
    pub feature_sample_every: NonZeroU32,
    /// Writer id prefix, unique per process and stable across restarts,
    /// `[A-Za-z0-9_-]+`.
    #[serde(default = "default_instance")]
    pub instance: String,
}

/// Exports on, feature rows included: `forewarn train` needs both, and a
/// service that ran without them leaves nothing to train the next model on.
fn yes() -> bool {
    true
}

/// `forewarn-export` in the working directory, next to the other
/// `forewarn-*` outputs.
fn default_export_dir() -> PathBuf {
    PathBuf::from("forewarn-export")
}

/// 1: every row; sampling is for fleets whose feature rows outgrow the disk.
fn default_feature_sample_every() -> NonZeroU32 {
    NonZeroU32::MIN
}

/// `forewarn`: the product's name; a second process needs its own.
fn default_instance() -> String {
    "forewarn".into()
}

impl Default for RawExport {
    fn default() -> Self {
        RawExport {
            enabled: yes(),
            dir: default_export_dir(),
            features: yes(),
            feature_sample_every: default_feature_sample_every(),
            instance: default_instance(),
        }
    }
}

impl RawExport {
    /// The export settings, none when disabled.
    pub fn validate(&self) -> Result<Option<crate::export::ExportSettings>, ConfigError> {
        let instance = &self.instance;
        if instance.is_empty()
            || !instance
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(err("export.instance", "must be [A-Za-z0-9_-]+"));
        }
        Ok(self.enabled.then(|| crate::export::ExportSettings {
            dir: self.dir.clone(),
            features: self.features,
            feature_sample_every: self.feature_sample_every,
            instance: instance.clone(),
        }))
    }
}

/// `[models]`: the failure model and where new ones are picked up.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModels {
    /// Failure model artifact to start with (`forewarn train --out`);
    /// `serve --model` overrides it. None: rules, trends and the anomaly
    /// forest only.
    pub failure: Option<PathBuf>,
    /// Directory watched for new artifacts (`*.fwm`; the newest by
    /// modification time wins). Write a new one under a temporary or
    /// hidden name and rename it in. None: not watched.
    pub dir: Option<PathBuf>,
    /// Time between looks at `dir`; `"0s"` turns the watch off (`POST
    /// /v1/models/reload` still works). Default [`default_watch_interval`].
    pub watch_interval: Option<ConfigDuration>,
    /// Deprecated: `watch_interval` in seconds.
    pub watch_interval_s: Option<f64>,
}

/// 10 s: a dropped-in model is live well within a minute, and a directory
/// listing this often costs nothing.
fn default_watch_interval() -> Duration {
    Duration::from_secs(10)
}

impl RawModels {
    /// How often `dir` is looked at; none when not watched.
    pub fn watch_every(&self) -> Result<Option<Duration>, ConfigError> {
        let spelled = duration::either(
            "models.watch_interval",
            self.watch_interval,
            "models.watch_interval_s",
            self.watch_interval_s,
            duration::from_secs,
        )?;
        let every = match spelled {
            Spelled::Unset => Some(default_watch_interval()),
            Spelled::New(d) => (!d.is_zero()).then_some(d),
            Spelled::Old(s) if s >= 0.0 && s.is_finite() => {
                (s > 0.0).then(|| Duration::from_secs_f64(s))
            }
            Spelled::Old(_) => {
                return Err(err(
                    "models.watch_interval_s",
                    "must be a number of seconds >= 0 (0 = no watch)",
                ));
            }
        };
        Ok(every.filter(|_| self.dir.is_some()))
    }
}
