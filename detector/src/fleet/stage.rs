//! The fleet alert stage's state and logic, apart from Kafka: applies fleet
//! topic records to the one [`AlertStage`] of the group (see [`super`]).
//!
//! - **Time.** Each round names the telemetry partitions its instance holds
//!   and the event time the instance's lagging partitions have reached
//!   (its horizon). The stage keeps that per partition and runs its timers
//!   on the minimum: a partition whose owner died keeps holding time back at
//!   the point it stopped until its next owner reports, so its GPUs are not
//!   judged silent (`gpu_lost`) because nobody reads them for a while.
//! - **Replays.** A partition's next owner resumes from the partition's
//!   checkpoint and publishes again what its old owner published after it;
//!   an assessment no newer than the newest taken for its GPU (and a rack
//!   bucket no newer than the newest judged for its rack) is dropped.
//! - **Hand-over of the stage itself.** A new owner restores the stage's
//!   checkpoint and re-reads the topic from its offset to the end seen at
//!   takeover ("catching up"). What it would deliver meanwhile is held; the
//!   events whose notifications its predecessor's receivers accepted
//!   ([`super::Record::Delivered`]) are noted; at the end of the catch-up
//!   every other held event goes out (at least once: one accepted just
//!   before the predecessor died, unconfirmed, is sent again). The
//!   checkpoint carries the events its owner had handed to its outbox and
//!   no receiver had confirmed: that outbox is on the dead owner's disk,
//!   so they are held with the rest.

use std::collections::{BTreeMap, HashMap, HashSet};

use alerts::{AlertEvent, Status};
use features::GpuId;
use features::expected::rack::RackReading;
use features::hash::FxBuild;
use serde::{Deserialize, Serialize};

use super::{Record, Round, SilenceCommand};
use crate::pipeline::alerting::AlertStage;

/// A partition that does not hold time back.
const FREE: i64 = i64::MAX;

/// The fleet alert stage.
pub struct FleetStage {
    pub stage: AlertStage,
    /// Newest assessment time taken per GPU.
    seen: HashMap<GpuId, i64, FxBuild>,
    /// Per telemetry partition: the event time its owner had reached
    /// ([`FREE`]: none of it was behind).
    progress: BTreeMap<String, i64>,
    /// Newest rack bucket judged per rack.
    racks: HashMap<String, i64>,
    /// Rack pieces waiting until every partition is past their bucket
    /// (a rack split over instances comes in several rounds).
    held_racks: Vec<RackReading>,
    /// Alerts firing, by dedup key (published for late views).
    active: BTreeMap<String, AlertEvent>,
    /// While catching up: events held back, and those already delivered.
    catch_up: Option<CatchUp>,
    /// Events handed to the sink whose notifications some receiver has
    /// not accepted yet. Checkpointed: they sit in this owner's outbox,
    /// which a next owner on another machine does not have, so it delivers
    /// them again unless the topic says they were
    /// ([`super::Record::Delivered`]).
    unconfirmed: Vec<AlertEvent>,
}

#[derive(Default)]
struct CatchUp {
    held: Vec<AlertEvent>,
    delivered: HashSet<(String, Status, i64)>,
}

/// What applying one record gives the owner to do.
#[derive(Debug, Default)]
pub struct Applied {
    /// Alert state changes to deliver (and publish).
    pub events: Vec<AlertEvent>,
    /// The silences changed: publish a snapshot.
    pub silences_changed: bool,
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    stage: Vec<u8>,
    seen: Vec<(GpuId, i64)>,
    progress: BTreeMap<String, i64>,
    racks: Vec<(String, i64)>,
    /// Absent in stage checkpoints written before racks were held.
    #[serde(default)]
    held_racks: Vec<RackReading>,
    active: Vec<AlertEvent>,
    /// Absent in stage checkpoints written before they were kept.
    #[serde(default)]
    unconfirmed: Vec<AlertEvent>,
}

pub fn key_of(e: &AlertEvent) -> (String, Status, i64) {
    (e.dedup_key.clone(), e.status, e.ts)
}

impl FleetStage {
    pub fn new(stage: AlertStage) -> Self {
        FleetStage {
            stage,
            seen: HashMap::default(),
            progress: BTreeMap::new(),
            racks: HashMap::new(),
            held_racks: Vec::new(),
            active: BTreeMap::new(),
            catch_up: None,
            unconfirmed: Vec::new(),
        }
    }

    /// Bytes for the stage checkpoint (the engine's snapshot inside).
    pub fn snapshot(&self) -> anyhow::Result<Vec<u8>> {
        let mut seen: Vec<_> = self.seen.iter().map(|(g, t)| (g.clone(), *t)).collect();
        seen.sort_unstable();
        let mut racks: Vec<_> = self.racks.iter().map(|(r, t)| (r.clone(), *t)).collect();
        racks.sort_unstable();
        let snap = Snapshot {
            stage: self.stage.snapshot()?,
            seen,
            progress: self.progress.clone(),
            racks,
            held_racks: self.held_racks.clone(),
            active: self.active.values().cloned().collect(),
            unconfirmed: self.unconfirmed.clone(),
        };
        crate::checkpoint::to_cbor(&snap, "the fleet alert stage")
    }

    /// A stage from [`FleetStage::snapshot`] bytes; `restore_stage` rebuilds
    /// the inner [`AlertStage`] under the current config.
    pub fn restore(
        bytes: &[u8],
        restore_stage: impl FnOnce(&[u8]) -> anyhow::Result<AlertStage>,
    ) -> anyhow::Result<Self> {
        let snap: Snapshot = crate::checkpoint::from_cbor(bytes, "the fleet alert stage")?;
        Ok(FleetStage {
            stage: restore_stage(&snap.stage)?,
            seen: snap.seen.into_iter().collect(),
            progress: snap.progress,
            racks: snap.racks.into_iter().collect(),
            held_racks: snap.held_racks,
            active: snap
                .active
                .into_iter()
                .map(|e| (e.dedup_key.clone(), e))
                .collect(),
            catch_up: None,
            unconfirmed: snap.unconfirmed,
        })
    }

    /// Holds deliveries until [`FleetStage::caught_up`], starting with the
    /// predecessor's unconfirmed events (those the topic then says were
    /// delivered are dropped with the rest).
    pub fn start_catch_up(&mut self) {
        self.catch_up = Some(CatchUp {
            held: std::mem::take(&mut self.unconfirmed),
            ..CatchUp::default()
        });
    }

    /// A new owner with nothing to catch up: the predecessor's unconfirmed
    /// events, to deliver now.
    pub fn take_unconfirmed(&mut self) -> Vec<AlertEvent> {
        std::mem::take(&mut self.unconfirmed)
    }

    /// `events` were handed to the sink (see `unconfirmed`).
    pub fn handed(&mut self, events: &[AlertEvent]) {
        self.unconfirmed.extend_from_slice(events);
    }

    /// Every receiver accepted what was handed so far: their keys, for a
    /// [`super::Record::Delivered`].
    pub fn confirmed(&mut self) -> Vec<(String, Status, i64)> {
        std::mem::take(&mut self.unconfirmed)
            .iter()
            .map(key_of)
            .collect()
    }

    pub fn is_catching_up(&self) -> bool {
        self.catch_up.is_some()
    }

    /// Ends the catch-up: the held events its predecessor did not deliver.
    pub fn caught_up(&mut self) -> Vec<AlertEvent> {
        let Some(c) = self.catch_up.take() else {
            return Vec::new();
        };
        let held = c.held.len();
        let out: Vec<AlertEvent> = c
            .held
            .into_iter()
            .filter(|e| !c.delivered.contains(&key_of(e)))
            .collect();
        tracing::info!(
            held,
            already_delivered = held - out.len(),
            "fleet alert stage caught up"
        );
        out
    }

    /// Each telemetry partition's progress (for the log).
    pub fn progress(&self) -> &BTreeMap<String, i64> {
        &self.progress
    }

    /// Event time the stage's timers run on.
    pub fn clock_ms(&self) -> i64 {
        self.stage.clock_ms()
    }

    /// The silences in force or pending.
    pub fn silences(&self) -> Vec<super::WireSilence> {
        self.stage
            .engine
            .silences()
            .iter()
            .map(super::WireSilence::from)
            .collect()
    }

    /// The alerts firing now.
    pub fn active(&self) -> Vec<AlertEvent> {
        self.active.values().cloned().collect()
    }

    /// Applies one record of the fleet topic.
    pub fn apply(&mut self, record: Record) -> Applied {
        let mut applied = Applied::default();
        match record {
            Record::Round(r) => self.round(r, &mut applied.events),
            Record::Silence(cmd) => {
                applied.silences_changed = self.silence(cmd);
            }
            Record::Delivered(keys) => {
                if let Some(c) = &mut self.catch_up {
                    c.delivered.extend(keys);
                }
            }
            Record::Events(_) => {}
            Record::Snapshot { .. } => {}
        }
        self.settle(&mut applied.events);
        applied
    }

    /// Notes what fires and resolves; while catching up, holds it back.
    fn settle(&mut self, events: &mut Vec<AlertEvent>) {
        for e in events.iter() {
            match e.status {
                Status::Firing => {
                    self.active.insert(e.dedup_key.clone(), e.clone());
                }
                Status::Resolved => {
                    self.active.remove(&e.dedup_key);
                }
            }
        }
        if let Some(c) = &mut self.catch_up {
            c.held.append(events);
        }
    }

    fn round(&mut self, r: Round, out: &mut Vec<AlertEvent>) {
        for p in r.partitions {
            self.progress.insert(p, r.horizon_ms.unwrap_or(FREE));
        }
        let horizon = self.progress.values().min().copied().filter(|h| *h != FREE);
        self.stage.set_horizon(horizon);
        if !r.evicted.is_empty() {
            self.stage.forget(&r.evicted);
        }
        for rack in r.racks {
            // A replayed piece: its bucket was judged, or it is held.
            if self
                .racks
                .get(&*rack.rack)
                .is_some_and(|t| *t >= rack.end_ms)
                || self.held_racks.contains(&rack)
            {
                continue;
            }
            self.held_racks.push(rack);
        }
        // Racks before GPUs: a rack verdict the clock has reached is in
        // before the GPU alerts it inhibits could fire.
        self.release_racks(horizon, out);
        if r.assessments.is_empty() {
            // Only time moved (an idle source's horizon): timers run to it,
            // or a GPU silent at the end of the stream is never judged lost.
            let now = self.stage.clock_ms();
            if now != i64::MIN {
                self.stage.tick(now, out);
            }
        }
        for w in r.assessments {
            let newest = self.seen.get(&w.a.gpu).copied();
            if newest.is_some_and(|t| t >= w.a.ts_ms) {
                continue;
            }
            let a = w.into_assessment();
            self.seen.insert(a.gpu.clone(), a.ts_ms);
            self.stage.observe(&a, out);
        }
    }

    /// Rack pieces held for their bucket's other pieces.
    pub fn held_racks(&self) -> usize {
        self.held_racks.len()
    }

    /// Judges the held rack buckets every partition is past (`horizon`:
    /// the slowest partition's progress; `None`: none holds time back):
    /// each partition has closed them by then, so every piece is in.
    fn release_racks(&mut self, horizon: Option<i64>, out: &mut Vec<AlertEvent>) {
        let ready = |r: &RackReading| horizon.is_none_or(|h| r.end_ms < h);
        if !self.held_racks.iter().any(ready) {
            return;
        }
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held_racks)
            .into_iter()
            .partition(ready);
        self.held_racks = later;
        for r in &now {
            self.stage.push_rack(r);
            let newest = self.racks.entry(r.rack.to_string()).or_insert(r.end_ms);
            *newest = (*newest).max(r.end_ms);
        }
        self.stage.flush_racks(out);
    }

    /// Applies a silence change; true when the list changed.
    fn silence(&mut self, cmd: SilenceCommand) -> bool {
        let clock = self.stage.clock_ms();
        let engine = &mut self.stage.engine;
        match cmd {
            SilenceCommand::Add(w) => match w.to_silence() {
                Ok(s) => {
                    engine.add_silence(s);
                    true
                }
                Err(e) => {
                    tracing::warn!(error = %e, "fleet topic: silence not added");
                    false
                }
            },
            SilenceCommand::Expire { id, at_ms } => {
                let now = match clock {
                    i64::MIN => at_ms,
                    c => c,
                };
                engine.expire_silence(&id, now)
            }
        }
    }

    /// Runs the timers to the stage's clock (an idle topic).
    pub fn tick(&mut self, out: &mut Vec<AlertEvent>) {
        let now = self.stage.clock_ms();
        if now != i64::MIN {
            let mut events = Vec::new();
            self.stage.tick(now, &mut events);
            self.settle(&mut events);
            out.append(&mut events);
        }
    }
}
