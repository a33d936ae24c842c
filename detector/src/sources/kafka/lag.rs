//! What the poll loop does on a timer: pace partitions that run ahead in
//! event time (the decision is [`Pacer`]'s; this applies it to the
//! consumer) and publish per-partition lag and readiness.

use std::time::Instant;

use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::context::{Ctx, Shared};
use super::pacing::{MAX_AHEAD_MS, Pacer};
use crate::state::State;

/// Pauses partitions more than [`MAX_AHEAD_MS`] ahead of the horizon for
/// [`super::pacing::AHEAD_GRACE`] and resumes them once the others are within half of that.
pub(super) fn pace(
    consumer: &BaseConsumer<Ctx>,
    shared: &Shared,
    state: &State,
    ahead: &mut Pacer,
) {
    let horizon = shared.horizon().filter(|h| *h != i64::MIN);
    let times: Vec<((String, i32), i64)> = match shared.event_time.lock() {
        Ok(et) => et.iter().map(|(k, v)| (k.clone(), v.0)).collect(),
        Err(_) => return,
    };
    let now = Instant::now();
    for (k, t) in times {
        let far = horizon.is_some_and(|h| t > h + MAX_AHEAD_MS);
        let near = horizon.is_none_or(|h| t <= h + MAX_AHEAD_MS / 2);
        let change = ahead.decide(&k, far, near, now);
        let Some(pause) = change else { continue };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&k.0, k.1);
        let r = if pause {
            consumer.pause(&tpl)
        } else {
            consumer.resume(&tpl)
        };
        match r {
            Ok(()) if pause => {
                state.metrics.paused("ahead");
                ahead.paused.insert(k);
            }
            Ok(()) => {
                ahead.paused.remove(&k);
            }
            Err(e) => tracing::warn!(error = %e, "pacing a partition"),
        }
    }
}

/// Publishes lag per partition and readiness (caught up within the bound).
pub(super) fn report_lag(shared: &Shared, state: &State, ready_lag: i64) {
    let (Ok(high), Ok(sent)) = (shared.high.lock(), shared.sent.lock()) else {
        return;
    };
    if high.is_empty() {
        return;
    }
    let mut total = 0i64;
    for ((t, p), hi) in high.iter() {
        let next = sent.get(&(t.clone(), *p)).copied().unwrap_or(0);
        let lag = (hi - next).max(0);
        total += lag;
        state.metrics.set_lag(format!("{t}/{p}"), lag);
    }
    let ready = total <= ready_lag;
    if ready != state.is_ready() {
        tracing::info!(lag = total, ready, "consumer lag");
    }
    state.set_ready(ready);
}
