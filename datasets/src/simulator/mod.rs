//! # The seeded fleet simulator
//!
//! Produces DCGM telemetry for a whole GPU fleet, tick by tick, with ground
//! truth: failure labels (precursor onset and failure time per GPU, rack
//! cooling incidents) and the benign events that must not page. It feeds
//! `forewarn simulate` (Parquet), the backtests and every model test.
//!
//! Layout (each file's header says more):
//! - [`config`]: [`SimConfig`], [`Scenario`], validation ([`SimError`]).
//! - `topology`: clusters → racks → hosts → GPUs (8 by default), SKUs and
//!   their figures.
//! - `scheduler`: fills hosts with jobs and idle gaps; maintenance, driver
//!   reloads; the benign [`SimEvent`]s.
//! - `jobs`: training with checkpoints, inference with a daily cycle, app
//!   XIDs and restarts: the per-tick demand on a host's GPUs.
//! - `failures`: failure modes, labels, replacements; `propensity`: the
//!   power law behind which GPUs fail; `random_precursors`: the
//!   randomised-precursor scenario's failures and background rates.
//! - `physics`: per-GPU power, thermal lag, throttling, counters, precursors.
//! - `dirty`: drops, duplicates, reorders, malformed messages.
//! - [`rng`]: xoshiro256++ streams; every random choice derives from the seed.
//!
//! Determinism: everything is planned at construction from named RNG
//! streams; the tick loop walks hosts and slots in index order and draws
//! noise from one stream, so the same config yields identical samples.

pub mod config;
mod dirty;
mod failure_label;
mod failures;
mod jobs;
mod physics;
mod propensity;
mod random_precursors;
mod replacement;
pub mod rng;
mod scheduler;
mod scrape;
mod topology;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_failures;
#[cfg(test)]
mod tests_random;
#[cfg(test)]
mod tests_scrape;

use std::sync::Arc;

use features::{GpuId, Metrics, Sample, Topology};

pub use config::{DEFAULT_START_MS, Scenario, SimConfig, SimError};
pub use failures::{FailureKind, FailureLabel};
pub use jobs::JobKind;
pub use propensity::{long_run_failure_counts, propensity_weights};
pub use random_precursors::{BACKGROUND_RANGES, NVLINK_BACKGROUND_MIX, Precursor, Shape};
pub use scheduler::{SimEvent, SimEventKind};
pub use topology::{GPUS_PER_HOST, GpuInfo, Sku, SkuSpec};

use dirty::Dirty;
use failures::Replacement;
use jobs::Demand;
use physics::{Env, GpuState};
use rng::{SimRng, Stream};
use scheduler::{Grid, Schedule};
use topology::Fleet;

const MIN_MS: i64 = 60_000;

/// A rack's inlet air: a base, a daily swing, and cooling incidents.
#[derive(Debug, Clone)]
struct RackClimate {
    base_c: f64,
    swing_c: f64,
    peak_h: f64,
    /// `(onset, end, +°C)`.
    incidents: Vec<(i64, i64, f64)>,
}

impl RackClimate {
    fn inlet(&self, ts: i64, hour_of_day: f64) -> f64 {
        let daily = (std::f64::consts::TAU * (hour_of_day - self.peak_h + 6.0) / 24.0).sin();
        let mut t = self.base_c + self.swing_c * daily;
        for (on, end, delta) in &self.incidents {
            // Ramps up over 10 min as the CRAH fails, recovers over 15 min.
            if ts >= *on && ts < *end {
                t += delta * ((ts - on) as f64 / (10 * MIN_MS) as f64).min(1.0);
            } else if ts >= *end && ts < end + 15 * MIN_MS {
                t += delta * (1.0 - (ts - end) as f64 / (15 * MIN_MS) as f64);
            }
        }
        t
    }
}

/// Per-host position in its plan.
#[derive(Debug, Clone, Copy, Default)]
struct HostCursor {
    segment: usize,
    maintenance: usize,
    reload: usize,
}

/// The simulator. Build with [`Simulator::new`], then call
/// [`Simulator::next_tick`] until it returns `None`.
#[derive(Debug)]
pub struct Simulator {
    cfg: SimConfig,
    grid: Grid,
    ticks: u64,
    tick: u64,
    fleet: Fleet,
    /// Every GPU identity: the fleet's slots first, then replacements.
    gpus: Vec<GpuInfo>,
    slots: Vec<GpuState>,
    replacements: Vec<(Replacement, usize)>,
    next_replacement: usize,
    schedule: Schedule,
    cursors: Vec<HostCursor>,
    climate: Vec<RackClimate>,
    inlet_c: Vec<f64>,
    labels: Vec<FailureLabel>,
    events: Vec<SimEvent>,
    env: Env,
    noise: SimRng,
    dirty: Option<Dirty>,
    scrapes: Option<scrape::Scrapes>,
    /// Fleet-wide inlet change (`Scenario::AmbientChange`): `(onset, +°C)`.
    ambient: Option<(i64, f64)>,
}

/// The fleet-wide ambient change of an `AmbientChange` run: at 40 % of the
/// run, `+4..7 °C` reached over two hours. Drawn from its own fork of the
/// failure stream, so it touches no other random choice.
pub fn ambient_change(cfg: &SimConfig) -> Option<(i64, f64)> {
    (cfg.scenario == Scenario::AmbientChange).then(|| {
        let mut rng = SimRng::stream(cfg.seed, Stream::Failures).fork(0xA4B1E47);
        let grid = Grid::of(cfg);
        let on = grid.snap(grid.start_ms + (grid.end_ms - grid.start_ms) * 2 / 5);
        (on, rng.range(4.0, 7.0))
    })
}

/// Extra inlet °C of an ambient change at `ts`.
fn ambient_delta(ambient: Option<(i64, f64)>, ts: i64) -> f64 {
    match ambient {
        Some((on, d)) if ts > on => d * ((ts - on) as f64 / (2 * 3_600_000) as f64).min(1.0),
        _ => 0.0,
    }
}

fn hour_of_day(ts_ms: i64) -> f64 {
    ts_ms.rem_euclid(86_400_000) as f64 / 3_600_000.0
}

impl Simulator {
    /// Validates `cfg` and plans the whole run: topology, jobs, failures.
    pub fn new(cfg: SimConfig) -> Result<Simulator, SimError> {
        cfg.validate()?;
        let seed = cfg.seed;
        let grid = Grid::of(&cfg);
        let mut topo_rng = SimRng::stream(seed, Stream::Topology);
        let fleet = Fleet::build(
            cfg.gpus,
            cfg.gpus_per_host,
            cfg.hosts_per_rack,
            cfg.racks_per_cluster,
            &mut topo_rng,
        );
        let schedule = scheduler::plan(&cfg, &fleet, &mut SimRng::stream(seed, Stream::Schedule));
        let plans = failures::plan(
            &cfg,
            &fleet,
            &schedule,
            &mut SimRng::stream(seed, Stream::Propensity),
            &mut SimRng::stream(seed, Stream::Failures),
        );

        let mut climate: Vec<RackClimate> = fleet
            .racks
            .iter()
            .map(|_| RackClimate {
                base_c: topo_rng.range(20.0, 26.0),
                swing_c: topo_rng.range(1.5, 3.0),
                peak_h: topo_rng.range(13.5, 16.5),
                incidents: Vec::new(),
            })
            .collect();
        for i in &plans.incidents {
            climate[i.rack]
                .incidents
                .push((i.onset_ms, i.end_ms, i.delta_c));
        }
        let hod = hour_of_day(cfg.start_ms);
        let inlet_c: Vec<f64> = climate.iter().map(|c| c.inlet(cfg.start_ms, hod)).collect();

        let mut gpus = fleet.gpus.clone();
        let mut slots = Vec::with_capacity(gpus.len());
        for (i, (info, failure)) in fleet.gpus.iter().zip(plans.per_slot).enumerate() {
            let mut st = GpuState::new(
                i,
                info.sku.spec(),
                info.slot,
                inlet_c[info.rack_index],
                &mut topo_rng,
            );
            if let Some(f) = &failure {
                st.silent_from_ms = f.silent_from_ms;
            }
            st.failure = failure;
            slots.push(st);
        }
        if cfg.scenario == Scenario::RandomPrecursors {
            random_precursors::draw_backgrounds(seed, &mut slots);
            if cfg.relative_precursors {
                random_precursors::make_relative(&mut slots);
            }
        }
        let mut replacements = Vec::with_capacity(plans.replacements.len());
        for r in plans.replacements {
            gpus.push(r.gpu.clone());
            replacements.push((r, gpus.len() - 1));
        }
        let mut events = schedule.events.clone();
        events.extend(plans.events);
        events.sort_by_key(|e| e.ts_ms);

        let fleet_hosts = fleet.hosts.len();
        Ok(Simulator {
            grid,
            ticks: cfg.ticks(),
            tick: 0,
            cursors: vec![HostCursor::default(); fleet.hosts.len()],
            fleet,
            gpus,
            slots,
            replacements,
            next_replacement: 0,
            schedule,
            climate,
            inlet_c,
            labels: plans.labels,
            events,
            env: Env {
                bg_burst: cfg.background_burst,
                ..Env::new(cfg.interval_s)
            },
            noise: SimRng::stream(seed, Stream::Noise),
            dirty: cfg
                .dirty
                .then(|| Dirty::new(SimRng::stream(seed, Stream::Dirty))),
            ambient: ambient_change(&cfg),
            scrapes: cfg
                .spread_scrapes
                .then(|| scrape::Scrapes::new(seed, fleet_hosts, cfg.interval_ms())),
            cfg,
        })
    }

    /// The configuration this simulator was built from.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Every GPU identity: one per slot, then replacements in order.
    pub fn gpus(&self) -> &[GpuInfo] {
        &self.gpus
    }

    /// Ground-truth failures and incidents, ordered by failure (or onset) time.
    pub fn labels(&self) -> &[FailureLabel] {
        &self.labels
    }

    /// The drawn precursor of every failing GPU that has one
    /// (`RandomPrecursors` runs), in slot order.
    pub fn precursors(&self) -> Vec<(GpuId, Precursor)> {
        self.slots
            .iter()
            .filter_map(|st| {
                let p = st.failure.as_ref()?.precursor.clone()?;
                Some((self.gpus[st.gpu].uuid.clone(), p))
            })
            .collect()
    }

    /// Every slot's GPU and its background error rates per hour (correctable
    /// ECC, PCIe replays, NVLink CRC at full traffic), in slot order.
    pub fn background_rates(&self) -> Vec<(GpuId, [f64; 3])> {
        self.slots
            .iter()
            .map(|st| {
                let uuid = self.gpus[st.gpu].uuid.clone();
                (uuid, [st.bg_sbe, st.bg_pcie, st.bg_nvlink])
            })
            .collect()
    }

    /// Benign events (jobs, checkpoints, app XIDs, reloads, maintenance,
    /// replacements), ordered by time.
    pub fn events(&self) -> &[SimEvent] {
        &self.events
    }

    /// Number of ticks in the run.
    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    /// Event time of tick `k`.
    pub fn tick_ts(&self, k: u64) -> i64 {
        self.grid.start_ms + k as i64 * self.grid.interval_ms
    }

    /// Malformed raw messages generated since the last call (dirty runs
    /// only): bytes a decoder must reject, for the writer to interleave.
    pub fn malformed(&mut self) -> Vec<Vec<u8>> {
        self.dirty
            .as_mut()
            .map(Dirty::take_malformed)
            .unwrap_or_default()
    }

    /// Appends every reporting GPU's sample for the next tick to `out` and
    /// returns the tick's event time; `None` when the run is over. Samples
    /// come in host, then slot order (dirty runs: minus drops, plus
    /// duplicates, with last tick's late samples at the end).
    pub fn next_tick(&mut self, out: &mut Vec<Sample>) -> Option<i64> {
        if self.tick >= self.ticks {
            return None;
        }
        let ts = self.tick_ts(self.tick);
        self.tick += 1;
        let last = self.tick == self.ticks;
        let hod = hour_of_day(ts);
        self.env.ts_ms = ts;
        self.swap_in_replacements(ts);
        let extra = ambient_delta(self.ambient, ts);
        for (t, c) in self.inlet_c.iter_mut().zip(&self.climate) {
            *t = c.inlet(ts, hod) + extra;
        }
        if let Some(d) = &mut self.dirty {
            d.begin_tick();
        }
        out.reserve(self.slots.len());

        let env = self.env;
        for (h, host) in self.fleet.hosts.iter().enumerate() {
            let plan = &self.schedule.hosts[h];
            let cur = &mut self.cursors[h];
            cur.segment = plan.segment_at(ts, cur.segment);
            let job = plan.segments[cur.segment]
                .job
                .map(|j| &self.schedule.jobs[j as usize]);
            let demand = match job {
                Some(j) => j.demand(ts, hod),
                None => Demand::default(),
            };
            while plan
                .maintenance
                .get(cur.maintenance)
                .is_some_and(|m| m.1 <= ts)
            {
                cur.maintenance += 1;
            }
            let in_maintenance = plan
                .maintenance
                .get(cur.maintenance)
                .is_some_and(|m| m.0 <= ts);
            let reload = plan.reloads.get(cur.reload) == Some(&ts);
            if reload {
                cur.reload += 1;
            }
            let inlet = self.inlet_c[host.rack];
            let job_name: Option<&Arc<str>> = job.map(|j| &j.name);
            let scraped = match &mut self.scrapes {
                Some(s) => s.at(h, ts),
                None => ts,
            };
            for st in &mut self.slots[host.slots.clone()] {
                if ts >= st.silent_from_ms {
                    continue;
                }
                if reload {
                    st.driver_reload();
                }
                let mut metrics = Metrics::default();
                if in_maintenance {
                    // Powered but not reporting: keep the physics going idle.
                    st.step(
                        &env,
                        &Demand::default(),
                        inlet,
                        &mut self.noise,
                        &mut metrics,
                    );
                    continue;
                }
                st.step(&env, &demand, inlet, &mut self.noise, &mut metrics);
                let info = &self.gpus[st.gpu];
                let sample = Sample {
                    ts_ms: scraped,
                    gpu: info.uuid.clone(),
                    topo: Topology {
                        host: Some(info.host.clone()),
                        rack: Some(info.rack.clone()),
                        cluster: Some(info.cluster.clone()),
                        model: Some(info.model.clone()),
                        job: job_name.filter(|_| self.cfg.job_labels).cloned(),
                    },
                    metrics,
                    extra: Vec::new(),
                };
                out.push(sample);
                if let Some(d) = &mut self.dirty {
                    d.after_push(out);
                }
            }
        }
        if let Some(d) = &mut self.dirty {
            d.end_tick(out, last);
        }
        Some(ts)
    }

    fn swap_in_replacements(&mut self, ts: i64) {
        while let Some((r, gpu)) = self.replacements.get(self.next_replacement) {
            if r.at_ms > ts {
                break;
            }
            let info = &self.gpus[*gpu];
            let rack = info.rack_index;
            let mut rng = SimRng::stream(self.cfg.seed, Stream::Topology).fork(*gpu as u64);
            let mut st = GpuState::new(
                *gpu,
                info.sku.spec(),
                info.slot,
                self.inlet_c[rack],
                &mut rng,
            );
            if let Some(f) = &r.failure {
                st.silent_from_ms = f.silent_from_ms;
                st.failure = Some(f.clone());
            }
            self.slots[r.slot] = st;
            self.next_replacement += 1;
        }
    }
}
