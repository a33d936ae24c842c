//! Where `serve` starts from: the newest checkpoint that restores whole
//! (shards, alert stage, router groups, source offsets), or a fresh
//! pipeline when the directory has none; then the saved silences on top
//! ([`crate::silence_file`]). Runs once, before any thread starts.
//!
//! A checkpoint restores whole or not at all: its file is verified by its
//! checksum, then every part is decoded, and a failure anywhere (a torn
//! file, a bad shard blob, an alert stage or router snapshot that does not
//! rebuild, even a panic in a decoder) moves on to the one before, logged
//! at ERROR with the file and the cause. The offsets used are those of the
//! checkpoint restored, so Kafka replays what that state has not seen (the
//! source seeks back when the group's commit is newer). When no checkpoint
//! restores, start-up fails naming each file and its cause: starting empty
//! would forget every open incident and, with Kafka, skip to the group's
//! committed offsets, without anyone deciding so. A checkpoint taken with
//! another `pipeline.shards` is a configuration error, not damage, and
//! fails start-up at once.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use alerts::{AlertEngine, AlertRouter, AlertSystem};
use models::failure::FailureModel;

use crate::checkpoint::{Checkpoint, CheckpointStore, Offsets};
use crate::config::Config;
use crate::pipeline::PipelineConfig;
use crate::pipeline::alerting::AlertStage;
use crate::pipeline::shard::Shard;
use crate::silence_file::SilenceFile;

/// A router over `alerts`' routes and shadow log, `sinks` and `outbox`:
/// restored from `bytes` (a router snapshot), or with no groups when they
/// are empty. Also the fleet alert stage's (`super::fleet`).
pub(super) fn router_from(
    alerts: &alerts::Config,
    sinks: &[Arc<alerts::Sink>],
    outbox: &Arc<alerts::Outbox>,
    bytes: &[u8],
) -> anyhow::Result<AlertRouter> {
    if bytes.is_empty() {
        return Ok(fresh_router(alerts, sinks, outbox));
    }
    let snap: alerts::RouterSnapshot =
        crate::checkpoint::from_cbor(bytes, "the alert router snapshot")?;
    Ok(
        AlertRouter::restore(&alerts.route, sinks, outbox.clone(), snap)?
            .with_shadow_log(alerts.shadow_file.clone()),
    )
}

/// A router with no groups, over `alerts`' routes and shadow log.
fn fresh_router(
    alerts: &alerts::Config,
    sinks: &[Arc<alerts::Sink>],
    outbox: &Arc<alerts::Outbox>,
) -> AlertRouter {
    AlertRouter::new(&alerts.route, sinks, outbox.clone())
        .with_shadow_log(alerts.shadow_file.clone())
}

/// The pipeline's state: restored from a checkpoint, or fresh.
pub(super) struct Start {
    pub(super) shards: Vec<Shard>,
    pub(super) stage: AlertStage,
    pub(super) router: AlertRouter,
    pub(super) store: Option<CheckpointStore>,
    pub(super) resume: Offsets,
    /// The instance checkpoint restored (its seq), if any.
    pub(super) restored_seq: Option<u64>,
}

/// A checkpoint restored whole: the file's contents and its parts, rebuilt.
type Restored = (Checkpoint, Vec<Shard>, AlertStage, AlertRouter);

/// Why one checkpoint did not restore.
enum Failure {
    /// Damage (or a format this build does not read): try the one before.
    Skip(anyhow::Error),
    /// A configuration problem that every checkpoint shares: stop.
    Fatal(anyhow::Error),
}

/// Restores everything from the checkpoint file at `path`.
fn restore_one(
    cfg: &Config,
    sys: &AlertSystem,
    pcfg: &PipelineConfig,
    path: &Path,
) -> Result<Restored, Failure> {
    let ckpt = crate::checkpoint::read(path).map_err(Failure::Skip)?;
    if ckpt.shards.len() != cfg.shards {
        return Err(Failure::Fatal(anyhow::anyhow!(
            "checkpoint {} ({}) has {} shards but pipeline.shards = {}: set pipeline.shards back, or move the checkpoint directory away to start fresh",
            ckpt.seq,
            path.display(),
            ckpt.shards.len(),
            cfg.shards
        )));
    }
    let parts = || -> anyhow::Result<_> {
        let shards = ckpt
            .shards
            .iter()
            .enumerate()
            .map(|(i, b)| {
                // The model is not part of the state: the one loaded now scores.
                let mut shard = Shard::restore(b)
                    .map_err(|e| e.context(format!("shard {i} of {}", path.display())))?;
                shard.set_failure_model(pcfg.failure_model.clone());
                Ok(shard)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let stage = AlertStage::restore(cfg.alerts.engine.clone(), &ckpt.stage)
            .map_err(|e| e.context(format!("the alert stage of {}", path.display())))?;
        let router = router_from(&cfg.alerts, &sys.sinks, &sys.outbox, &ckpt.sink)
            .map_err(|e| e.context(format!("the alert router of {}", path.display())))?;
        Ok((shards, stage, router))
    };
    // A decoder that panics on damage it did not foresee is damage too.
    match catch_unwind(AssertUnwindSafe(parts)) {
        Ok(Ok((shards, stage, router))) => Ok((ckpt, shards, stage, router)),
        Ok(Err(e)) => Err(Failure::Skip(e)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            Err(Failure::Skip(anyhow::anyhow!(
                "{}: restoring panicked: {what}",
                path.display()
            )))
        }
    }
}

/// The newest checkpoint of `store` that restores whole; `None` when the
/// directory holds none.
fn from_checkpoints(
    cfg: &Config,
    sys: &AlertSystem,
    pcfg: &PipelineConfig,
    store: &CheckpointStore,
) -> anyhow::Result<Option<Restored>> {
    let files = store.newest_first()?;
    let mut skipped: Vec<(PathBuf, anyhow::Error)> = Vec::new();
    for (seq, path) in &files {
        match restore_one(cfg, sys, pcfg, path) {
            Ok(restored) => {
                if !skipped.is_empty() {
                    tracing::warn!(
                        seq,
                        file = %path.display(),
                        skipped = skipped.len(),
                        "restored from an older checkpoint: the newer ones are damaged (kept for inspection; the next checkpoints replace them)"
                    );
                }
                return Ok(Some(restored));
            }
            Err(Failure::Fatal(e)) => return Err(e),
            Err(Failure::Skip(e)) => {
                tracing::error!(
                    seq,
                    file = %path.display(),
                    error = format!("{e:#}"),
                    "checkpoint does not restore: trying the one before"
                );
                skipped.push((path.clone(), e));
            }
        }
    }
    if skipped.is_empty() {
        return Ok(None);
    }
    let list: Vec<String> = skipped
        .iter()
        .map(|(p, e)| format!("{}: {e:#}", p.display()))
        .collect();
    anyhow::bail!(
        "none of the {} checkpoints in {} restores ({}). Nothing was changed. To start anyway with no state, move the directory away (its alerts' open incidents are forgotten, and a Kafka source resumes at the consumer group's committed offsets)",
        skipped.len(),
        store.dir().display(),
        list.join("; ")
    )
}

pub(super) fn restore_or_new(
    cfg: &Config,
    sys: &AlertSystem,
    model: Option<Arc<FailureModel>>,
) -> anyhow::Result<Start> {
    let pcfg = PipelineConfig {
        shards: cfg.shards,
        features: cfg.features.clone(),
        seed: cfg.seed,
        failure_model: model,
    };
    let store = match &cfg.checkpoint_dir {
        Some(dir) => Some(CheckpointStore::open(dir)?),
        None => None,
    };
    let restored = match &store {
        Some(s) => from_checkpoints(cfg, sys, &pcfg, s)?,
        None => None,
    };
    let mut start = match restored {
        Some((ckpt, shards, stage, router)) => {
            let gpus = shards.iter().map(Shard::gpu_count).sum::<usize>();
            if gpus == 0 && !ckpt.offsets.is_empty() {
                // Partition-aligned state: the instance checkpoint holds the
                // offsets and the alert stage; GPUs come with their partitions.
                tracing::info!(
                    seq = ckpt.seq,
                    partitions = ckpt.offsets.len(),
                    "restored from checkpoint (GPU state follows with each partition's checkpoint when it is assigned)"
                );
            } else {
                tracing::info!(
                    seq = ckpt.seq,
                    partitions = ckpt.offsets.len(),
                    gpus,
                    "restored from checkpoint"
                );
            }
            Start {
                shards,
                stage,
                router,
                store,
                resume: ckpt.offsets,
                restored_seq: Some(ckpt.seq),
            }
        }
        None => Start {
            shards: pcfg.new_shards()?,
            stage: AlertStage::new(AlertEngine::new(cfg.alerts.engine.clone())),
            router: fresh_router(&cfg.alerts, &sys.sinks, &sys.outbox),
            store,
            resume: Offsets::new(),
            restored_seq: None,
        },
    };
    if cfg.partition_store.is_some() {
        // Partition-aligned state: each partition resumes at its own
        // checkpoint's offset when assigned (docs/scaling.md).
        start.resume = Offsets::new();
        let gpus: usize = start.shards.iter().map(Shard::gpu_count).sum();
        if gpus > 0 {
            // Written with `checkpoint.partitions = false` (or before
            // partitions existed): no sample would reach these shards
            // again, so their GPUs start over in their partitions' units.
            tracing::warn!(
                gpus,
                "the checkpoint holds GPU state outside partition units (instance-wide layout): it starts cold once, in each partition's unit"
            );
            start.shards = pcfg.new_shards()?;
        }
    }
    let file = SilenceFile::new(cfg.silences_file.clone());
    let done = file.apply(
        &mut start.stage.engine,
        &cfg.alerts.engine.silences,
        crate::checkpoint::wall_ms(),
    )?;
    if done != Default::default() {
        tracing::info!(
            file = %file.path().display(),
            restored = done.restored,
            ended_early = done.ended_early,
            dropped = done.dropped,
            "silences loaded"
        );
    }
    start.stage.silence_file = Some(file);
    Ok(start)
}

#[cfg(test)]
#[path = "restore_tests.rs"]
mod tests;
