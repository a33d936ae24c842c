//! Delivery workers: one async task per receiver drains its outbox queue in
//! sequence order (so events of one incident arrive in order), one request
//! at a time:
//! - accepted -> ack (entry removed);
//! - 429 -> wait `Retry-After` (capped by `max_retry_after`), else backoff;
//! - 5xx, 408, timeout, connection error -> exponential backoff
//!   (`initial_backoff` × 2^attempt, capped at `max_backoff`) with "equal
//!   jitter" (half fixed, half uniform) from a seeded SplitMix64, so tests are
//!   reproducible and a fleet of instances does not retry in lockstep;
//! - other 4xx -> dead letter with the receiver's answer, next entry.
//!
//! Retrying the head entry blocks the entries behind it: a receiver that is
//! down is down for all of them, and order per incident matters more.
//! Slack workers space requests by `min_interval` and merge a backlog of up
//! to `max_batch` entries into one message. Nothing here logs a URL or key.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

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

/// SplitMix64: tiny, seeded, good enough for jitter.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Next uniform `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl RetryPolicy {
    /// Delay before retry number `attempt` (1-based): equal jitter over the
    /// capped exponential.
    pub fn backoff(&self, attempt: u32, jitter: &mut Jitter) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(1_u32 << attempt.saturating_sub(1).min(20));
        let capped = exp.min(self.max_backoff);
        let half = capped / 2;
        let span = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_nanos(jitter.next_u64() % span)
    }
}

fn seed_for(seed: u64, name: &str) -> u64 {
    name.bytes().fold(seed ^ 0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
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
    let mut jitter = Jitter::new(seed_for(policy.seed, &name));
    let mut attempt: u32 = 0;
    let mut last_send: Option<Instant> = None;
    loop {
        if shutdown.is_cancelled() {
            return Ok(());
        }
        // Take the permit before looking, so an enqueue in between is not missed.
        let woken = queue.notify.notified();
        let (ob, n, max) = (outbox.clone(), name.clone(), sink.max_batch());
        let batch = blocking(move || ob.peek(&n, max)).await?;
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
                attempt = 0;
                let (ob, n, s) = (outbox.clone(), name.clone(), seqs.clone());
                blocking(move || ob.ack(&n, &s)).await?;
                queue
                    .stats
                    .delivered
                    .fetch_add(seqs.len() as u64, Ordering::Relaxed);
            }
            Outcome::Retry { after, reason } => {
                attempt = attempt.saturating_add(1);
                queue.stats.retries.fetch_add(1, Ordering::Relaxed);
                let delay = match after {
                    Some(a) => a.min(policy.max_retry_after),
                    None => policy.backoff(attempt, &mut jitter),
                };
                tracing::warn!(receiver = %name, attempt, delay_ms = delay.as_millis() as u64, %reason, "delivery failed, will retry");
                if !pause(delay, &shutdown).await {
                    return Ok(());
                }
            }
            Outcome::Reject { status, answer } => {
                attempt = 0;
                tracing::error!(receiver = %name, status, %answer, entries = seqs.len(), "receiver rejected notification, dead-lettered");
                for seq in seqs {
                    let (ob, n, a) = (outbox.clone(), name.clone(), answer.clone());
                    blocking(move || ob.dead_letter(&n, seq, status, &a)).await?;
                    queue.stats.dead_lettered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
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
        let mut j = Jitter::new(7);
        let d: Vec<Duration> = (1..=6).map(|a| p.backoff(a, &mut j)).collect();
        for (a, x) in d.iter().enumerate() {
            let full = Duration::from_millis(100 * (1 << a)).min(Duration::from_secs(1));
            assert!(*x >= full / 2 && *x <= full, "attempt {a}: {x:?}");
        }
        let mut j2 = Jitter::new(7);
        assert_eq!(
            d,
            (1..=6).map(|a| p.backoff(a, &mut j2)).collect::<Vec<_>>()
        );
    }
}
