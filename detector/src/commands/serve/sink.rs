//! The end of the alert path in `serve`: alert events are logged, routed
//! into aggregation groups and stored in the durable outbox, from which the
//! delivery workers send them.
//!
//! The outbox's disk can fill up or fail. Then nothing stops: scoring goes
//! on, the notifications that could not be stored wait here in order
//! (`AlertRouter` keeps them, and checkpoints carry them), the `outbox`
//! component turns degraded (`/readyz` 503, one ERROR line), and every
//! later round retries them first. Past [`MAX_UNWRITTEN`] waiting, the
//! alert thread holds its round and retries every [`RETRY_EVERY`] until the
//! disk takes them: the pipeline backs up to the source (Kafka pauses, the
//! simulator and files wait), and nothing is dropped. When the disk
//! returns, every waiting notification is stored once, and delivered.

use std::time::Duration;

use alerts::{AlertEvent, AlertRouter};
use tokio_util::sync::CancellationToken;

use crate::pipeline::AlertSink;
use crate::state::State;

/// Notifications that may wait for a failing outbox before the pipeline
/// is held (a few KB each: tens of MB at most).
pub(super) const MAX_UNWRITTEN: usize = 10_000;
/// How often a held alert thread retries the outbox.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// The outbox writer's name in component health.
pub(super) const OUTBOX: &str = "outbox";

/// Routes alert events into the outbox and logs each one to the console.
pub(super) struct RouterSink {
    pub(super) router: AlertRouter,
    pub(super) state: State,
    /// Shutdown: a held alert thread stops waiting for the disk.
    pub(super) stop: CancellationToken,
}

impl RouterSink {
    /// Records the outcome of a write to the outbox in component health.
    fn note(&self, result: Result<usize, alerts::OutboxError>) {
        match result {
            Ok(_) if self.router.unwritten() == 0 => self.state.health.up(OUTBOX),
            Ok(_) => {}
            Err(e) => self.state.health.degraded(
                OUTBOX,
                format!(
                    "{e}; {} notification(s) waiting in memory",
                    self.router.unwritten()
                ),
            ),
        }
    }

    /// Retries until at most `limit` notifications wait, or shutdown.
    fn drain_to(&mut self, limit: usize) {
        while self.router.unwritten() > limit && !self.stop.is_cancelled() {
            std::thread::sleep(RETRY_EVERY);
            let r = self.router.retry();
            self.note(r);
        }
    }
}

impl AlertSink for RouterSink {
    fn snapshot(&self) -> anyhow::Result<Vec<u8>> {
        super::router_snapshot(&self.router)
    }

    fn settled(&self) -> bool {
        self.router.settled()
    }

    fn deliver(&mut self, events: &[AlertEvent], now_ms: i64) -> anyhow::Result<()> {
        for e in events {
            tracing::info!(status = ?e.status, severity = ?e.severity, kind = %e.kind, dedup_key = %e.dedup_key, "{}", e.summary);
        }
        self.router.push(events);
        // No event time yet (a partition not heard from): timers wait, but
        // notifications made earlier are still stored.
        let r = if now_ms == i64::MIN {
            self.router.retry()
        } else {
            self.router.flush(now_ms)
        };
        self.note(r);
        self.drain_to(MAX_UNWRITTEN);
        Ok(())
    }

    fn finish(&mut self, _now_ms: i64) -> anyhow::Result<()> {
        // End of input: wait for the disk until every notification is
        // stored, or until shutdown (then they are lost to this process:
        // a checkpoint taken after them holds them, and Kafka input
        // replayed past the last checkpoint makes them again).
        self.drain_to(0);
        let left = self.router.unwritten();
        anyhow::ensure!(
            left == 0,
            "{left} notification(s) could not be stored in the outbox before shutdown"
        );
        Ok(())
    }
}

/// Builds the sink for `router`, registering the outbox's health.
pub(super) fn router_sink(
    router: AlertRouter,
    state: &State,
    stop: &CancellationToken,
) -> RouterSink {
    state.health.register(OUTBOX, true);
    RouterSink {
        router,
        state: state.clone(),
        stop: stop.clone(),
    }
}
