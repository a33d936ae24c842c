//! `serve`'s supervisor: watches every long-lived part and turns what it
//! sees into component health (`crate::health`), and ends the service
//! when a part it cannot run without has stopped.
//!
//! - Delivery workers report their faults in the outbox's per-receiver
//!   stats (`outbox_fault`, `receiver_fault`); the supervisor copies them
//!   into `delivery:<receiver>` every [`TICK`]. A worker that returns an
//!   error or panics is down.
//! - Threads report themselves: shards and the alert thread mark
//!   themselves down when they fail or panic, the source thread when it
//!   returns an error.
//! - Any component down ends the service within a [`TICK`]: the stop
//!   signal is raised (REST stops, the pipeline drains, workers stop) and
//!   `serve` returns the cause, so the process exits non-zero and systemd
//!   or Kubernetes restarts it from the last checkpoint. Faults a part
//!   retries by itself (degraded) never end it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use alerts::outbox::{DeliveryStats, Outbox, OutboxError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::state::State;

/// How often the supervisor looks.
const TICK: Duration = Duration::from_millis(500);

/// The first unrecoverable failure seen, if any.
pub(super) type Failure = Arc<Mutex<Option<String>>>;

/// A delivery worker's component name.
pub(super) fn delivery(receiver: &str) -> String {
    format!("delivery:{receiver}")
}

/// Reports a delivery worker's end: an error or a panic is down.
pub(super) fn watch_worker(
    state: State,
    receiver: String,
    worker: JoinHandle<Result<(), OutboxError>>,
) -> JoinHandle<()> {
    state.health.register(&delivery(&receiver), false);
    tokio::spawn(async move {
        match worker.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => state.health.down(&delivery(&receiver), e),
            Err(e) => state
                .health
                .down(&delivery(&receiver), format!("the worker panicked: {e}")),
        }
    })
}

/// Runs until `shutdown`: copies delivery faults into health, and raises
/// `shutdown` (recording why in `failure`) once any component is down.
pub(super) async fn supervise(
    state: State,
    outbox: Arc<Outbox>,
    receivers: Vec<String>,
    shutdown: CancellationToken,
    failure: Failure,
) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        let down = state.health.down_parts();
        for r in &receivers {
            let Some(stats) = outbox.stats(r) else {
                continue;
            };
            let name = delivery(r);
            let fault = DeliveryStats::fault(&stats.outbox_fault)
                .map(|f| format!("outbox: {f}"))
                .or_else(|| DeliveryStats::fault(&stats.receiver_fault));
            match fault {
                _ if down.contains(&name) => {}
                Some(f) => state.health.degraded(&name, f),
                None => state.health.up(&name),
            }
        }
        if !down.is_empty() {
            let components = state.health.snapshot();
            let causes: Vec<String> = down
                .iter()
                .map(|n| {
                    let cause = components
                        .get(n)
                        .and_then(|c| c.cause.clone())
                        .unwrap_or_default();
                    format!("{n}: {cause}")
                })
                .collect();
            let why = causes.join("; ");
            tracing::error!(
                failed = %why,
                "unrecoverable: stopping so that the service manager restarts forewarn from the last checkpoint"
            );
            if let Ok(mut f) = failure.lock() {
                f.get_or_insert(why);
            }
            shutdown.cancel();
            return;
        }
    }
}
