//! The feed: what happens to a source's batch before the shards see it,
//! on the source's thread, in input order. Every sample passes the
//! admission gate (`features::admission`: event-time sanity, probation,
//! bounded state); what it refuses or drops is counted and dead-lettered
//! here. What it admits is cut into rounds (see [`Round`]).
//!
//! History from one ordered stream (files, the simulator: no horizon) is
//! cut at fixed event-time boundaries, whatever the source's batch sizes:
//! so the same admitted telemetry gives the same rounds, the same shard
//! interleaving at the alert stage and the same alerts, however much
//! garbage was mixed into the input around it. Partitioned or live input
//! (Kafka: a horizon, or the wall clock) is cut from each batch as it
//! comes, never held back.

use std::sync::{Arc, OnceLock};

use features::admission::{Admission, AdmissionConfig, Admitted, Eviction};
use features::{FeatureConfig, GpuId, Sample};

use super::buffers;
use super::parts::MAX_ROUND_SPAN_MS;
use crate::sources::DeadLetters;
use crate::state::State;

/// One round for the shards: every shard gets its part of it (maybe
/// empty), so the alert thread reads one output per shard per round.
pub(super) struct Round {
    pub samples: Vec<Sample>,
    pub origin_ms: Option<i64>,
    /// Event time the shards may judge silence by: the source's horizon
    /// capped at the fleet's robust clock.
    pub horizon_ms: Option<i64>,
    pub clock_ms: Option<i64>,
    /// Established GPUs to forget before the samples.
    pub evict: Vec<GpuId>,
}

pub(super) struct Feed {
    admission: Admission,
    /// Judge event time against the wall clock.
    live: bool,
    /// A horizon was seen: partitioned input, cut per batch from then on.
    partitioned: bool,
    /// History: admitted samples of the round not yet complete, and the
    /// event-time bucket it covers.
    pending: Vec<Sample>,
    pending_bucket: i64,
    /// Evictions waiting for the next round.
    evict: Vec<GpuId>,
    /// Input samples, and those refused or dropped.
    pub(super) samples: u64,
    pub(super) refused: u64,
    state: State,
    dead: Arc<OnceLock<DeadLetters>>,
}

/// The gate's tolerances follow the feature engine's: the same skew,
/// silence and TTL.
fn admission_config(f: &FeatureConfig) -> AdmissionConfig {
    AdmissionConfig {
        max_skew_ms: f.max_future_skew_ms,
        silence_ms: f.silence_ms,
        gpu_ttl_ms: f.gpu_ttl_ms,
        ..AdmissionConfig::default()
    }
}

impl Feed {
    /// A feed for shards under `features`, whose restored GPUs (and their
    /// newest event times) are `restored`.
    pub(super) fn new<'a>(
        features: &FeatureConfig,
        restored: impl Iterator<Item = (&'a GpuId, i64)>,
        state: State,
        dead: Arc<OnceLock<DeadLetters>>,
    ) -> Self {
        let mut admission = Admission::new(admission_config(features));
        admission.restore(restored.map(|(g, t)| (g.clone(), t)));
        Feed {
            admission,
            live: false,
            partitioned: false,
            pending: Vec::new(),
            pending_bucket: i64::MIN,
            evict: Vec::new(),
            samples: 0,
            refused: 0,
            state,
            dead,
        }
    }

    pub(super) fn set_live(&mut self, live: bool) {
        self.live = live;
    }

    /// GPUs of a partition unit taken over, at their newest event times:
    /// admitted as established (they were on their previous owner).
    pub(super) fn adopt(&mut self, gpus: impl Iterator<Item = (GpuId, i64)>) {
        self.admission.restore(gpus);
    }

    /// GPUs of a partition unit given away: forgotten with no eviction
    /// (their state moved), samples held on probation dropped.
    pub(super) fn release(&mut self, gpus: &[GpuId]) {
        self.admission.release(gpus);
    }

    pub(super) fn set_max_gpus(&mut self, max: usize) {
        self.admission.set_max_gpus(max);
    }

    /// Passes a source batch through the gate; returns the rounds it
    /// completed (live: at least one, maybe empty, so timers run).
    pub(super) fn push(
        &mut self,
        batch: Vec<Sample>,
        origin_ms: Option<i64>,
        horizon_ms: Option<i64>,
    ) -> Vec<Round> {
        self.samples += batch.len() as u64;
        let had_input = !batch.is_empty();
        let wall = self.live.then(crate::checkpoint::wall_ms);
        let mut batch = batch;
        let into = buffers::take(batch.len());
        let admitted = self.admission.admit_into(&mut batch, into, wall);
        buffers::give(batch);
        let samples = self.account(admitted);
        let clock_ms = self.admission.clock_ms();
        for s in self.state.metrics.coverage.observe(&samples, clock_ms) {
            tracing::warn!(
                signal = s.name,
                fields = %s.field_names(),
                "no sample in a quarter hour of telemetry carried {}: {}; add it to the exporter's counters list (docs/inputs/scrape.md)",
                s.field_names(),
                s.without
            );
        }
        // An empty batch (an idle source's new horizon) is not input.
        if had_input {
            self.state
                .metrics
                .batch_taken(wall.unwrap_or_else(crate::checkpoint::wall_ms), clock_ms);
        }
        // Partitioned input is the source's horizon, not the gate's clock.
        self.partitioned |= horizon_ms.is_some();
        // Silence and alert timers run on the robust clock: no minority of
        // sources can move them, whatever the newest sample says.
        let horizon_ms = match (horizon_ms, clock_ms) {
            (Some(h), Some(c)) => Some(h.min(c)),
            (h, c) => h.or(c),
        };
        if !self.live && !self.partitioned {
            return self.aligned(samples, origin_ms);
        }
        let mut batch = samples;
        // Split from the back so each sample moves once.
        let mut parts = Vec::new();
        for &cut in round_cuts(&batch).iter().rev() {
            let mut part = buffers::take(batch.len() - cut);
            part.extend(batch.drain(cut..));
            parts.push(part);
        }
        parts.push(batch);
        let mut evict = std::mem::take(&mut self.evict);
        parts
            .into_iter()
            .rev()
            .map(|samples| Round {
                samples,
                origin_ms,
                horizon_ms,
                clock_ms,
                evict: std::mem::take(&mut evict),
            })
            .collect()
    }

    /// History: adds `samples` to the pending round, emitting it whenever
    /// a sample opens a later [`MAX_ROUND_SPAN_MS`] bucket.
    fn aligned(&mut self, mut samples: Vec<Sample>, origin_ms: Option<i64>) -> Vec<Round> {
        let mut rounds = Vec::new();
        for s in samples.drain(..) {
            let bucket = s.ts_ms.div_euclid(MAX_ROUND_SPAN_MS);
            if !self.pending.is_empty() && bucket > self.pending_bucket {
                // The next round is about as big: growing it from empty
                // would copy it over and over.
                let next = buffers::take(self.pending.len());
                let samples = std::mem::replace(&mut self.pending, next);
                let clock = round_clock(&samples);
                rounds.push(Round {
                    samples,
                    origin_ms,
                    horizon_ms: clock,
                    clock_ms: clock,
                    evict: std::mem::take(&mut self.evict),
                });
            }
            if self.pending.is_empty() || bucket > self.pending_bucket {
                self.pending_bucket = bucket;
            }
            self.pending.push(s);
        }
        buffers::give(samples);
        rounds
    }

    /// The pending round, now (before a checkpoint, which covers only what
    /// the shards have seen).
    pub(super) fn flush(&mut self) -> Option<Round> {
        if self.pending.is_empty() {
            return None;
        }
        let samples = std::mem::take(&mut self.pending);
        let clock_ms = round_clock(&samples);
        Some(Round {
            samples,
            origin_ms: None,
            horizon_ms: clock_ms,
            clock_ms,
            evict: std::mem::take(&mut self.evict),
        })
    }

    /// End of input: a last round, empty but for evictions, that runs
    /// silence and timers to the fleet's frontier (partitions whose input
    /// ended earlier no longer hold the clock back); what probation still
    /// held never established itself and is dead-lettered.
    pub(super) fn finish(&mut self) -> Option<Round> {
        for s in self.admission.drain_held() {
            self.drop_unconfirmed(&s, "still on probation at the end of input");
        }
        let end = self.admission.frontier_ms().max(self.admission.clock_ms());
        end?;
        Some(Round {
            samples: std::mem::take(&mut self.pending),
            origin_ms: None,
            horizon_ms: end,
            clock_ms: end,
            evict: std::mem::take(&mut self.evict),
        })
    }

    /// Counts and dead-letters what the gate refused or dropped; keeps its
    /// evictions for the next round; returns the admitted samples.
    fn account(&mut self, a: Admitted) -> Vec<Sample> {
        for (s, why) in &a.refused {
            self.dead_letter(why.reason(), &why.to_string(), s);
        }
        if let Some((s, why)) = a.refused.first() {
            tracing::debug!(refused = a.refused.len(), gpu = %s.gpu, first = %why, "samples refused");
        }
        for (s, why) in &a.unconfirmed {
            let what = match why {
                Eviction::Quiet => "went quiet",
                Eviction::Displaced => "displaced by newer GPUs at the GPU limit",
                Eviction::Quarantined => "its clock runs ahead of the fleet's",
            };
            self.drop_unconfirmed(s, what);
        }
        for (gpu, why) in a.evicted {
            if why == Eviction::Quarantined {
                tracing::warn!(gpu = %gpu, "GPU quarantined: its clock runs ahead of the fleet's; its samples are dead-lettered until it is sane");
            }
            self.evict.push(gpu);
        }
        a.samples
    }

    fn drop_unconfirmed(&mut self, s: &Sample, what: &str) {
        let error = format!("GPU seen fewer than three times, then forgotten: {what}");
        self.dead_letter("unconfirmed_gpu", &error, s);
    }

    fn dead_letter(&mut self, reason: &'static str, error: &str, s: &Sample) {
        self.refused += 1;
        self.state.metrics.rejected(reason);
        if let Some(dead) = self.dead.get() {
            dead.refused(reason, error, &s.gpu, s.ts_ms, s.topo.host.as_deref());
        }
    }
}

/// A history round's own clock: the newest event time most of its samples
/// reached (the highest once the top tenth, at least one sample, is left
/// out), so no single GPU in it can move silence or timers, and the same
/// round always gets the same clock whatever batches brought it.
fn round_clock(samples: &[Sample]) -> Option<i64> {
    let mut ts: Vec<i64> = samples.iter().map(|s| s.ts_ms).collect();
    features::admission::band(&mut ts).map(|(_, high)| high)
}

/// Where `batch` (in event-time order, roughly) is cut into rounds: a
/// round starts at a sample more than [`MAX_ROUND_SPAN_MS`] after the
/// first sample of the round before.
pub(super) fn round_cuts(batch: &[Sample]) -> Vec<usize> {
    let mut cuts = Vec::new();
    let Some(first) = batch.first() else {
        return cuts;
    };
    let mut start = first.ts_ms;
    for (i, s) in batch.iter().enumerate() {
        if s.ts_ms > start.saturating_add(MAX_ROUND_SPAN_MS) {
            cuts.push(i);
            start = s.ts_ms;
        }
    }
    cuts
}
