//! The fleet alert stage's Kafka side (see [`super`] and [`super::stage`]):
//! every instance joins the consumer group `<group>.alert-stage` on the
//! fleet topic; the one assigned its partition owns the stage.
//!
//! - **Take over** (assigned): claim the partition in the checkpoint store
//!   (waiting up to [`CLAIM_WAIT`] for the previous owner to let go; past
//!   that it runs unclaimed and checkpoints once the claim is its own),
//!   restore the stage's newest checkpoint (or start fresh), resume exactly
//!   at its offset, and catch up to the end of the topic seen at takeover
//!   before delivering anything (a predecessor's deliveries are not sent
//!   twice).
//! - **Own**: apply each record, deliver the resulting alert events to the
//!   sink (the durable outbox) and publish them; checkpoint every
//!   `checkpoint.interval` and commit the offset after it.
//! - **Give up** (revoked, or stop): let the outbox settle (up to
//!   [`SETTLE_WAIT`]), checkpoint, commit, release the claim, so the next
//!   owner starts where this one stopped.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alerts::AlertEvent;
use anyhow::Context;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::publish::Publisher;
use super::stage::FleetStage;
use crate::checkpoint::{PartitionCheckpoint, PartitionKey};
use crate::pipeline::AlertSink;
use crate::pipeline::alerting::AlertStage;
use crate::pipeline::run::SharedPartitionStore;
use crate::sources::kafka::KafkaSettings;
use crate::state::State;

/// Longest a new owner waits for the previous one's claim to go.
pub const CLAIM_WAIT: Duration = Duration::from_secs(5);

/// Longest a stage being given up waits for its outbox to settle.
const SETTLE_WAIT: Duration = Duration::from_secs(2);

/// The stage's name in component health.
pub const FLEET_STAGE: &str = "fleet_alert_stage";

/// Builds an [`AlertStage`] from snapshot bytes (empty: a fresh one).
pub type MakeStage = Box<dyn Fn(&[u8]) -> anyhow::Result<AlertStage> + Send + Sync>;
/// Builds the alert sink from its snapshot bytes (empty: a fresh one).
pub type MakeSink = Box<dyn Fn(&[u8]) -> anyhow::Result<Box<dyn AlertSink>> + Send + Sync>;

/// What the owner loop needs.
pub struct OwnerConfig {
    pub kafka: KafkaSettings,
    pub topic: String,
    pub store: SharedPartitionStore,
    pub every: Duration,
    pub publisher: Arc<Publisher>,
    pub state: State,
    pub make_stage: MakeStage,
    pub make_sink: MakeSink,
}

/// The stage checkpoint's payload (inside a partition checkpoint of the
/// fleet topic).
#[derive(Serialize, Deserialize)]
struct StageFile {
    stage: Vec<u8>,
    sink: Vec<u8>,
}

/// The stage while this instance owns it.
struct Owned {
    fs: FleetStage,
    sink: Box<dyn AlertSink>,
    /// Next offset to apply.
    next: i64,
    /// Seek here at the first message (the checkpoint's offset).
    want: Option<i64>,
    /// The topic's end when this instance took over.
    end_at_takeover: i64,
    last_checkpoint: Instant,
    /// Records applied since the last checkpoint.
    dirty: bool,
    /// A silence changed and its list is not published yet (held during
    /// the catch-up).
    silences_changed: bool,
}

struct Shared {
    cfg: OwnerConfig,
    owned: Mutex<Option<Owned>>,
    /// Set by the rebalance callback; the poll loop takes over.
    assigned: AtomicBool,
}

struct Ctx(Arc<Shared>);

impl ClientContext for Ctx {}

impl ConsumerContext for Ctx {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(_) = rebalance {
            // Before the partition goes: the next owner must find this
            // owner's last state in the store.
            self.0.give_up(consumer);
        }
    }

    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance
            && tpl
                .find_partition(&self.0.cfg.topic, super::PARTITION)
                .is_some()
        {
            self.0.assigned.store(true, Relaxed);
        }
    }
}

impl Shared {
    fn key(&self) -> PartitionKey {
        (self.cfg.topic.clone(), super::PARTITION)
    }

    /// Checkpoints and releases the stage, if owned.
    fn give_up<C: ConsumerContext>(&self, consumer: &BaseConsumer<C>) {
        let Ok(mut owned) = self.owned.lock() else {
            return;
        };
        let Some(mut o) = owned.take() else {
            return;
        };
        // What the outbox is sending now would go out again from the next
        // owner (see `FleetStage::handed`): give it a moment to settle.
        let until = Instant::now() + SETTLE_WAIT;
        while !o.sink.settled() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        Self::settle(&self.cfg.publisher, &mut o);
        if let Err(e) = self.checkpoint(&mut o, consumer) {
            tracing::error!(
                error = format!("{e:#}"),
                "fleet alert stage: last checkpoint failed; the next owner replays from the one before"
            );
        }
        if let Ok(mut store) = self.cfg.store.lock() {
            store.release(&self.key());
        }
        self.cfg.state.health.up(FLEET_STAGE);
        self.cfg.state.fleet_stage_owner.store(false, Relaxed);
        tracing::info!(offset = o.next, "fleet alert stage handed over");
    }

    fn checkpoint<C: ConsumerContext>(
        &self,
        o: &mut Owned,
        consumer: &BaseConsumer<C>,
    ) -> anyhow::Result<()> {
        let file = StageFile {
            stage: o.fs.snapshot()?,
            sink: o.sink.snapshot()?,
        };
        let shard = crate::checkpoint::to_cbor(&file, "the fleet alert stage checkpoint")?;
        let key = self.key();
        let bytes = {
            let mut store = self
                .cfg
                .store
                .lock()
                .map_err(|_| anyhow::anyhow!("the checkpoint store's lock is poisoned"))?;
            if !store.owns(&key)
                && let Err(e) = store.claim(&key)
            {
                tracing::debug!(
                    error = format!("{e:#}"),
                    "fleet alert stage: not checkpointed, the claim is still held"
                );
                drop(store);
                o.last_checkpoint = Instant::now();
                self.cfg.publisher.snapshot(o.fs.silences(), o.fs.active());
                return Ok(());
            }
            let c = PartitionCheckpoint {
                topic: key.0.clone(),
                partition: key.1,
                seq: store.next_seq(&key)?,
                created_ms: crate::checkpoint::wall_ms(),
                offset: o.next,
                gpus: 0,
                writer: store.writer().to_owned(),
                instance_seq: 0,
                shard,
            };
            store.write(&c)?
        };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&key.0, key.1, Offset::Offset(o.next))?;
        if let Err(e) = consumer.commit(&tpl, CommitMode::Sync) {
            // Harmless: the next owner resumes from the checkpoint's offset.
            tracing::debug!(error = %e, "fleet alert stage: offset commit refused");
        }
        o.last_checkpoint = Instant::now();
        o.dirty = false;
        self.cfg.publisher.snapshot(o.fs.silences(), o.fs.active());
        tracing::debug!(offset = o.next, bytes, "fleet alert stage checkpointed");
        Ok(())
    }

    /// Restores the stage (or starts it) on assignment.
    fn take_over<C: ConsumerContext>(&self, consumer: &BaseConsumer<C>) -> anyhow::Result<()> {
        let t = Instant::now();
        let key = self.key();
        let deadline = Instant::now() + CLAIM_WAIT;
        loop {
            let claimed = self
                .cfg
                .store
                .lock()
                .map_err(|_| anyhow::anyhow!("the checkpoint store's lock is poisoned"))?
                .claim(&key);
            match claimed {
                Ok(()) => break,
                Err(e) if Instant::now() >= deadline => {
                    // A dead owner's lease on an object store outlives it
                    // (docs/scaling.md): run the stage now, checkpoint it
                    // once the claim is ours.
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "fleet alert stage: the previous owner's claim is still held; taking over without it, checkpoints wait for it"
                    );
                    break;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
        let restored = {
            let store = self
                .cfg
                .store
                .lock()
                .map_err(|_| anyhow::anyhow!("the checkpoint store's lock is poisoned"))?;
            store.latest_with(&key, |c| {
                let file: StageFile =
                    crate::checkpoint::from_cbor(&c.shard, "the fleet alert stage checkpoint")?;
                let fs = FleetStage::restore(&file.stage, |b| (self.cfg.make_stage)(b))?;
                let sink = (self.cfg.make_sink)(&file.sink)?;
                Ok((fs, sink))
            })?
        };
        let (fs, sink, want) = match restored {
            Some((c, (fs, sink))) => (fs, sink, Some(c.offset)),
            None => (
                FleetStage::new((self.cfg.make_stage)(&[])?),
                (self.cfg.make_sink)(&[])?,
                None,
            ),
        };
        let (_, end) = consumer
            .fetch_watermarks(&key.0, key.1, Duration::from_secs(10))
            .context("reading the fleet topic's end")?;
        let mut o = Owned {
            fs,
            sink,
            next: want.unwrap_or(0),
            want,
            end_at_takeover: end,
            last_checkpoint: Instant::now(),
            dirty: false,
            silences_changed: false,
        };
        if o.next < end {
            o.fs.start_catch_up();
        } else {
            // Nothing after the checkpoint: what the predecessor handed to
            // its outbox but no receiver confirmed goes out now.
            let pending = o.fs.take_unconfirmed();
            self.deliver_in_order(&mut o, pending)?;
        }
        self.cfg
            .state
            .set_silences(o.fs.stage.engine.silences().to_vec());
        tracing::info!(
            from = ?want,
            end,
            ms = t.elapsed().as_millis() as u64,
            "fleet alert stage taken over"
        );
        *self
            .owned
            .lock()
            .map_err(|_| anyhow::anyhow!("the fleet stage's lock is poisoned"))? = Some(o);
        self.cfg.state.health.up(FLEET_STAGE);
        self.cfg.state.fleet_stage_owner.store(true, Relaxed);
        Ok(())
    }

    /// Applies one message; delivers what it gives.
    fn message<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        offset: i64,
        payload: &[u8],
    ) -> anyhow::Result<()> {
        let Ok(mut owned) = self.owned.lock() else {
            anyhow::bail!("the fleet stage's lock is poisoned");
        };
        let Some(o) = owned.as_mut() else {
            return Ok(());
        };
        if let Some(want) = o.want.take()
            && offset != want
        {
            tracing::info!(
                from = offset,
                to = want,
                "fleet alert stage: seeking to the checkpoint's offset"
            );
            consumer
                .seek(
                    &self.cfg.topic,
                    super::PARTITION,
                    Offset::Offset(want),
                    Duration::from_secs(10),
                )
                .context("seeking the fleet topic")?;
            return Ok(());
        }
        if offset < o.next {
            return Ok(());
        }
        o.next = offset + 1;
        o.dirty = true;
        let applied = match super::decode(payload, offset) {
            Ok(r) => o.fs.apply(r),
            Err(e) => {
                tracing::warn!(error = %e, "fleet alert stage: record skipped");
                return Ok(());
            }
        };
        let events = applied.events;
        o.silences_changed |= applied.silences_changed;
        if o.fs.is_catching_up() {
            if o.next < o.end_at_takeover {
                return Ok(());
            }
            let held = o.fs.caught_up();
            self.deliver_in_order(o, held)?;
        }
        self.deliver(o, &events)?;
        if std::mem::take(&mut o.silences_changed) {
            self.cfg.publisher.snapshot(o.fs.silences(), o.fs.active());
            self.cfg
                .state
                .set_silences(o.fs.stage.engine.silences().to_vec());
        }
        if o.last_checkpoint.elapsed() >= self.cfg.every {
            self.checkpoint(o, consumer)?;
        }
        Ok(())
    }

    /// Delivers events held across a takeover as they happened, one
    /// instant at a time, so an alert that fired and resolved meanwhile
    /// reaches its receivers as both (pushed together, a routing group
    /// would send only the resolve).
    fn deliver_in_order(&self, o: &mut Owned, mut events: Vec<AlertEvent>) -> anyhow::Result<()> {
        events.sort_by_key(|e| e.ts);
        let clock = o.fs.clock_ms();
        for chunk in events.chunk_by(|a, b| a.ts == b.ts) {
            self.deliver_at(o, chunk, chunk[0].ts.min(clock))?;
        }
        Ok(())
    }

    fn deliver(&self, o: &mut Owned, events: &[AlertEvent]) -> anyhow::Result<()> {
        let now = o.fs.clock_ms();
        self.deliver_at(o, events, now)
    }

    fn deliver_at(&self, o: &mut Owned, events: &[AlertEvent], now: i64) -> anyhow::Result<()> {
        // Called with no events too: routing timers run on event time.
        if !events.is_empty() {
            tracing::debug!(now, progress = ?o.fs.progress(), events = events.len(), "fleet alert stage delivers");
        }
        o.sink.deliver(events, now)?;
        self.cfg.publisher.events(events);
        o.fs.handed(events);
        Self::settle(&self.cfg.publisher, o);
        Ok(())
    }

    /// Publishes the keys of delivered events once the outbox holds
    /// nothing more.
    fn settle(publisher: &Publisher, o: &mut Owned) {
        if o.sink.settled() {
            publisher.delivered(o.fs.confirmed());
        }
    }
}

/// Runs the stage's consumer until `stop`: blocking, on its own thread.
pub fn run(cfg: OwnerConfig, stop: &CancellationToken) -> anyhow::Result<()> {
    let mut c = crate::sources::kafka::client_config(&cfg.kafka);
    c.set("group.id", super::stage_group(&cfg.kafka.group_id))
        .set("statistics.interval.ms", "0");
    let topic = cfg.topic.clone();
    let every = cfg.every;
    cfg.state.health.register(FLEET_STAGE, false);
    let shared = Arc::new(Shared {
        cfg,
        owned: Mutex::new(None),
        assigned: AtomicBool::new(false),
    });
    let consumer: BaseConsumer<Ctx> = c
        .create_with_context(Ctx(shared.clone()))
        .context("creating the fleet alert stage's consumer")?;
    consumer
        .subscribe(&[&topic])
        .context("subscribing to the fleet topic")?;
    let mut last_idle = Instant::now();
    while !stop.is_cancelled() {
        let msg = consumer.poll(Duration::from_millis(200));
        let assigned = shared.assigned.swap(false, Relaxed);
        if assigned && let Err(e) = shared.take_over(&consumer) {
            shared
                .cfg
                .state
                .health
                .degraded(FLEET_STAGE, format!("{e:#}"));
            tracing::error!(error = format!("{e:#}"), "fleet alert stage not taken over");
        }
        match msg {
            Some(Ok(m)) => {
                if let Some(p) = m.payload()
                    && let Err(e) = shared.message(&consumer, m.offset(), p)
                {
                    shared
                        .cfg
                        .state
                        .health
                        .degraded(FLEET_STAGE, format!("{e:#}"));
                    tracing::error!(error = format!("{e:#}"), "fleet alert stage");
                }
            }
            Some(Err(e)) => tracing::debug!(error = %e, "fleet alert stage: consumer error"),
            None => {
                // The outbox drains on its own: say what it delivered.
                if let Ok(mut owned) = shared.owned.lock()
                    && let Some(o) = owned.as_mut()
                {
                    Shared::settle(&shared.cfg.publisher, o);
                }
                // An idle topic: checkpoint what was applied.
                if last_idle.elapsed() >= every
                    && let Ok(mut owned) = shared.owned.lock()
                    && let Some(o) = owned.as_mut()
                    && o.dirty
                    && !o.fs.is_catching_up()
                {
                    last_idle = Instant::now();
                    if let Err(e) = shared.checkpoint(o, &consumer) {
                        tracing::error!(
                            error = format!("{e:#}"),
                            "fleet alert stage checkpoint failed"
                        );
                    }
                }
            }
        }
    }
    // Clean stop: leave the group after a last checkpoint, so the next
    // owner starts warm at once.
    shared.give_up(&consumer);
    consumer.unsubscribe();
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if consumer.poll(Duration::from_millis(100)).is_none()
            && consumer.assignment().map(|a| a.count()).unwrap_or(0) == 0
        {
            break;
        }
    }
    Ok(())
}
