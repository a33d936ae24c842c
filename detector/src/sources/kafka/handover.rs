//! The Kafka source's hand-over side (part of [`super`]): the batch in
//! hand to the pipeline with its horizon, checkpoint requests and the
//! commit of their offsets once on disk, and the clean stop that hands
//! everything over, leaves the group and commits a final checkpoint.

use std::sync::atomic::Ordering;
use std::sync::mpsc::TryRecvError;
use std::time::Instant;

use rdkafka::consumer::{BaseConsumer, CommitMode};

use super::context::{Ctx, FINAL_COMMIT_WAIT, commit, final_commit};
use super::{IDLE_HORIZON, Source, units};

impl Source<'_> {
    /// Sends the batch when due (or when a checkpoint is due, so that it
    /// covers every offset read) and asks for a checkpoint when due.
    pub(super) fn hand_over(&mut self) -> anyhow::Result<()> {
        let ckpt_due = self.every.is_some_and(|e| self.last_ckpt.elapsed() >= e)
            && self.pending_commit.is_none();
        if (self.batch.due() && !self.paused) || (ckpt_due && !self.batch.offsets.is_empty()) {
            let b = self.batch.take_samples();
            self.total += b.len() as u64;
            let m = &self.state.metrics;
            m.samples_in.fetch_add(b.len() as u64, Ordering::Relaxed);
            m.partitions.samples(self.batch.take_counts());
            // The horizon from before this batch: every partition's samples
            // up to it are already in the shards. Including the batch would
            // let silence be judged at its end while its own samples (the
            // host peers that show a GPU is lost, not its host) are still
            // unprocessed.
            let horizon = self.shared.horizon();
            self.horizon_sent = horizon;
            if let Ok(mut sent) = self.shared.sent.lock() {
                sent.append(&mut self.batch.offsets);
            }
            if let Ok(mut et) = self.shared.event_time.lock() {
                let now = Instant::now();
                for (k, t) in std::mem::take(&mut self.batch.times) {
                    let e = et.entry(k).or_insert((i64::MIN, now));
                    *e = (e.0.max(t), now);
                }
            }
            self.pipeline
                .send_from(b, self.batch.origin.take(), horizon)?;
            self.batch.offsets.clear();
            self.dirty = true;
        } else if self.batch.samples.is_empty() && self.idle_check.elapsed() >= IDLE_HORIZON {
            // Nothing to send: the horizon a batch carried is from before
            // it, and moves on only as partitions catch up and go quiet.
            // Without this, timers (and the fleet's alert stage) would wait
            // for the next message to see the last batch's samples judged.
            self.idle_check = Instant::now();
            let horizon = self.shared.horizon();
            if horizon != self.horizon_sent {
                self.horizon_sent = horizon;
                self.pipeline.send_from(Vec::new(), None, horizon)?;
            }
        }
        if ckpt_due && self.dirty {
            self.dirty = false;
            self.last_ckpt = Instant::now();
            if let Some(cp) = &self.shared.checkpointer {
                let offsets = self.shared.sent_offsets();
                self.pending_commit = Some(cp.request(offsets)?);
            }
        }
        Ok(())
    }

    /// Commits the offsets of a checkpoint once it is on disk.
    pub(super) fn check_commit(&mut self, consumer: &BaseConsumer<Ctx>) -> anyhow::Result<()> {
        let Some(rx) = &self.pending_commit else {
            return Ok(());
        };
        match rx.try_recv() {
            Ok(Ok(w)) => {
                self.pending_commit = None;
                if let Err(e) = commit(consumer, &w.offsets, CommitMode::Async) {
                    tracing::warn!(error = %e, "committing offsets");
                }
            }
            Ok(Err(e)) => {
                self.pending_commit = None;
                tracing::error!(error = %e, "checkpoint failed; offsets not committed");
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => anyhow::bail!("the pipeline stopped"),
        }
        Ok(())
    }

    /// A clean stop hands over the batch, then checkpoints and commits
    /// everything handed over. With partition units it first leaves the
    /// group: the revoke checkpoints every unit, commits and releases the
    /// partitions, so their next owner takes them warm at once.
    pub(super) fn stop(mut self, consumer: &BaseConsumer<Ctx>) -> anyhow::Result<u64> {
        if !self.batch.samples.is_empty() {
            let b = self.batch.take_samples();
            self.total += b.len() as u64;
            self.pipeline
                .send_from(b, self.batch.origin, self.shared.horizon())?;
            if let Ok(mut sent) = self.shared.sent.lock() {
                sent.append(&mut self.batch.offsets);
            }
        }
        if self.units.is_some() {
            units::leave_group(consumer, &self.shared);
            self.after_rebalance()?;
            // No assignment follows a leave: everything released goes.
            self.pipeline.settle_released()?;
        }
        let shared = &self.shared;
        if let Some(cp) = &shared.checkpointer {
            let offsets = shared.sent_offsets();
            let w = cp.checkpoint_now(offsets)?;
            if final_commit(consumer, shared, &w.offsets, FINAL_COMMIT_WAIT) {
                tracing::info!(
                    seq = w.seq,
                    "final checkpoint written and offsets committed"
                );
            } else {
                // The checkpoint holds the offsets and a restart seeks to
                // them, so nothing is lost or read twice beyond re-sends.
                tracing::warn!(
                    seq = w.seq,
                    wait_s = FINAL_COMMIT_WAIT.as_secs(),
                    "final checkpoint written; the broker did not confirm the offset commit in time (unreachable?): a restart resumes from the checkpoint"
                );
            }
        }
        self.dead.flush();
        Ok(self.total)
    }
}
