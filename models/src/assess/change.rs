//! Change detection on the degradation signals (issue #29): per GPU,
//! sequential tests of "this GPU has departed from its own baseline",
//! beside the level rules of [`super::rules`] in the shard's assessment.
//!
//! Each signal is read in five-minute buckets (so that neighbouring
//! samples, which share a thermal time constant or a burst, count once):
//! - counters (correctable ECC, NVLink CRC / replay / recovery, PCIe
//!   replays), counted in samples with errors, not in errors: a burst in
//!   one sample (a link retrain's replays, a weak cell read again and
//!   again) is one event. Healthy parts log errors in bursts, and counted
//!   one by one a single burst of 8 on a quiet GPU read as a jump
//!   (`simulate --background-burst 8`, nine full random-precursor seeds:
//!   44 false pages and 620 false warnings; counted in samples, 2 and 27).
//!   Below one error a sample the two counts are the same. A Poisson
//!   CUSUM of the bucket's count against `λ0 · t`, where `λ0` is the GPU's own long-run rate, shrunk towards its SKU's
//!   background in the shard while the GPU's history is short, and `t`
//!   the bucket's hours, for the link counters weighed by their workload
//!   phase ([`exposure`]: link errors come with traffic); three tests at
//!   once, of the alternatives `2 · λ0` (slow ramps), `4 · λ0` (steps) and
//!   `16 · λ0` (a quiet GPU's jump, whose first handful of errors is
//!   already clear; judged against `λ0`'s upper bound, two standard
//!   errors of the counts it was learned from above it), the statistic
//!   the largest less ln 3 (each test at a third of the false-alarm rate);
//! - the temperature ([`fit`]): the bucket's mean less what the GPU's own
//!   fit of temperature on power predicts, less the median of the same
//!   over its host's other GPUs (the air they share): a Gaussian CUSUM
//!   for a 2σ shift, standardised by its own mean and spread in the same
//!   workload phase (floored at half a degree, the readings' resolution),
//!   corrected for the buckets' lag-1 correlation; buckets that span a
//!   change of phase are not judged;
//! - the feature stage's temperature residual (`gpu_temp_resid`, against
//!   one model per SKU and phase) against the GPU's peers ([`peers`]):
//!   less the common part of its host's GPUs in its job (without a label,
//!   those that entered the phase with it) and phase, which takes out
//!   the room's and the workload's swings that the expectation misses, so
//!   its spread is small and its baseline is judged after half an hour of
//!   a phase (a cooling fault 1.2 h into a GPU's first training phase was
//!   learned as usual by the own test, whose warm-up is 4 h).
//!
//! Each bucket adds its log-likelihood ratio, clipped so that one burst
//! cannot decide alone; the statistic is floored at 0. The thresholds come
//! from the alert budgets, not from a fit: a CUSUM of log-likelihood ratios
//! raises a false alarm no more than once in `e^h` buckets on average
//! (Lorden), so `h = ln(buckets per day · 1,000 / (budget per 1,000
//! GPU-days / signals))`, one `h` for warnings and a higher one for pages.
//! The statistic maps to a risk: its kind's warning `fire_at` in the
//! shipped policy (0.6 for `hbm_ecc_trend`, 0.5 for the others) at the
//! warning threshold, 0.85 (where `hbm_ecc_trend` pages) at the page
//! threshold.
//!
//! Baselines learn with a half-life of three days for the temperature (a
//! day absorbed precursors that grow over 10–20 h) and 7.5 days for the
//! counters (healthy backgrounds hold for weeks; at three days a rate
//! growing over two days was partly learnt on the way), and only at a
//! tenth of that pace while the statistic stands above a quarter of the
//! warning threshold, so a slow precursor is not absorbed as the new
//! normal; the temperature's baselines then also weigh a new bucket at a
//! tenth (not the counters': see [`bucket::close_bucket`]).
//!
//! Three guards keep a precursor from hiding in its own baseline:
//! - the counters' test compares with the baseline as of 2–4 h ago (two
//!   snapshots, 2 h apart), so a precursor's first rise is not yet usual;
//!   its dispersion too (a quiet GPU's first bucket of a jump is a squared
//!   deviation in the hundreds, and learned at once it divided the next
//!   buckets' evidence tenfold);
//! - the dispersion D is the ratio of squared deviations to expected
//!   counts with a prior of D = 1 worth a few expected counts: at rates of
//!   one error a day, a single error is a Pearson residual in the
//!   hundreds, and a running mean of residuals had taught D ≈ 6 from a
//!   precursor's first errors and divided its evidence by that; for the
//!   link counters, to the larger of the expected and the observed counts,
//!   so that a baseline that runs low (the lag, the learned traffic
//!   weights) does not read as bursts;
//! - a GPU that joins a running fleet (a replacement) is a newcomer: its
//!   counters are judged from the first bucket against the median rate of
//!   its SKU's GPUs in the shard (worth 12 h of its own), with no warm-up
//!   of its own. The median, not the mean: healthy backgrounds are
//!   heavy-tailed and a degrading GPU's hundreds an hour lift the mean.
//!   Until it has 12 h of its own history its counts are read as Poisson:
//!   a dispersion learned from its first buckets, a precursor's perhaps,
//!   would divide that precursor's evidence;
//! - every GPU's ECC and PCIe counters, while still in their own warm-up
//!   (a fleet's first hours, when forewarn starts on GPUs some of which
//!   are already degrading), are judged the same way once the SKU has
//!   three GPUs with an hour of data, but against the SKU's **upper
//!   decile** of GPU rates and its median dispersion: healthy backgrounds
//!   span 100×, and against the median the top of that spread reads as a
//!   jump. What the GPU learns is untouched (its own rate and dispersion,
//!   as without the test), and the test starts afresh when the warm-up
//!   ends. Without it a precursor under way at the first sample was
//!   learnt as usual (a PCIe step to 7.9/h from 1.4 h into the run, 32 h
//!   before its failure, flagged 8.9 h ahead instead of 12.9).
//!
//! Not done, on purpose: a test against the SKU's mean background beyond
//! the warm-up. Healthy GPUs' own backgrounds are heavy-tailed — 16–20 ×
//! the SKU's mean on the simulator's quiet fleets — so such a test raised
//! 34–41 false warnings per 1,000 GPU-days against a budget of 10.

use std::sync::Arc;

use features::hash::FxBuild;
use features::{Col, FeatureRow, GpuId};
use serde::{Deserialize, Serialize};

use super::{Evidence, KINDS, Kind};

/// Bucket length, event time.
pub const BUCKET_MS: i64 = 300_000;
const BUCKETS_PER_DAY: f64 = 86_400_000.0 / BUCKET_MS as f64;
/// GPU-hours a SKU's background rate remembers.
const BACKGROUND_CAP_H: f64 = 10_000.0;

/// Where `Thermal` is in [`Signal::ALL`].
const THERMAL: usize = 3;

/// A bucket whose rows are not all of one workload phase.
const MIXED: u8 = u8::MAX;

/// Counts and hours per counter signal of one SKU's GPUs.
type SkuBackground = [(f64, f64); 3];

/// Per-GPU change state and the shard's background rates per SKU.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct ChangeDetector {
    /// The settings are the running build's, never a snapshot's: a
    /// checkpoint written by an older build carried its own (a clip of 4
    /// where this build has 6, say), and a service restored from it kept
    /// testing with them until its state was dropped.
    #[serde(skip)]
    config: ChangeConfig,
    /// Per GPU, one per [`Signal::ALL`] (a snapshot of an older build,
    /// with fewer signals, gains the new ones empty).
    gpus: std::collections::HashMap<GpuId, Vec<Stat>, FxBuild>,
    /// Per SKU (a handful: searched in order) and counter signal: counts
    /// and hours of every GPU.
    background: Vec<(Option<Arc<str>>, SkuBackground)>,
    /// Event time of the earliest row: GPUs first seen a warm-up later
    /// are newcomers.
    #[serde(default)]
    first_ms: Option<i64>,
    /// Each GPU's SKU, as an index into `background`.
    #[serde(default)]
    sku_of: std::collections::HashMap<GpuId, u8, FxBuild>,
    /// Per SKU (as `background`) and counter signal, the median of its
    /// GPUs' own rates, refreshed every hour of event time: the baseline a
    /// GPU without history of its own is held to. The mean would do worse
    /// twice over: healthy backgrounds are heavy-tailed and a degrading
    /// GPU's hundreds of errors an hour raise it for everyone.
    #[serde(default)]
    median: Vec<[Option<f64>; 3]>,
    /// Likewise the upper decile of its GPUs' rates (the most a healthy
    /// GPU of the SKU plausibly shows) and the median of their dispersions
    /// (how bursty its healthy counts come): what a GPU still in its own
    /// warm-up is held to.
    #[serde(default)]
    upper: Vec<[Option<(f64, f64)>; 3]>,
    #[serde(default)]
    median_at_ms: i64,
    /// The thermal peer signal's (host, job, phase) groups.
    #[serde(default)]
    groups: peers::HostGroups,
    /// Per SKU (as `background`), the counters' weight of an hour of each
    /// workload phase ([`exposure`]).
    #[serde(default)]
    exposure: Vec<exposure::Exposure>,
    /// Per host, its GPUs' temperature misses of their own fits: the
    /// air the `Thermal` signal takes out ([`fit`]).
    #[serde(default)]
    air: peers::HostGroups,
}

impl ChangeDetector {
    pub fn new(config: ChangeConfig) -> Self {
        ChangeDetector {
            config,
            ..ChangeDetector::default()
        }
    }

    pub fn evict(&mut self, gpu: &str) {
        self.gpus.remove(gpu);
        self.sku_of.remove(gpu);
    }

    /// Recomputes every SKU's median GPU rates (GPUs with an hour of
    /// history at least).
    fn refresh_medians(&mut self) {
        let mut rates: Vec<[Vec<f64>; 3]> = vec![Default::default(); self.background.len()];
        let mut disps = rates.clone();
        for (gpu, stats) in &self.gpus {
            let Some(&k) = self.sku_of.get(gpu) else {
                continue;
            };
            let Some(r) = rates.get_mut(usize::from(k)) else {
                continue;
            };
            let Some(ds) = disps.get_mut(usize::from(k)) else {
                continue;
            };
            for (i, (v, dv)) in r.iter_mut().zip(ds.iter_mut()).enumerate() {
                let st = &stats[i];
                if st.base_h >= 1.0 {
                    v.push(st.base_a / st.base_h);
                    dv.push(st.disp.max(1.0));
                }
            }
        }
        let quantile = |r: &[Vec<f64>; 3], q: usize| -> [Option<f64>; 3] {
            std::array::from_fn(|i| {
                let v = &r[i];
                (v.len() >= 3).then(|| v[(v.len() * q / 10).min(v.len() - 1)])
            })
        };
        for v in rates.iter_mut().chain(disps.iter_mut()).flatten() {
            v.sort_by(f64::total_cmp);
        }
        self.median = rates.iter().map(|r| quantile(r, 5)).collect();
        self.upper = rates
            .iter()
            .zip(&disps)
            .map(|(r, d)| {
                let (u, dm) = (quantile(r, 9), quantile(d, 5));
                std::array::from_fn(|i| u[i].zip(dm[i]))
            })
            .collect();
    }

    pub fn heap_bytes(&self) -> usize {
        self.gpus.len() * (std::mem::size_of::<Stat>() * Signal::ALL.len() + 48 + 40)
            + self.gpus.len() * std::mem::size_of::<fit::ThermalFit>()
            + self.groups.heap_bytes()
            + self.air.heap_bytes()
    }

    /// Feeds one row; when a bucket closes, updates the tests and, past
    /// warm-up, raises the components of signals that departed. Returns,
    /// per kind, the risk of its tests that stand past their warning
    /// threshold (0: none): a sequential test's crossing is evidence held
    /// over time already, which the alert stage need not wait out again
    /// ([`super::Assessment::confirmed`]).
    pub fn assess(
        &mut self,
        row: &FeatureRow,
        warm: bool,
        components: &mut [f32; KINDS],
        reasons: &mut Vec<(Kind, Evidence)>,
    ) -> [f32; KINDS] {
        let mut crossed = [0.0f32; KINDS];
        let cfg = self.config;
        let warn_at = cfg.threshold(cfg.warn_budget);
        let bucket = row.ts_ms.div_euclid(BUCKET_MS);
        let interval_h = {
            let s = f64::from(row.get(Col::IntervalS));
            if s.is_finite() && s > 0.0 && s < 600.0 {
                s / 3600.0
            } else {
                0.0
            }
        };
        let sku = &row.topo.model;
        let at = match self.background.iter().position(|(m, _)| m == sku) {
            Some(i) => i,
            None => {
                self.background.push((sku.clone(), [(0.0, 0.0); 3]));
                self.background.len() - 1
            }
        };
        let first = *self
            .first_ms
            .insert(self.first_ms.map_or(row.ts_ms, |f| f.min(row.ts_ms)));
        if row.ts_ms - self.median_at_ms >= 3_600_000 {
            self.median_at_ms = row.ts_ms;
            self.refresh_medians();
            self.groups.prune(bucket - 2, row.ts_ms);
            self.air.prune(bucket - 2, row.ts_ms);
        }
        let median = self.median.get(at).copied().unwrap_or([None; 3]);
        let upper = self.upper.get(at).copied().unwrap_or([None; 3]);
        if !self.sku_of.contains_key(&row.gpu) {
            self.sku_of
                .insert(row.gpu.clone(), u8::try_from(at).unwrap_or(u8::MAX));
        }
        if self.exposure.len() <= at {
            self.exposure.resize_with(at + 1, Default::default);
        }
        let expo = &mut self.exposure[at];
        // The row's workload phase (None: unknown), read once for the
        // gauges' buckets and the counters' weights.
        let phase = exposure::phase_index(row.get(Col::PhaseCode));
        let quiet = cfg.quiet_below();
        let bg = &mut self.background[at].1;
        let stats = match self.gpus.get_mut(&row.gpu) {
            Some(s) => {
                if s.len() < Signal::ALL.len() {
                    s.resize_with(Signal::ALL.len(), Stat::default);
                }
                s
            }
            None => {
                // A GPU first seen once the fleet has warmed up, beside
                // SKU peers with a known background, is judged against
                // them from the start: waiting for its own warm-up would
                // let it learn a precursor already under way as usual.
                let newcomer = row.ts_ms - first >= NEWCOMER_AFTER_MS
                    && bg.iter().all(|b| b.1 >= NEWCOMER_MIN_H);
                self.gpus.entry(row.gpu.clone()).or_insert_with(|| {
                    Signal::ALL
                        .iter()
                        .map(|sig| Stat {
                            newcomer: newcomer && sig.counts(),
                            ..Stat::default()
                        })
                        .collect()
                })
            }
        };
        for (i, sig) in Signal::ALL.iter().copied().enumerate() {
            // (`Thermal` comes before `ThermalPeer`: its baselines are
            // the peer signal's usual levels, this bucket included; read
            // only when a peer bucket closes.)
            let levels = (sig == Signal::ThermalPeer && stats[i].bucket != bucket).then(|| {
                stats[THERMAL]
                    .fit
                    .as_ref()
                    .map(|f| f.levels)
                    .unwrap_or_default()
            });
            let st = &mut stats[i];
            if st.bucket != bucket {
                if let Some(levels) = levels {
                    peers::close(&cfg, st, &levels, &mut self.groups, row.ts_ms);
                } else if sig == Signal::Thermal {
                    let host = row.topo.host.as_deref();
                    fit::close(&cfg, st, &mut self.air, host, row.ts_ms);
                } else if st.n > 0 {
                    let b = if sig.counts() { Some(&mut bg[i]) } else { None };
                    let m = median.get(i).copied().flatten();
                    let sku = m.map(|median| {
                        let (upper, dispersion) =
                            upper.get(i).copied().flatten().unwrap_or((median, 1.0));
                        bucket::SkuRates {
                            median,
                            upper,
                            dispersion,
                        }
                    });
                    close_bucket(&cfg, sig, st, b, sku, row.ts_ms);
                }
                st.bucket = bucket;
                (st.sum, st.errors, st.n, st.hours) = (0.0, 0.0, 0, 0.0);
            }
            if !sig.counts() {
                // The bucket's workload phase; a bucket that spans a
                // change of phase is not judged.
                let ph = phase.map_or(MIXED, |p| p as u8);
                st.phase = if st.n == 0 || st.phase == ph {
                    ph
                } else {
                    MIXED
                };
                if sig == Signal::ThermalPeer {
                    // Its group: host and job, or the GPUs that entered
                    // the phase with it (a bucket that changes group is
                    // not judged either).
                    let key = self.groups.row_key(row, ph);
                    if st.n > 0 && st.group != key {
                        st.phase = MIXED;
                    }
                    st.group = key;
                }
            }
            // A temperature bucket closed a row ago is judged now, its
            // host's GPUs on the same scrape having closed theirs.
            match sig {
                Signal::ThermalPeer if peers::due(st) => {
                    peers::settle(&cfg, st, &self.groups, row.ts_ms);
                }
                Signal::Thermal if fit::due(st) => {
                    let host = row.topo.host.as_deref();
                    fit::settle(&cfg, st, &mut self.air, host, row.ts_ms);
                }
                _ => {}
            }
            let raw = sig.value(row);
            // A counter is judged in samples with errors, not in errors
            // (see the module header: a burst is one event).
            let v = if sig.counts() { raw.min(1.0) } else { raw };
            if sig == Signal::Thermal {
                fit::add(st, row);
            }
            if v.is_finite() {
                st.sum += v;
                if sig.counts() {
                    st.errors += raw;
                }
                st.n += 1;
                st.hours += if sig.weighed_by_phase() {
                    // Link counters: hours weighed by the traffic the
                    // phase brings (a quiet GPU's rows teach it).
                    if st.s <= quiet {
                        expo.learn(i, phase, v, interval_h);
                    }
                    interval_h * expo.weight(i, phase)
                } else {
                    interval_h
                };
            }
            if !warm || st.s <= 0.0 {
                continue;
            }
            let s_eff = (st.s - sig.extra_evidence()).max(0.0);
            let r = cfg.risk(sig, s_eff);
            if r < 0.2 {
                continue;
            }
            let k = sig.kind();
            let c = &mut components[k as usize];
            *c = c.max(r);
            if s_eff >= warn_at {
                let x = &mut crossed[k as usize];
                *x = x.max(r);
            }
            reasons.push((k, evidence(&cfg, sig, st, row.ts_ms)));
        }
        crossed
    }
}

/// GPU-hours of every counter's SKU background before a GPU that joins
/// can be judged against it.
const NEWCOMER_MIN_H: f64 = 20.0;
/// Event time a shard has seen before a GPU it meets is a newcomer: the
/// GPUs of a fleet all show up within its first minutes.
const NEWCOMER_AFTER_MS: i64 = 3_600_000;

#[path = "change_config.rs"]
mod config;
pub use config::ChangeConfig;
#[path = "change_bucket.rs"]
mod bucket;
#[path = "change_stat.rs"]
mod stat;
use stat::Stat;
#[path = "change_signal.rs"]
mod signal;
pub use signal::Signal;
#[path = "change_exposure.rs"]
mod exposure;
#[path = "change_fit.rs"]
mod fit;
#[path = "change_peers.rs"]
mod peers;
use bucket::{close_bucket, evidence};

#[cfg(test)]
#[path = "change_bucket_tests.rs"]
mod bucket_tests;
#[cfg(test)]
#[path = "change_fleet_tests.rs"]
mod fleet_tests;
#[cfg(test)]
#[path = "change_tests.rs"]
mod tests;
