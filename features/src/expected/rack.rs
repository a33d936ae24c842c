//! Rack air: how much warmer than usual a rack's GPUs run at their load, per
//! time bucket. Part of the feature stage's expected-value models, for the
//! one case the host inlet proxy ([`super::inlet`]) cannot see by design:
//! when a whole rack's air heats (a failed CRAH, a blocked aisle), every GPU
//! of every host in it heats alike, so each GPU's residual against its
//! host's other GPUs stays ~0.
//!
//! Per GPU sample, its **air shift**: the temperature minus what the GPU
//! itself usually shows in this workload phase at this power
//! ([`AirBaseline`]: its air, time constant [`AIR_TAU_MS`], plus a per-phase
//! offset at the phase's usual power, plus the SKU's slope of temperature
//! over power for the distance from that power; the slope is one online
//! regression per SKU). Each GPU is its own reference, so which GPUs of a
//! rack report, and at what mix of loads, does not move the rack's figure
//! (a rack-level mean of load-normalized temperatures did: racks holding
//! more idle GPUs read warmer). Samples mid-transient (power away from its
//! thermally smoothed value: a checkpoint's dip, a load step) are skipped.
//!
//! Per rack, a bucket's median air shift over its settled GPUs is a
//! [`RackReading`]. The alert stage, which sees every shard's readings,
//! compares each rack with its cluster's other racks (a fleet-wide ambient
//! change or the daily swing moves them all) and raises a rack-scope alert.
//! The median ignores a few GPUs that are hot for their own reasons (a
//! thermal fault is the thermal rule's case, not the rack's).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::rls::Rls;
use crate::config::FeatureConfig;
use crate::peers::median_in_place;
use crate::peers::slab::KeyedSlab;
use crate::phase::PHASE_COUNT;

/// Settled samples a rack needs in a bucket for a reading.
pub const MIN_SAMPLES: u32 = 4;
/// Time constant of a GPU's air baseline, ms (8 h): slow against a cooling
/// incident of an hour or two, which it absorbs only ~15–25 % of.
pub const AIR_TAU_MS: f64 = 8.0 * 3_600_000.0;
/// Time constant of a GPU's per-phase offsets, ms (24 h): what a phase's
/// load does to `x` beyond the SKU's slope is the GPU's own constant.
const OFFSET_TAU_MS: f64 = 24.0 * 3_600_000.0;
/// Samples in a phase before its offset is used.
const READY_SAMPLES: u8 = 20;
/// The first samples average (weight `1/n`) instead of smoothing.
const AVERAGE_SAMPLES: u8 = 120;
/// Power within this fraction (or [`STEADY_MIN_W`]) of its thermally
/// smoothed value: the die is not mid-transient (a checkpoint's dip, a
/// load step), where `x` swings by several °C for a minute or two.
const STEADY_FRACTION: f32 = 0.04;
const STEADY_MIN_W: f32 = 12.0;
/// The most leverage (≈ 1 / samples learnt at that power) the SKU's
/// regression may have at a power a phase's offset is carried to.
const MAX_LEVERAGE: f64 = 0.01;

/// A SKU's slope of temperature over power, °C/W, and the regression it
/// comes from.
#[derive(Debug, Clone, Copy)]
struct Slope<'a> {
    per_w: f64,
    fit: &'a Rls,
}

impl Slope<'_> {
    /// Whether the regression learnt enough at `power` (W) to carry an
    /// offset there.
    fn reaches(&self, power: f64) -> bool {
        self.fit.leverage(&[1.0, power / 100.0, 0.0, 0.0]) <= MAX_LEVERAGE
    }
}

/// A GPU's slow baseline of its temperature: its air (shared by its
/// phases) plus, per phase, an offset at that phase's usual power (a GPU
/// whose thermal resistance is above its SKU's reads warmer under load than
/// idle, for ever). The SKU's slope only moves the prediction along a
/// phase's own power range (tens of watts), so an imprecise or changing
/// slope barely matters, and an air shift is judged against the current
/// air, so a GPU back in a phase after hours away is not compared with that
/// phase's old air.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AirBaseline {
    air: f32,
    /// Per phase: temperature above the air at `power`, °C.
    offset: [f32; PHASE_COUNT],
    /// Per phase: the usual (smoothed) power, W.
    power: [f32; PHASE_COUNT],
    /// Samples seen per phase (saturating).
    n: [u8; PHASE_COUNT],
    /// Samples seen in all (saturating).
    total: u8,
}

impl Default for AirBaseline {
    fn default() -> Self {
        AirBaseline {
            air: 0.0,
            offset: [0.0; PHASE_COUNT],
            power: [0.0; PHASE_COUNT],
            n: [0; PHASE_COUNT],
            total: 0,
        }
    }
}

/// Smoothing weight `a` (for the sample's interval), averaging over the
/// first [`AVERAGE_SAMPLES`] (`n` counts this sample).
fn weight(a: f64, n: u8) -> f64 {
    if n <= AVERAGE_SAMPLES {
        a.max(1.0 / f64::from(n.max(1)))
    } else {
        a
    }
}

/// The air and offset smoothing weights for the last interval seen (a fleet
/// scraped at a fixed interval has one, so the `exp`s run once, not per
/// sample).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Alphas {
    dt_ms: i64,
    air: f64,
    offset: f64,
}

impl Alphas {
    fn at(&mut self, dt_ms: i64) -> Self {
        if dt_ms != self.dt_ms {
            let dt = dt_ms.max(0) as f64;
            *self = Alphas {
                dt_ms,
                air: 1.0 - (-dt / AIR_TAU_MS).exp(),
                offset: 1.0 - (-dt / OFFSET_TAU_MS).exp(),
            };
        }
        *self
    }
}

impl AirBaseline {
    /// Shift of `temp` at smoothed power `power` in phase `phase` over the
    /// baseline (NaN until the phase's offset is ready), given the SKU's
    /// slope `fit`; then learns the sample with `alphas`.
    fn shift_and_learn(
        &mut self,
        temp: f64,
        power: f64,
        fit: Slope,
        phase: usize,
        alphas: Alphas,
    ) -> f32 {
        let slope = fit.per_w;
        let p = phase.min(PHASE_COUNT - 1);
        if self.total == 0 {
            // The first phase seen defines the air: its offset is 0.
            self.air = temp as f32;
        }
        self.total = self.total.saturating_add(1);
        if self.n[p] == 0 {
            self.power[p] = power as f32;
            // A phase seen for the first time: from a phase it knows and
            // the SKU's slope when it can, so a phase entered during an
            // incident (a job starting in a hot rack) does not take the
            // incident for its offset; else from this sample. Only where
            // the SKU's regression learnt at both powers: a fleet that had
            // only trained (600–690 W; without job labels checkpoint dips
            // leave the training phase and are not learnt) read 0.092 °C/W
            // across GPUs, and every GPU of a driver reload's hosts read
            // +15 °C at its first idle: a false rack page.
            let carries = fit.reaches(power);
            let known = (0..PHASE_COUNT)
                .filter(|&q| q != p && self.n[q] > READY_SAMPLES)
                .filter(|&q| carries && fit.reaches(f64::from(self.power[q])))
                .max_by_key(|&q| self.n[q]);
            if let Some(q) = known {
                let dp = power - f64::from(self.power[q]);
                self.offset[p] = (f64::from(self.offset[q]) + slope * dp) as f32;
                // Ready, and past the averaging: it learns slowly.
                self.n[p] = AVERAGE_SAMPLES + 1;
            } else {
                self.offset[p] = (temp - f64::from(self.air)) as f32;
                self.n[p] = 1;
                return f32::NAN;
            }
        } else {
            self.n[p] = self.n[p].saturating_add(1);
        }
        let along = slope * (power - f64::from(self.power[p]));
        let air = f64::from(self.air);
        let off = f64::from(self.offset[p]);
        let shift = if self.n[p] > READY_SAMPLES {
            (temp - air - off - along) as f32
        } else {
            f32::NAN
        };
        // The air follows what this phase shows less its offset; the
        // offset and usual power learn what the air does not explain.
        let a = weight(alphas.air, self.total);
        let air = air + a * (temp - off - along - air);
        self.air = air as f32;
        let b = weight(alphas.offset, self.n[p]);
        self.offset[p] = (off + b * (temp - air - along - off)) as f32;
        let pw = f64::from(self.power[p]);
        self.power[p] = (pw + b * (power - pw)) as f32;
        shift
    }
}

/// A rack's id as a GPU caches it, with the epoch it was resolved at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RackSlot {
    /// `u32::MAX`: not resolved.
    pub id: u32,
    pub epoch: u32,
}

impl Default for RackSlot {
    fn default() -> Self {
        RackSlot {
            id: u32::MAX,
            epoch: 0,
        }
    }
}

/// What one sample offers (NaN = missing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RackInput {
    pub gpu_temp: f32,
    pub power_ewma_w: f32,
    /// Settled in its phase: the sample may feed the baseline and the rack.
    pub settled: bool,
    /// The phase's code (`Phase::code`).
    pub phase: u8,
    /// Power as reported, W (with `power_ewma_w`: is the die steady?).
    pub power_w: f32,
    /// The sample may train the SKU's regression.
    pub learn: bool,
    /// Since the GPU's previous sample, ms.
    pub dt_ms: i64,
    /// A key of the GPU's host label the same in every shard and instance
    /// ([`host_key`]), so pieces of a rack from several shards count each
    /// host once.
    pub host: u64,
}

/// The key of a host label in rack readings (FNV-1a; 0: no label).
pub fn host_key(host: Option<&str>) -> u64 {
    host.map_or(0, |h| crate::hash::fnv1a(h.as_bytes()))
}

/// One rack's median air shift over one closed bucket, as one shard saw it
/// (a rack split across shards gives one reading per shard). Serialized
/// on the fleet topic of a scaled-out group (detector's `fleet`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RackReading {
    pub rack: Arc<str>,
    pub cluster: Option<Arc<str>>,
    /// End of the bucket, ms.
    pub end_ms: i64,
    /// Median air shift of its GPUs, °C.
    pub shift_c: f32,
    /// Samples the median is over (about two per GPU per minute at a
    /// 30 s interval).
    pub samples: u32,
    pub hosts: u32,
    /// The hosts' keys ([`host_key`], sorted): pieces of one rack from
    /// several shards or partitions count a host they share once. Empty in
    /// readings from before they were kept: the pieces' largest `hosts`
    /// then stands for them all.
    #[serde(default)]
    pub host_keys: Vec<u64>,
}

/// A rack's open bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct RackAgg {
    rack: Arc<str>,
    cluster: Option<Arc<str>>,
    bucket: i64,
    shifts: Vec<f32>,
    hosts: Vec<u64>,
}

/// Per-rack buckets and one temperature-given-power regression per SKU, for
/// the GPUs one shard owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RackAir {
    racks: KeyedSlab<(Arc<str>, Option<Arc<str>>), RackAgg>,
    /// Indexed by the SKU's (stable) id in the shard's `ModelBank`.
    models: Vec<Rls>,
    bucket_ms: i64,
    #[serde(skip)]
    alphas: Alphas,
}

impl Default for RackAir {
    fn default() -> Self {
        RackAir::new(FeatureConfig::default().peer_bucket_ms)
    }
}

impl RackAir {
    /// Buckets of `bucket_ms`.
    pub fn new(bucket_ms: i64) -> Self {
        RackAir {
            racks: KeyedSlab::default(),
            models: Vec::new(),
            bucket_ms: bucket_ms.max(1),
            alphas: Alphas::default(),
        }
    }

    /// Changes when rack ids may have been reused.
    pub fn epoch(&self) -> u32 {
        self.racks.epoch()
    }

    /// The id of `rack` in `cluster`, created when new.
    pub fn resolve(&mut self, rack: &Arc<str>, cluster: &Option<Arc<str>>) -> u32 {
        self.racks
            .resolve(&(rack.clone(), cluster.clone()), || RackAgg {
                rack: rack.clone(),
                cluster: cluster.clone(),
                bucket: i64::MIN,
                shifts: Vec::new(),
                hosts: Vec::new(),
            })
    }

    /// Feeds one sample of a GPU in rack `id` whose SKU has id `sku` in the
    /// shard's `ModelBank`: returns the GPU's air shift, °C (NaN when
    /// unknown), and the reading of the bucket the sample closed, if any.
    pub fn push(
        &mut self,
        id: u32,
        air: &mut AirBaseline,
        sku: u32,
        ts_ms: i64,
        inp: &RackInput,
        cfg: &FeatureConfig,
    ) -> (f32, Option<RackReading>) {
        let b = ts_ms.div_euclid(self.bucket_ms);
        let alphas = self.alphas.at(inp.dt_ms);
        let slope = self.slope(sku, inp, cfg);
        let steady = (inp.power_w - inp.power_ewma_w).abs()
            <= (STEADY_FRACTION * inp.power_ewma_w).max(STEADY_MIN_W);
        let (t, pw) = (f64::from(inp.gpu_temp), f64::from(inp.power_ewma_w));
        let shift = match slope {
            Some(slope) if inp.settled && steady && t.is_finite() && pw.is_finite() => {
                air.shift_and_learn(t, pw, slope, usize::from(inp.phase), alphas)
            }
            _ => f32::NAN,
        };
        let bucket_ms = self.bucket_ms;
        let Some(r) = self.racks.get_mut(id) else {
            return (shift, None);
        };
        let mut closed = None;
        if b > r.bucket {
            if r.shifts.len() >= MIN_SAMPLES as usize {
                closed = Some(close(r, bucket_ms));
            }
            r.bucket = b;
            r.shifts.clear();
            r.hosts.clear();
        }
        if b == r.bucket && shift.is_finite() {
            r.shifts.push(shift);
            r.hosts.push(inp.host);
        }
        (shift, closed)
    }

    /// The SKU's slope of temperature over power (`None` until its
    /// regression is ready); trains it when `inp.learn`.
    fn slope(&mut self, sku: u32, inp: &RackInput, cfg: &FeatureConfig) -> Option<Slope<'_>> {
        let i = sku as usize;
        if sku == u32::MAX {
            return None;
        }
        if self.models.len() <= i {
            self.models.resize_with(i + 1, || Rls::new(2));
        }
        let model = &mut self.models[i];
        let p = f64::from(inp.power_ewma_w);
        let y = f64::from(inp.gpu_temp);
        if inp.learn && inp.settled && p.is_finite() && y.is_finite() {
            // No forgetting: while a fleet trains for hours at one power
            // the slope is not identifiable, and a forgetting fit wanders.
            model.update(&[1.0, p / 100.0, 0.0, 0.0], y, 1.0, cfg.rls_warmup);
        }
        let model = &*model;
        model
            .ready(cfg.rls_warmup)
            .then(|| Slope {
                per_w: model.predict(&[0.0, 1.0, 0.0, 0.0]) / 100.0,
                fit: model,
            })
            .filter(|s| s.per_w.is_finite())
    }

    /// Drops racks with no sample for `idle_buckets` buckets.
    pub fn gc(&mut self, now_ms: i64, idle_buckets: i64) -> usize {
        let b = now_ms.div_euclid(self.bucket_ms);
        self.racks.retain(|_, r| r.bucket >= b - idle_buckets)
    }

    /// Approximate heap bytes held.
    pub fn approx_heap_bytes(&self) -> usize {
        self.racks.table_heap_bytes()
            + self
                .racks
                .iter()
                .map(|(_, r)| r.shifts.capacity() * 4 + r.hosts.capacity() * 8)
                .sum::<usize>()
            + self.models.capacity() * std::mem::size_of::<Rls>()
    }
}

/// The reading of `r`'s open bucket (which has at least one shift).
fn close(r: &mut RackAgg, bucket_ms: i64) -> RackReading {
    let samples = r.shifts.len() as u32;
    let shift_c = median_in_place(&mut r.shifts);
    r.hosts.sort_unstable();
    r.hosts.dedup();
    RackReading {
        rack: r.rack.clone(),
        cluster: r.cluster.clone(),
        end_ms: (r.bucket + 1) * bucket_ms,
        shift_c,
        samples,
        hosts: r.hosts.len() as u32,
        host_keys: r.hosts.clone(),
    }
}

#[cfg(test)]
mod tests;
