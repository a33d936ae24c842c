//! Delivery workers: one async task per receiver drains its outbox queue in
//! sequence order (so events of one incident arrive in order), one request
//! at a time:
//! - accepted -> ack (entry removed);
//! - 429 -> wait `Retry-After` (capped by `max_retry_after`), else backoff;
//! - 5xx, 408, timeout, connection error -> exponential backoff
//!   (`initial_backoff` × 2^attempt, capped at `max_backoff`) with "equal
//!   jitter" (half fixed, half uniform), from `backon` with a seeded jitter
//!   generator, so tests are reproducible and a fleet of instances does not
//!   retry in lockstep;
//! - other 4xx -> dead letter with the receiver's answer, next entry.
//!
//! Retrying the head entry blocks the entries behind it: a receiver that is
//! down is down for all of them, and order per incident matters more.
//! Slack workers space requests by `min_interval` and merge a backlog of up
//! to `max_batch` entries into one message. Nothing here logs a URL or key.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use features::rng::splitmix64;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::outbox::{Outbox, OutboxError};
use crate::sinks::{Outcome, Sink};

/// Retry settings shared by all workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// First backoff.
    pub initial_backoff: Duration,
    /// Backoff cap.
    pub max_backoff: Duration,
    /// Cap on a receiver's `Retry-After`.
    pub max_retry_after: Duration,
    /// Jitter seed (mixed with the receiver name).
    pub seed: u64,
}

impl Default for RetryPolicy {
    /// 1 s doubling to 5 min: PagerDuty suggests "a backoff of a few
    /// minutes" on 429; an hour caps a hostile `Retry-After`.
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            max_retry_after: Duration::from_secs(3600),
            seed: 0,
        }
    }
}

impl RetryPolicy {
    /// The delays before retries 1, 2, 3, …: equal jitter over the capped
    /// exponential, i.e. `d/2 + uniform[0, d/2)` with
    /// `d = min(initial_backoff × 2^(n-1), max_backoff)`. backon adds a
    /// uniform `[0, x)` to its delay `x`, so it is given the halves.
    pub fn backoff(&self, seed: u64) -> ExponentialBackoff {
        ExponentialBuilder::new()
            .with_min_delay(self.initial_backoff / 2)
            .with_max_delay(self.max_backoff / 2)
            .with_factor(2.0)
            .without_max_times()
            .with_jitter()
            .with_jitter_seed(seed)
            .build()
    }
}

/// The jitter seed of one receiver: the policy's seed mixed with its name.
fn seed_for(seed: u64, name: &str) -> u64 {
    features::hash::fnv1a_keyed(seed ^ 0xcbf2_9ce4_8422_2325, name.as_bytes())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, OutboxError> + Send + 'static,
) -> Result<T, OutboxError> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or(Err(OutboxError::Poisoned))
}

/// Sleeps `d` unless shutdown comes first (returns false then).
async fn pause(d: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(d) => true,
    }
}

/// Spawns one worker per sink; they run until `shutdown` is cancelled.
pub fn spawn_workers(
    outbox: &Arc<Outbox>,
    sinks: Vec<Arc<Sink>>,
    policy: RetryPolicy,
    shutdown: &CancellationToken,
) -> Vec<tokio::task::JoinHandle<Result<(), OutboxError>>> {
    sinks
        .into_iter()
        .map(|sink| tokio::spawn(run_worker(outbox.clone(), sink, policy, shutdown.clone())))
        .collect()
}

/// Delivers one receiver's queue until `shutdown` (see the module docs).
pub async fn run_worker(
    outbox: Arc<Outbox>,
    sink: Arc<Sink>,
    policy: RetryPolicy,
    shutdown: CancellationToken,
) -> Result<(), OutboxError> {
    let name = sink.name().to_owned();
    let queue = outbox
        .queue(&name)
        .ok_or_else(|| OutboxError::UnknownReceiver(name.clone()))?;
    // Each run of failures draws a fresh schedule; the seeds follow one
    // SplitMix64 sequence so jitter does not repeat run after run.
    let mut seeds = seed_for(policy.seed, &name);
    let mut backoff = policy.backoff(splitmix64(&mut seeds));
    let mut attempt: u32 = 0;
    let mut last_send: Option<Instant> = None;
    loop {
        if shutdown.is_cancelled() {
            return Ok(());
        }
        // Take the permit before looking, so an enqueue in between is not missed.
        let woken = queue.notify.notified();
        let (ob, n, max) = (outbox.clone(), name.clone(), sink.max_batch());
        let batch = match blocking(move || ob.peek(&n, max)).await {
            Ok(b) => {
                outbox_ok(&queue, &name);
                b
            }
            Err(e) => {
                if !outbox_fault(&queue, &name, e, &shutdown).await? {
                    return Ok(());
                }
                continue;
            }
        };
        if batch.is_empty() {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = woken => continue,
            }
        }
        if let Some(t) = last_send {
            let due = t + sink.min_interval();
            if due > Instant::now() && !pause(due - Instant::now(), &shutdown).await {
                return Ok(());
            }
        }
        let seqs: Vec<u64> = batch.iter().map(|(s, _)| *s).collect();
        let notifications: Vec<_> = batch.into_iter().map(|(_, n)| n).collect();
        last_send = Some(Instant::now());
        match sink.deliver(&notifications).await {
            Outcome::Accepted => {
                if attempt > 0 {
                    backoff = policy.backoff(splitmix64(&mut seeds));
                    tracing::info!(receiver = %name, attempts = attempt + 1, "receiver accepted again");
                }
                attempt = 0;
                DeliveryStats::set_fault(&queue.stats.receiver_fault, None);
                queue
                    .stats
                    .delivered
                    .fetch_add(seqs.len() as u64, Ordering::Relaxed);
                // The entries leave the queue even if their files cannot be
                // removed now (see `Outbox::ack`): never sent twice.
                let (ob, n, s) = (outbox.clone(), name.clone(), seqs.clone());
                if let Err(e) = blocking(move || ob.ack(&n, &s)).await
                    && !outbox_fault(&queue, &name, e, &shutdown).await?
                {
                    return Ok(());
                }
            }
            Outcome::Retry { after, reason } => {
                attempt = attempt.saturating_add(1);
                queue.stats.retries.fetch_add(1, Ordering::Relaxed);
                DeliveryStats::set_fault(&queue.stats.receiver_fault, Some(reason.clone()));
                // Always advanced, so backoff keeps growing across Retry-Afters.
                let next = backoff.next().unwrap_or(policy.max_backoff);
                let delay = match after {
                    Some(a) => a.min(policy.max_retry_after),
                    None => next,
                };
                tracing::warn!(receiver = %name, attempt, delay_ms = delay.as_millis() as u64, %reason, "delivery failed, will retry");
                if !pause(delay, &shutdown).await {
                    return Ok(());
                }
            }
            Outcome::Reject { status, answer } => {
                if attempt > 0 {
                    backoff = policy.backoff(splitmix64(&mut seeds));
                }
                attempt = 0;
                DeliveryStats::set_fault(&queue.stats.receiver_fault, None);
                tracing::error!(receiver = %name, status, %answer, entries = seqs.len(), "receiver rejected notification, dead-lettered");
                for seq in seqs {
                    let (ob, n, a) = (outbox.clone(), name.clone(), answer.clone());
                    match blocking(move || ob.dead_letter(&n, seq, status, &a)).await {
                        Ok(()) => {
                            queue.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            // Still pending: sent again later, and rejected again.
                            if !outbox_fault(&queue, &name, e, &shutdown).await? {
                                return Ok(());
                            }
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// How long a worker waits before touching an outbox that failed again.
const OUTBOX_RETRY: Duration = Duration::from_secs(2);

fn outbox_ok(queue: &crate::outbox::Queue, name: &str) {
    if DeliveryStats::set_fault(&queue.stats.outbox_fault, None) {
        tracing::info!(receiver = %name, "outbox readable again, delivering");
    }
}

/// An outbox I/O error (disk full or failing): logged at ERROR once, then
/// retried every [`OUTBOX_RETRY`] — a worker never stops over it. Other
/// errors (an unknown receiver, a poisoned lock) are returned: they do not
/// heal. Returns false if shutdown came during the wait.
async fn outbox_fault(
    queue: &crate::outbox::Queue,
    name: &str,
    e: OutboxError,
    shutdown: &CancellationToken,
) -> Result<bool, OutboxError> {
    if !matches!(e, OutboxError::Io { .. }) {
        return Err(e);
    }
    if DeliveryStats::set_fault(&queue.stats.outbox_fault, Some(e.to_string())) {
        tracing::error!(receiver = %name, error = %e, "outbox I/O failed; delivery retries");
    }
    Ok(pause(OUTBOX_RETRY, shutdown).await)
}

/// Delivery counters of one receiver.
#[derive(Debug, Default)]
pub struct DeliveryStats {
    /// Entries accepted by the receiver.
    pub delivered: AtomicU64,
    /// Failed attempts that were retried.
    pub retries: AtomicU64,
    /// Entries dead-lettered.
    pub dead_lettered: AtomicU64,
    /// Entries skipped at enqueue because the ledger had them.
    pub deduplicated: AtomicU64,
    /// The outbox I/O error the worker is retrying (none: reading and
    /// acknowledging work).
    pub outbox_fault: Mutex<Option<String>>,
    /// Why the receiver's newest attempt failed, while it keeps failing
    /// (cleared when it accepts).
    pub receiver_fault: Mutex<Option<String>>,
}

impl DeliveryStats {
    /// Sets or clears a fault; true if that changed whether there is one.
    pub(crate) fn set_fault(slot: &Mutex<Option<String>>, fault: Option<String>) -> bool {
        let Ok(mut f) = slot.lock() else {
            return false;
        };
        let changed = f.is_some() != fault.is_some();
        *f = fault;
        changed
    }

    /// A copy of a fault slot.
    pub fn fault(slot: &Mutex<Option<String>>) -> Option<String> {
        slot.lock().ok().and_then(|f| f.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_jitters_reproducibly() {
        let p = RetryPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..RetryPolicy::default()
        };
        let d: Vec<Duration> = p.backoff(7).take(8).collect();
        // backon grows the delay in f32 seconds: allow its rounding.
        let eps = Duration::from_micros(1);
        for (a, x) in d.iter().enumerate() {
            let full = Duration::from_millis(100 * (1 << a)).min(Duration::from_secs(1));
            assert!(
                *x + eps >= full / 2 && *x <= full + eps,
                "attempt {a}: {x:?}"
            );
        }
        assert!(d.windows(2).any(|w| w[0] != w[1]), "jittered: {d:?}");
        assert_eq!(d, p.backoff(7).take(8).collect::<Vec<_>>());
        assert_ne!(d, p.backoff(8).take(8).collect::<Vec<_>>());
    }
}
