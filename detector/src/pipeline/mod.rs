//! The sharded pipeline: a dispatcher splits each input batch over shard
//! threads (by partition unit, or by host: `placement`); each shard runs features and models
//! synchronously; one alert thread consumes the shards' outputs and drives
//! the alert engine and the sink.
//!
//! Every arrow is a bounded channel, so a slow stage stops the source
//! (backpressure) instead of growing memory; [`Pipeline::is_full`] lets a
//! Kafka source pause its partitions before it would block. The alert
//! thread takes shard outputs in a fixed order (batch by batch, shard 0
//! first), so the same input gives the same alerts whatever the thread
//! timing: live, backtest and tests agree.
//!
//! Checkpoints ride the same channels as a barrier: every shard serializes
//! its state when the barrier reaches it (after every batch sent before
//! it), the alert thread adds its own and the sink's state and writes one
//! atomic file with the source offsets the barrier carried
//! ([`crate::checkpoint`]). No locks, no pause of the hot path.
//!
//! Files: [`run`] starts the threads and splits batches, [`shard`] is one
//! shard's work, the alert thread lives in `alert_thread`, and [`handle`]
//! holds the messages and the [`PipelineHandle`] the API and sources use;
//! `parts` has the settings, the sink trait and the run summary. This file
//! only re-exports, so no child depends on its parent.

mod alert_thread;
pub mod alerting;
pub mod buffers;
mod feed;
#[cfg(test)]
mod frozen_tests;
mod grade_slot;
pub mod handle;
mod parts;
mod placement;
mod rack_air;
#[cfg(test)]
pub(crate) mod restart_tests;
pub mod run;
pub mod shard;
#[cfg(test)]
mod silence_tests;
#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod time_props;
#[cfg(test)]
mod unit_tests;
pub mod units;

pub use handle::{Command, ControlError, PipelineHandle};
pub use parts::{AlertSink, MAX_ROUND_SPAN_MS, PartitionWritten, PipelineConfig, Summary, Written};
pub use run::Pipeline;
