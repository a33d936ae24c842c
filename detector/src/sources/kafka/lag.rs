//! What the poll loop does on a timer: pace partitions that run ahead in
//! event time (the decision is [`Pacer`]'s; this applies it to the
//! consumer) and publish per-partition lag, broker contact and readiness.

use std::time::Instant;

use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::context::{Ctx, Shared};
use super::health::{Change, Watch};
use super::pacing::{MAX_AHEAD_MS, Pacer};
use crate::metrics::partitions::label;
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

/// Publishes lag per partition, broker contact and readiness: ready while
/// the brokers answer, partitions are assigned and the lag is within the
/// bound. Each change of broker contact is logged once (WARN when lost,
/// naming the brokers and librdkafka's newest connection error; INFO when
/// back).
pub(super) fn report_lag(
    shared: &Shared,
    state: &State,
    ready_lag: i64,
    brokers: &str,
    watch: &mut Watch,
) {
    let (silent, last_error) = match shared.reach.lock() {
        Ok(r) => (r.silent_for(), r.last_error.clone()),
        Err(_) => (None, None),
    };
    let change = watch.update(silent);
    state.metrics.set_kafka_broker_up(watch.up());
    // The source is degraded (not down: librdkafka reconnects by itself).
    match &change {
        Some(Change::Down(_)) => state.health.degraded(
            "source",
            format!(
                "no Kafka broker of {brokers} answering; last error: {}",
                last_error.as_deref().unwrap_or("none")
            ),
        ),
        Some(Change::Up(_)) => state.health.up("source"),
        None => {}
    }
    let lag = total_lag(shared, state);
    let was_ready = state.is_ready();
    // Partitions to read: after an outage the group is rejoined some
    // seconds after the brokers answer, and until then the lag is stale.
    let assigned = shared.assigned.lock().is_ok_and(|a| !a.is_empty());
    let ready = match lag {
        Some(total) => watch.up() && assigned && total <= ready_lag,
        // No statistics yet: not ready until they come (start-up), and not
        // ready once the brokers are known to be gone.
        None => was_ready && watch.up(),
    };
    state.set_ready(ready);
    match change {
        Some(Change::Down(silent)) => tracing::warn!(
            brokers,
            silent_s = silent.as_secs(),
            last_error = last_error.as_deref().unwrap_or("none"),
            "Kafka brokers unreachable: not ready (offsets are committed again once they answer)"
        ),
        Some(Change::Up(down)) => tracing::info!(
            brokers,
            down_s = down.as_secs(),
            lag = lag.unwrap_or(-1),
            ready,
            "Kafka brokers reachable again"
        ),
        None if ready != was_ready => {
            tracing::info!(lag = lag.unwrap_or(-1), ready, "consumer lag")
        }
        None => {}
    }
}

/// Total lag over the assigned partitions statistics have reported, each
/// partition's published; `None` before any. A partition that moved to
/// another member counts no more here (its last lag would hold this
/// instance unready for good) and leaves the gauge.
fn total_lag(shared: &Shared, state: &State) -> Option<i64> {
    // The order `Shared::horizon` takes them in.
    let (Ok(assigned), Ok(high), Ok(sent)) = (
        shared.assigned.lock(),
        shared.high.lock(),
        shared.sent.lock(),
    ) else {
        return None;
    };
    let mut total = None::<i64>;
    let mut shown = Vec::with_capacity(assigned.len());
    for key in assigned.iter() {
        let Some(hi) = high.get(key) else {
            continue;
        };
        let next = sent.get(key).copied().unwrap_or(0);
        let lag = (hi - next).max(0);
        total = Some(total.unwrap_or(0).saturating_add(lag));
        let name = label(key);
        state.metrics.set_lag(name.clone(), lag);
        shown.push(name);
    }
    state.metrics.keep_lag(&shown);
    let held: Vec<String> = assigned.iter().map(label).collect();
    state.metrics.partitions.keep(&held);
    total
}
