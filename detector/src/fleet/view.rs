//! The fleet view (see [`super`]): every instance reads the whole fleet
//! topic and keeps the risk table, alerts and silences REST serves, so any
//! instance answers for any GPU, and the fleet map shows the whole fleet.
//!
//! Starts [`BACKFILL`] of wall time back in the topic (the owner's
//! snapshots bring older silences and alerts still firing), then follows
//! it. Reads with no consumer group: nothing is committed, each instance
//! reads everything. During a rebalance of the telemetry or stage groups
//! the view keeps answering with what it has; each GPU's row carries its
//! age.

use std::collections::HashMap;
use std::time::Duration;

use features::GpuId;
use features::hash::FxBuild;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tokio_util::sync::CancellationToken;

use super::{FleetError, Record};
use crate::sources::kafka::KafkaSettings;
use crate::state::State;

/// How far back (wall time) a starting view reads.
pub const BACKFILL: Duration = Duration::from_secs(15 * 60);

/// The view's name in component health.
pub const FLEET_VIEW: &str = "fleet_view";

/// Applies fleet records to an instance's shared state.
#[derive(Default)]
pub struct View {
    /// Newest assessment time published per GPU (a replayed older one is
    /// not shown over it).
    newest: HashMap<GpuId, i64, FxBuild>,
}

impl View {
    pub fn apply(&mut self, state: &State, record: Record) {
        match record {
            Record::Round(r) => {
                let mut batch = Vec::with_capacity(r.assessments.len());
                let mut clock = i64::MIN;
                for w in r.assessments {
                    let t = w.a.ts_ms;
                    if self.newest.get(&w.a.gpu).is_some_and(|n| *n >= t) {
                        continue;
                    }
                    self.newest.insert(w.a.gpu.clone(), t);
                    clock = clock.max(t);
                    batch.push(w.into_assessment());
                }
                state.publish(&batch);
                if let Some(h) = r.horizon_ms {
                    clock = clock.min(h);
                }
                if clock != i64::MIN {
                    state.set_clock(clock);
                }
                if !r.evicted.is_empty() {
                    for g in &r.evicted {
                        self.newest.remove(g);
                    }
                    state.forget(&r.evicted);
                }
            }
            Record::Events(events) => state.record_alerts(&events),
            Record::Snapshot { silences, active } => {
                state.set_silences(super::silences_of(&silences));
                state.set_active(&active);
            }
            Record::Silence(_) | Record::Delivered(_) => {}
        }
    }
}

/// Runs the view until `stop`: blocking, on its own thread.
pub fn run(
    kafka: &KafkaSettings,
    topic: &str,
    state: &State,
    stop: &CancellationToken,
) -> Result<(), FleetError> {
    let mut c = crate::sources::kafka::client_config(kafka);
    // Assigned, never subscribed or committed: the group id only names it.
    c.set("group.id", format!("{}.view", kafka.group_id))
        .set("statistics.interval.ms", "0");
    let consumer: BaseConsumer = c.create()?;
    let since = crate::checkpoint::wall_ms() - BACKFILL.as_millis() as i64;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, super::PARTITION, Offset::Offset(since))?;
    let start = consumer
        .offsets_for_times(tpl, Duration::from_secs(10))
        .ok()
        .and_then(|t| {
            t.find_partition(topic, super::PARTITION)
                .map(|e| e.offset())
        })
        .filter(|o| matches!(o, Offset::Offset(_)))
        .unwrap_or(Offset::End);
    let mut assign = TopicPartitionList::new();
    assign.add_partition_offset(topic, super::PARTITION, start)?;
    consumer.assign(&assign)?;
    state.health.up(FLEET_VIEW);
    tracing::info!(topic, from = ?start, "fleet view reading");
    let mut view = View::default();
    let mut bad = 0u64;
    while !stop.is_cancelled() {
        let Some(m) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                state.health.degraded(FLEET_VIEW, e.to_string());
                continue;
            }
        };
        let Some(payload) = m.payload() else {
            continue;
        };
        match super::decode(payload, m.offset()) {
            Ok(r) => {
                view.apply(state, r);
                state.health.up(FLEET_VIEW);
            }
            Err(e) => {
                bad += 1;
                if bad.is_power_of_two() {
                    tracing::warn!(error = %e, bad, "fleet view: record skipped");
                }
            }
        }
    }
    Ok(())
}
