//! The pipeline's vocabulary: its settings, where alert events go, what a
//! run did and what a checkpoint reflects. Shared by the threads in
//! `run` and `alert_thread` and by the commands that start a pipeline.

use alerts::AlertEvent;
use features::FeatureConfig;

use super::shard::Shard;
use crate::checkpoint::Offsets;

/// Where alert events go: the router and outbox (serve), a file (backtest),
/// or a vector (tests).
pub trait AlertSink: Send {
    /// Handles state changes; `now_ms` is the event-time watermark.
    fn deliver(&mut self, events: &[AlertEvent], now_ms: i64) -> anyhow::Result<()>;
    /// End of input.
    fn finish(&mut self, _now_ms: i64) -> anyhow::Result<()> {
        Ok(())
    }
    /// State to keep in a checkpoint (aggregation groups and their timers).
    fn snapshot(&self) -> anyhow::Result<Vec<u8>> {
        Ok(Vec::new())
    }
    /// Whether every notification made so far has been accepted by its
    /// receiver (or given up on): nothing is left that only this process
    /// could still send.
    fn settled(&self) -> bool {
        true
    }
}

/// Pipeline settings.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    pub shards: usize,
    pub features: FeatureConfig,
    /// Seed of every model's randomness.
    pub seed: u64,
    /// The supervised failure model, when one is configured (`--model`).
    pub failure_model: Option<std::sync::Arc<models::failure::FailureModel>>,
}

impl PipelineConfig {
    /// A fresh unit for partition `key` (see [`super::units`]): seeded by
    /// the partition, so whoever starts it draws the same numbers.
    pub fn new_unit(&self, key: &crate::checkpoint::PartitionKey) -> anyhow::Result<Shard> {
        let mut shard = Shard::new(
            0,
            self.features.clone(),
            super::units::unit_seed(self.seed, key),
        )?;
        shard.set_failure_model(self.failure_model.clone());
        Ok(shard)
    }

    /// Fresh shards for a run with no checkpoint.
    pub fn new_shards(&self) -> anyhow::Result<Vec<Shard>> {
        (0..self.shards.max(1))
            .map(|id| {
                let mut shard = Shard::new(id, self.features.clone(), self.seed)?;
                shard.set_failure_model(self.failure_model.clone());
                Ok(shard)
            })
            .collect()
    }
}

/// What a finished run did.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub samples: u64,
    pub assessments: u64,
    pub rejected: u64,
    pub alert_events: u64,
    pub gpus: u64,
    pub state_bytes: u64,
    pub checkpoints: u64,
}

/// A checkpoint that was written: its sequence number and the source
/// offsets it reflects (safe to commit now).
#[derive(Debug, Clone)]
pub struct Written {
    pub seq: u64,
    pub offsets: Offsets,
    /// Partition checkpoints written with it (units of the Kafka source).
    pub partitions: Vec<PartitionWritten>,
}

/// One partition checkpoint written at a barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionWritten {
    pub key: crate::checkpoint::PartitionKey,
    pub seq: u64,
    /// Next offset it reflects.
    pub offset: i64,
    pub gpus: u64,
    pub bytes: u64,
}

/// Most event time one round of shard batches spans (see
/// [`Pipeline::send_from`](super::run::Pipeline::send_from)).
pub const MAX_ROUND_SPAN_MS: i64 = 60_000;
