//! What travels into a running pipeline besides data, and the handle that
//! sends it: checkpoint barriers (the source loop, a Kafka rebalance
//! callback), commands for the alert stage (the REST API) and hot-reloaded
//! models. All of it rides the shards' input channels, in order with the
//! data, so a silence or a model applies from a well-defined batch on.
//!
//! The handle holds only a weak reference to the input channels: when
//! [`super::run::Pipeline::finish`] drops the strong one, the channels close and
//! the shards drain and stop; no handle kept by the API keeps them alive.

use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Arc, Weak};

use features::{GpuId, Sample};
use models::failure::FailureModel;

use super::parts::Written;
use crate::checkpoint::{Offsets, PartitionKey};

/// What travels to a shard.
pub(crate) enum ShardMsg {
    Batch {
        samples: Vec<Sample>,
        /// Wall time (epoch ms) the oldest sample was produced, when the
        /// source knows it (Kafka message timestamps).
        origin_ms: Option<i64>,
        /// Event time every input partition has reached, capped at the
        /// fleet's robust clock (silence and timers run on it).
        horizon_ms: Option<i64>,
        /// The fleet's robust clock (see `features::admission`).
        clock_ms: Option<i64>,
        /// GPUs to forget before the samples (the admission gate's
        /// evictions of this shard's GPUs).
        evict: Vec<GpuId>,
        /// Samples of partition units this thread runs, by unit id (empty
        /// without partitions; see [`super::units`]).
        units: Vec<(u32, Vec<Sample>)>,
    },
    /// Serialize your state (and your units'), then drop the units of the
    /// `release`d partitions; shard 0 carries the request on.
    Snapshot {
        request: Option<Box<SnapshotRequest>>,
        release: Arc<[PartitionKey]>,
    },
    /// Run this partition's unit from the next batch on (restored from its
    /// checkpoint, or fresh); produces no output.
    Adopt {
        id: u32,
        key: PartitionKey,
        shard: Box<super::shard::Shard>,
    },
    /// A command for the alert thread; shard 0 carries it on, in order
    /// with the data.
    Control {
        request: Option<Box<ControlRequest>>,
    },
    /// Score with this failure model from the next batch on (hot reload);
    /// produces no output.
    Model { model: Option<Arc<FailureModel>> },
}

/// What a shard hands the alert thread for each message (a model swap
/// hands nothing).
pub(crate) enum ShardOutput {
    /// What a batch produced.
    Batch(super::shard::BatchOutput),
    /// At a barrier: this shard's serialized state; on shard 0's output,
    /// the checkpoint request too.
    Snapshot {
        state: anyhow::Result<Vec<u8>>,
        /// The thread's partition units, serialized.
        units: Vec<super::units::UnitSnapshot>,
        /// GPUs of the units released after the snapshot (moved, not
        /// lost: forgotten without an alert).
        released: Vec<GpuId>,
        request: Option<Box<SnapshotRequest>>,
    },
    /// A control round (no data): shard 0's output carries the command.
    Control {
        request: Option<Box<ControlRequest>>,
    },
}

/// The shards' input channels, shared by the pipeline (strongly) and its
/// handles (weakly).
pub(crate) type Inputs = Vec<SyncSender<ShardMsg>>;

/// Commands the REST API sends to the alert stage.
#[derive(Debug)]
pub enum Command {
    AddSilence(alerts::Silence),
    ExpireSilence(String),
    /// GPUs whose Kafka partition went to another instance: forgotten by
    /// the alert stage and the risk table without an event (the source
    /// sends it once a rebalance has settled; see `Pipeline::settle_released`).
    HandOver(Vec<GpuId>),
}

/// Why a command got no answer, or a refusal.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("the pipeline stopped")]
    Stopped,
    #[error("the alert thread stopped before answering")]
    NoAnswer,
    #[error("no silence {0:?}")]
    UnknownSilence(String),
    #[error("encoding the answer: {0}")]
    Encode(String),
    /// The fleet topic did not take the change (see `crate::fleet`).
    #[error("{0}")]
    Fleet(String),
}

/// A command and where its answer goes.
pub(crate) struct ControlRequest {
    pub(crate) command: Command,
    pub(crate) reply: Sender<Result<serde_json::Value, ControlError>>,
}

/// A checkpoint request, carried by shard 0's output to the alert thread.
pub(crate) struct SnapshotRequest {
    pub(crate) offsets: Offsets,
    pub(crate) reply: Option<Sender<anyhow::Result<Written>>>,
}

/// A cloneable handle into a running pipeline: asks for checkpoints and
/// sends commands to the alert stage, in order with the data.
#[derive(Clone, Debug)]
pub struct PipelineHandle {
    inputs: Weak<Inputs>,
}

impl PipelineHandle {
    pub(crate) fn new(inputs: &Arc<Inputs>) -> Self {
        PipelineHandle {
            inputs: Arc::downgrade(inputs),
        }
    }

    /// Sends one message per shard (`msg(i)` for shard `i`); false when
    /// the pipeline has finished or a shard stopped.
    fn broadcast(&self, mut msg: impl FnMut(usize) -> ShardMsg) -> bool {
        // Held only while sending, so `finish` closes the channels as soon
        // as the last send is queued.
        let Some(inputs) = self.inputs.upgrade() else {
            return false;
        };
        inputs
            .iter()
            .enumerate()
            .all(|(i, tx)| tx.send(msg(i)).is_ok())
    }

    /// Asks for a checkpoint reflecting everything sent so far; the result
    /// arrives on the returned channel once the file is durable.
    pub fn request(&self, offsets: Offsets) -> anyhow::Result<Receiver<anyhow::Result<Written>>> {
        self.request_release(offsets, Vec::new())
    }

    /// As [`Self::request`]; after the snapshot the units of `release`
    /// (partitions revoked) are dropped, their GPUs forgotten without an
    /// alert, once their checkpoints are written.
    pub fn request_release(
        &self,
        offsets: Offsets,
        release: Vec<PartitionKey>,
    ) -> anyhow::Result<Receiver<anyhow::Result<Written>>> {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut req = Some(Box::new(SnapshotRequest {
            offsets,
            reply: Some(tx),
        }));
        let release: Arc<[PartitionKey]> = release.into();
        let sent = self.broadcast(|_| ShardMsg::Snapshot {
            request: req.take(),
            release: release.clone(),
        });
        anyhow::ensure!(sent, "a shard stopped");
        Ok(rx)
    }

    /// Sends a command to the alert stage and waits for its answer
    /// (blocking: call from a blocking thread).
    pub fn control(&self, command: Command) -> Result<serde_json::Value, ControlError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut req = Some(Box::new(ControlRequest { command, reply: tx }));
        if !self.broadcast(|_| ShardMsg::Control {
            request: req.take(),
        }) {
            return Err(ControlError::Stopped);
        }
        rx.recv().map_err(|_| ControlError::NoAnswer)?
    }

    /// Hands a new failure model to every shard, in order with the data.
    pub fn set_model(&self, model: Option<Arc<FailureModel>>) -> anyhow::Result<()> {
        let sent = self.broadcast(|_| ShardMsg::Model {
            model: model.clone(),
        });
        anyhow::ensure!(sent, "the pipeline stopped");
        Ok(())
    }

    /// Requests a checkpoint and waits for it.
    pub fn checkpoint_now(&self, offsets: Offsets) -> anyhow::Result<Written> {
        self.checkpoint_release(offsets, Vec::new())
    }

    /// Requests a checkpoint that releases the units of `release`, and
    /// waits for it.
    pub fn checkpoint_release(
        &self,
        offsets: Offsets,
        release: Vec<PartitionKey>,
    ) -> anyhow::Result<Written> {
        self.request_release(offsets, release)?
            .recv()
            .map_err(|_| anyhow::anyhow!("the alert thread stopped before the checkpoint"))?
    }

    /// Sends a unit to shard thread `thread` (the source's side keeps the
    /// routing; see `Pipeline::adopt`).
    pub(crate) fn adopt(
        &self,
        thread: usize,
        id: u32,
        key: PartitionKey,
        shard: super::shard::Shard,
    ) -> anyhow::Result<()> {
        let Some(inputs) = self.inputs.upgrade() else {
            anyhow::bail!("the pipeline stopped");
        };
        let tx = inputs
            .get(thread)
            .ok_or_else(|| anyhow::anyhow!("no shard thread {thread}"))?;
        tx.send(ShardMsg::Adopt {
            id,
            key,
            shard: Box::new(shard),
        })
        .map_err(|_| anyhow::anyhow!("a shard stopped"))
    }
}

impl crate::reload::ModelTarget for PipelineHandle {
    fn swap_model(&self, model: Arc<FailureModel>) -> bool {
        self.set_model(Some(model)).is_ok()
    }
}
