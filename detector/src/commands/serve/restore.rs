//! Where `serve` starts from: the newest checkpoint's state (shards, alert
//! stage, router groups, source offsets), or a fresh pipeline when there is
//! none. Runs once, before any thread starts.

use std::sync::Arc;

use alerts::{AlertEngine, AlertRouter, AlertSystem};
use models::failure::FailureModel;

use crate::checkpoint::{CheckpointStore, Offsets};
use crate::config::Config;
use crate::pipeline::PipelineConfig;
use crate::pipeline::alerting::AlertStage;
use crate::pipeline::shard::Shard;

fn router_restore(cfg: &Config, sys: &AlertSystem, bytes: &[u8]) -> anyhow::Result<AlertRouter> {
    if bytes.is_empty() {
        return Ok(
            AlertRouter::new(&cfg.alerts.route, &sys.sinks, sys.outbox.clone())
                .with_shadow_log(cfg.alerts.shadow_file.clone()),
        );
    }
    let snap: alerts::RouterSnapshot =
        crate::checkpoint::from_cbor(bytes, "the alert router snapshot")?;
    Ok(
        AlertRouter::restore(&cfg.alerts.route, &sys.sinks, sys.outbox.clone(), snap)?
            .with_shadow_log(cfg.alerts.shadow_file.clone()),
    )
}

/// The pipeline's state: restored from the newest checkpoint, or fresh.
pub(super) struct Start {
    pub(super) shards: Vec<Shard>,
    pub(super) stage: AlertStage,
    pub(super) router: AlertRouter,
    pub(super) store: Option<CheckpointStore>,
    pub(super) resume: Offsets,
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
    let latest = match &store {
        Some(s) => s.latest()?,
        None => None,
    };
    let Some(ckpt) = latest else {
        return Ok(Start {
            shards: pcfg.new_shards()?,
            stage: AlertStage::new(AlertEngine::new(cfg.alerts.engine.clone())),
            router: AlertRouter::new(&cfg.alerts.route, &sys.sinks, sys.outbox.clone())
                .with_shadow_log(cfg.alerts.shadow_file.clone()),
            store,
            resume: Offsets::new(),
        });
    };
    anyhow::ensure!(
        ckpt.shards.len() == cfg.shards,
        "checkpoint {} has {} shards but pipeline.shards = {}: set pipeline.shards back, or move the checkpoint directory away to start fresh",
        ckpt.seq,
        ckpt.shards.len(),
        cfg.shards
    );
    let shards = ckpt
        .shards
        .iter()
        .map(|b| {
            // The model is not part of the state: the one loaded now scores.
            let mut shard = Shard::restore(b)?;
            shard.set_failure_model(pcfg.failure_model.clone());
            Ok(shard)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let stage = AlertStage::restore(cfg.alerts.engine.clone(), &ckpt.stage)?;
    let router = router_restore(cfg, sys, &ckpt.sink)?;
    tracing::info!(
        seq = ckpt.seq,
        partitions = ckpt.offsets.len(),
        gpus = shards.iter().map(Shard::gpu_count).sum::<usize>(),
        "restored from checkpoint"
    );
    Ok(Start {
        shards,
        stage,
        router,
        store,
        resume: ckpt.offsets,
    })
}
