//! Admission: the gate between decoding and the shards, seeing every
//! sample in input order before state is touched. It keeps forewarn's
//! event time honest and its state bounded:
//!
//! - **Robust clock.** The fleet clock is the lower median of the newest
//!   event time each established GPU has claimed, so no minority of GPUs,
//!   hosts or partitions can move it. Silence, eviction and alert timers
//!   run on it (as a horizon), never on the newest sample.
//! - **Plausibility.** A sample outside the absolute bounds, ahead of the
//!   wall clock (live) or too far ahead of the fleet clock is rejected with
//!   its reason; a GPU that keeps running ahead is quarantined (evicted
//!   and rejected until its clock is sane). A new GPU whose first sample is
//!   far behind the fleet clock is rejected, never paged.
//! - **Probation and bounded state.** At most `max_gpus` GPUs are tracked.
//!   A new GPU is on probation until its third sample: its samples are held
//!   here, and only then released to the shards, in order. So a GPU that
//!   never establishes itself (a flood of one-sample ids, a source whose
//!   clock runs away) never touches feature state, the shared models or the
//!   alert stage, cannot page, and leaves the alerts of the real fleet
//!   exactly as they would be without it. A GPU on probation is the first
//!   to go when room is needed or when it goes quiet; its held samples are
//!   handed back as unconfirmed (dead letters). An established GPU is
//!   forgotten after the TTL or when quarantined, and that eviction is
//!   reported so the shards and the alert stage drop it from every map at
//!   once.

use std::collections::{HashMap, VecDeque};

use crate::hash::FxBuild;
use crate::{GpuId, Sample};

/// Latest plausible event time: 2200-01-01 (epoch ms). Beyond it a
/// timestamp is a unit error or garbage, and adding durations to it is
/// where overflow would start.
pub const MAX_PLAUSIBLE_TS_MS: i64 = 7_258_118_400_000;

/// Limits and tolerances of the gate.
#[derive(Debug, Clone)]
pub struct AdmissionConfig {
    /// GPUs tracked at once; a new GPU beyond it first evicts the oldest
    /// GPU still on probation, else is rejected.
    pub max_gpus: usize,
    /// A sample further ahead of the fleet clock (or, live, of the wall
    /// clock) is rejected; a first sample further behind it too.
    pub max_skew_ms: i64,
    /// A GPU on probation this long quiet (fleet clock) is forgotten.
    pub silence_ms: i64,
    /// An established GPU this long quiet is forgotten.
    pub gpu_ttl_ms: i64,
    /// Samples after which a GPU is established.
    pub established_after: u32,
    /// Consecutive ahead-of-fleet samples after which a GPU is quarantined.
    pub quarantine_after: u32,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            max_gpus: 200_000,
            max_skew_ms: 600_000,
            silence_ms: 120_000,
            gpu_ttl_ms: 7 * 86_400_000,
            established_after: ESTABLISHED_AFTER,
            quarantine_after: 3,
        }
    }
}

/// Samples after which a GPU counts as established (see the module doc).
pub const ESTABLISHED_AFTER: u32 = 3;

/// Why a sample was refused (the dead-letter reason is [`Refusal::reason`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("timestamp {ts_ms} ms is outside 1970..2200")]
    Implausible { ts_ms: i64 },
    #[error("timestamp is {ahead_ms} ms ahead of the wall clock")]
    AheadOfWallClock { ahead_ms: i64 },
    #[error("timestamp is {ahead_ms} ms ahead of the fleet's event time")]
    AheadOfFleet { ahead_ms: i64 },
    #[error("a new GPU's first sample is {behind_ms} ms behind the fleet's event time")]
    StaleFirstSample { behind_ms: i64 },
    #[error("{max} GPUs are tracked already and none is on probation")]
    GpuLimit { max: usize },
}

impl Refusal {
    /// Reason label for counters and dead letters.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Implausible { .. } => "implausible_timestamp",
            Refusal::AheadOfWallClock { .. } => "ahead_of_wall_clock",
            Refusal::AheadOfFleet { .. } => "ahead_of_fleet",
            Refusal::StaleFirstSample { .. } => "stale_first_sample",
            Refusal::GpuLimit { .. } => "gpu_limit",
        }
    }
}

/// Why a GPU was forgotten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Quiet past the TTL (established) or past the silence (probation).
    Quiet,
    /// Pushed out of a full table while on probation.
    Displaced,
    /// Its clock ran ahead of the fleet's.
    Quarantined,
}

/// What the gate has done so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionCounters {
    pub refused: u64,
    pub evicted_quiet: u64,
    pub displaced: u64,
    pub quarantined: u64,
}

#[derive(Debug, Clone)]
struct Gpu {
    /// Newest admitted event time.
    last_ms: i64,
    /// Event time of its latest sample, admitted or not.
    claim_ms: i64,
    samples: u32,
    ahead_streak: u32,
    /// Value of the arrival counter at its latest sample.
    seen_seq: u64,
    /// Samples held while on probation (released when established).
    held: Vec<Sample>,
}

/// The gate's state: one per pipeline, fed in input order.
#[derive(Debug)]
pub struct Admission {
    cfg: AdmissionConfig,
    gpus: HashMap<GpuId, Gpu, FxBuild>,
    /// GPUs admitted while on probation, oldest first (lazily cleaned:
    /// entries that were established or evicted since are skipped).
    probation: VecDeque<GpuId>,
    clock_ms: Option<i64>,
    /// The band of the fleet's claims a sample is judged against: low and
    /// high quantiles, each ignoring at least the most extreme GPU (and a
    /// tenth of the fleet), so a partition that runs ahead or lags
    /// legitimately stays inside it while one lying source does not.
    band: Option<(i64, i64)>,
    /// Samples of established GPUs so far (arrival order, not time).
    seq: u64,
    /// Established GPUs tracked.
    established: usize,
    next_ttl_scan_ms: i64,
    counters: AdmissionCounters,
    claims: Vec<i64>,
}

/// One batch through the gate.
#[derive(Debug, Default)]
pub struct Admitted {
    /// Samples to process, in input order.
    pub samples: Vec<Sample>,
    /// Refused samples with why.
    pub refused: Vec<(Sample, Refusal)>,
    /// Established GPUs to drop from every map before the samples are
    /// processed.
    pub evicted: Vec<(GpuId, Eviction)>,
    /// Held samples of GPUs forgotten while on probation, with why.
    pub unconfirmed: Vec<(Sample, Eviction)>,
}

impl Admission {
    pub fn new(cfg: AdmissionConfig) -> Self {
        Admission {
            cfg,
            gpus: HashMap::default(),
            probation: VecDeque::new(),
            clock_ms: None,
            band: None,
            seq: 0,
            established: 0,
            next_ttl_scan_ms: i64::MIN,
            counters: AdmissionCounters::default(),
            claims: Vec::new(),
        }
    }

    /// Takes back GPUs restored from a checkpoint as established, at their
    /// newest event time, and sets the clock from them.
    pub fn restore(&mut self, gpus: impl IntoIterator<Item = (GpuId, i64)>) {
        for (gpu, last_ms) in gpus {
            // A GPU already established here (taken back) counts once.
            if self
                .gpus
                .get(&gpu)
                .is_none_or(|g| g.samples < self.cfg.established_after)
            {
                self.established += 1;
            }
            self.gpus.insert(
                gpu,
                Gpu {
                    last_ms,
                    claim_ms: last_ms,
                    samples: self.cfg.established_after,
                    ahead_streak: 0,
                    seen_seq: 0,
                    held: Vec::new(),
                },
            );
        }
        self.reset_clock();
    }

    /// Forgets `gpus` without reporting an eviction: their state moved to
    /// another owner (a Kafka partition handed over). Samples held while on
    /// probation are dropped: the new owner reads them again. Returns how
    /// many GPUs were tracked.
    pub fn release(&mut self, gpus: &[GpuId]) -> usize {
        let mut n = 0;
        for gpu in gpus {
            if let Some(g) = self.gpus.remove(gpu) {
                n += 1;
                if g.samples >= self.cfg.established_after {
                    self.established -= 1;
                }
            }
        }
        n
    }

    /// Changes the most GPUs tracked at once (those above it stay until
    /// they are evicted).
    pub fn set_max_gpus(&mut self, max: usize) {
        self.cfg.max_gpus = max.max(1);
    }

    /// The fleet's robust event time (`None` before any sample).
    pub fn clock_ms(&self) -> Option<i64> {
        self.clock_ms
    }

    /// The newest event time most of the fleet has reached: the high end
    /// of the band, which no single GPU (nor a tenth of the fleet) can
    /// move. At the end of input it is where the clock may run to, since
    /// GPUs whose input ended earlier no longer hold it back.
    pub fn frontier_ms(&self) -> Option<i64> {
        self.band.map(|(_, high)| high)
    }

    /// GPUs tracked now.
    pub fn gpu_count(&self) -> usize {
        self.gpus.len()
    }

    pub fn counters(&self) -> AdmissionCounters {
        self.counters
    }

    /// Passes one batch through the gate. `wall_ms` is the wall clock when
    /// the input is live (then nothing may be ahead of it by more than the
    /// skew); `None` for files and replays.
    pub fn admit(&mut self, batch: Vec<Sample>, wall_ms: Option<i64>) -> Admitted {
        let mut batch = batch;
        let into = Vec::with_capacity(batch.len());
        self.admit_into(&mut batch, into, wall_ms)
    }

    /// As [`Admission::admit`], with the buffer the admitted samples go to
    /// (`into`, emptied first) given by the caller and `batch` left empty
    /// with its capacity: a caller that recycles buffers allocates none.
    pub fn admit_into(
        &mut self,
        batch: &mut Vec<Sample>,
        mut into: Vec<Sample>,
        wall_ms: Option<i64>,
    ) -> Admitted {
        into.clear();
        into.reserve(batch.len());
        let mut out = Admitted {
            samples: into,
            ..Admitted::default()
        };
        // Samples move once, into `out`: the implausible ones are taken
        // out in place, and the clock reads each chunk where it lies.
        for s in batch.extract_if(.., |s| self.plausible(s.ts_ms, wall_ms).is_err()) {
            if let Err(r) = self.plausible(s.ts_ms, wall_ms) {
                out.refused.push((s, r));
            }
        }
        // The clock moves chunk by chunk, a chunk being about one round of
        // the fleet (every GPU once), so a batch that spans hours of
        // history is judged hour by hour, at O(1) amortized per sample.
        let mut rest = batch.drain(..);
        while rest.len() > 0 {
            let n = self.gpus.len().max(MIN_CHUNK).min(rest.len());
            self.advance_clock(&rest.as_slice()[..n]);
            let band = self.band.unwrap_or((i64::MIN, i64::MIN));
            for s in rest.by_ref().take(n) {
                self.admit_one(s, band, &mut out);
            }
        }
        let clock = self.clock_ms.unwrap_or(i64::MIN);
        self.housekeeping(clock, &mut out);
        self.counters.refused += out.refused.len() as u64;
        out
    }

    fn plausible(&self, ts_ms: i64, wall_ms: Option<i64>) -> Result<(), Refusal> {
        if !(0..=MAX_PLAUSIBLE_TS_MS).contains(&ts_ms) {
            return Err(Refusal::Implausible { ts_ms });
        }
        if let Some(wall) = wall_ms
            && ts_ms > wall.saturating_add(self.cfg.max_skew_ms)
        {
            return Err(Refusal::AheadOfWallClock {
                ahead_ms: ts_ms - wall,
            });
        }
        Ok(())
    }

    /// Admits, holds or refuses one sample (into `out.refused`, with why).
    fn admit_one(&mut self, s: Sample, (low, high): (i64, i64), out: &mut Admitted) {
        let skew = self.cfg.max_skew_ms;
        let ahead = s.ts_ms.saturating_sub(high);
        if ahead > skew {
            let quarantine = self.gpus.get_mut(&s.gpu).is_some_and(|g| {
                g.ahead_streak += 1;
                g.ahead_streak >= self.cfg.quarantine_after
            });
            if quarantine {
                self.forget(&s.gpu, Eviction::Quarantined, out);
            }
            out.refused
                .push((s, Refusal::AheadOfFleet { ahead_ms: ahead }));
            return;
        }
        let established = self.cfg.established_after;
        if let Some(g) = self.gpus.get_mut(&s.gpu) {
            g.ahead_streak = 0;
            g.samples = g.samples.saturating_add(1);
            g.last_ms = g.last_ms.max(s.ts_ms);
            if g.samples < established {
                g.held.push(s);
            } else {
                if g.samples == established {
                    self.established += 1;
                    self.seq += 1;
                    g.seen_seq = self.seq;
                }
                out.samples.append(&mut g.held);
                g.held = Vec::new();
                out.samples.push(s);
            }
            return;
        }
        let behind = low.saturating_sub(s.ts_ms);
        if low != i64::MIN && behind > skew {
            out.refused
                .push((s, Refusal::StaleFirstSample { behind_ms: behind }));
            return;
        }
        if self.gpus.len() >= self.cfg.max_gpus && !self.displace(out) {
            let max = self.cfg.max_gpus;
            out.refused.push((s, Refusal::GpuLimit { max }));
            return;
        }
        let id = s.gpu.clone();
        let mut g = Gpu {
            last_ms: s.ts_ms,
            claim_ms: s.ts_ms,
            samples: 1,
            ahead_streak: 0,
            seen_seq: self.seq,
            held: Vec::new(),
        };
        if established > 1 {
            g.held.push(s);
            self.probation.push_back(id.clone());
        } else {
            self.established += 1;
            out.samples.push(s);
        }
        self.gpus.insert(id, g);
    }

    /// Forgets `gpu`: an established GPU is reported as evicted (the shards
    /// hold its state), a GPU on probation hands back its held samples.
    fn forget(&mut self, gpu: &GpuId, why: Eviction, out: &mut Admitted) {
        let Some(g) = self.gpus.remove(gpu) else {
            return;
        };
        match why {
            Eviction::Quiet => self.counters.evicted_quiet += 1,
            Eviction::Displaced => self.counters.displaced += 1,
            Eviction::Quarantined => self.counters.quarantined += 1,
        }
        if g.samples >= self.cfg.established_after {
            self.established -= 1;
            out.evicted.push((gpu.clone(), why));
        } else {
            out.unconfirmed.extend(g.held.into_iter().map(|s| (s, why)));
        }
    }

    /// Evicts the oldest GPU still on probation; false if there is none.
    fn displace(&mut self, out: &mut Admitted) -> bool {
        while let Some(id) = self.probation.pop_front() {
            if self.on_probation(&id) {
                self.forget(&id, Eviction::Displaced, out);
                return true;
            }
        }
        false
    }

    fn on_probation(&self, id: &GpuId) -> bool {
        self.gpus
            .get(id)
            .is_some_and(|g| g.samples < self.cfg.established_after)
    }

    /// Forgets GPUs on probation that went quiet or whose clock runs ahead,
    /// and (once an hour of fleet time) established GPUs quiet for longer
    /// than the TTL.
    fn housekeeping(&mut self, clock: i64, out: &mut Admitted) {
        if clock == i64::MIN {
            return;
        }
        let quiet_before = clock.saturating_sub(self.cfg.silence_ms);
        let high = self.band.map_or(clock, |(_, h)| h);
        while let Some(id) = self.probation.front().cloned() {
            let Some(g) = self.gpus.get(&id) else {
                self.probation.pop_front();
                continue;
            };
            if g.samples >= self.cfg.established_after {
                self.probation.pop_front();
            } else if g.last_ms.saturating_sub(high) > self.cfg.max_skew_ms {
                // Admitted before the fleet's clock was known (a broken
                // clock first in the stream).
                self.probation.pop_front();
                self.forget(&id, Eviction::Quarantined, out);
            } else if g.last_ms < quiet_before {
                self.probation.pop_front();
                self.forget(&id, Eviction::Quiet, out);
            } else {
                break;
            }
        }
        if clock >= self.next_ttl_scan_ms {
            self.next_ttl_scan_ms = clock.saturating_add(TTL_SCAN_EVERY_MS);
            let dead_before = clock.saturating_sub(self.cfg.gpu_ttl_ms);
            let mut gone: Vec<GpuId> = self
                .gpus
                .iter()
                .filter(|(_, g)| g.last_ms < dead_before)
                .map(|(id, _)| id.clone())
                .collect();
            // Map order is not stable across processes; evictions must be.
            gone.sort();
            for id in gone {
                self.forget(&id, Eviction::Quiet, out);
            }
        }
    }

    /// Hands back every held sample (end of input): GPUs still on
    /// probation never established themselves.
    pub fn drain_held(&mut self) -> Vec<Sample> {
        let mut held: Vec<Sample> = self
            .gpus
            .values_mut()
            .flat_map(|g| std::mem::take(&mut g.held))
            .collect();
        held.sort_by(|a, b| (a.ts_ms, &a.gpu).cmp(&(b.ts_ms, &b.gpu)));
        held
    }
}

/// Samples between clock updates while few GPUs are tracked.
const MIN_CHUNK: usize = 64;

/// How often (fleet time) established GPUs are checked against the TTL.
const TTL_SCAN_EVERY_MS: i64 = 3_600_000;

mod clock;
#[cfg(test)]
mod tests;

pub use clock::band;
