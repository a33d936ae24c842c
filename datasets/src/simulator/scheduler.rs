//! The workload side of the simulator: a job scheduler that fills every host
//! with multi-host data-parallel training (periodic checkpoints = short
//! utilization dips), inference with a daily load cycle, and idle gaps; plus
//! the benign operational events that must never become pages: application
//! XIDs on all GPUs of one job at once, driver reloads, host maintenance.
//!
//! Everything is planned at construction from the `Schedule` stream, so the
//! ground truth ([`SimEvent`]) is known before the first tick, and the hot
//! loop only walks per-host cursors.

use std::sync::Arc;

use features::GpuId;

use super::config::{Scenario, SimConfig};
use super::jobs::{Job, JobKind, make_job};
use super::rng::SimRng;
use super::topology::Fleet;

const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

/// A benign (or operational) event, for tests and evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct SimEvent {
    /// Event time of the first tick that shows it.
    pub ts_ms: i64,
    pub kind: SimEventKind,
}

/// The benign events the simulator plants.
#[derive(Debug, Clone, PartialEq)]
pub enum SimEventKind {
    JobStart {
        job: Arc<str>,
        kind: JobKind,
        hosts: Vec<Arc<str>>,
    },
    JobEnd {
        job: Arc<str>,
    },
    /// A synchronized checkpoint dip of every GPU of `job` until `end_ms`.
    Checkpoint {
        job: Arc<str>,
        end_ms: i64,
    },
    /// An application XID (13, 31, 43, 45) on every GPU of `job` at this
    /// tick; the job restarts from its checkpoint `restart_ms` later.
    AppXid {
        job: Arc<str>,
        xid: u32,
        restart_ms: i64,
    },
    /// The driver reloaded: volatile counters restart from 0.
    DriverReload {
        host: Arc<str>,
    },
    /// The host stops reporting until `end_ms`, then its driver reloads.
    Maintenance {
        host: Arc<str>,
        end_ms: i64,
    },
    /// A failed GPU's slot got a new GPU.
    GpuReplaced {
        host: Arc<str>,
        old: GpuId,
        new: GpuId,
    },
}

/// One stretch of a host's time: a job or idle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Segment {
    pub start_ms: i64,
    pub end_ms: i64,
    pub job: Option<u32>,
}

/// A host's planned timeline: segments cover the run contiguously.
#[derive(Debug, Clone, Default)]
pub(crate) struct HostPlan {
    pub segments: Vec<Segment>,
    /// Tick-aligned `[start, end)` windows with no telemetry.
    pub maintenance: Vec<(i64, i64)>,
    /// Tick-aligned driver reloads, sorted, unique.
    pub reloads: Vec<i64>,
}

impl HostPlan {
    /// The segment index containing `ts`, starting the search at `from`.
    pub fn segment_at(&self, ts: i64, from: usize) -> usize {
        let mut i = from;
        while i + 1 < self.segments.len() && self.segments[i].end_ms <= ts {
            i += 1;
        }
        i
    }
}

/// The whole plan.
#[derive(Debug, Clone, Default)]
pub(crate) struct Schedule {
    pub jobs: Vec<Job>,
    pub hosts: Vec<HostPlan>,
    pub events: Vec<SimEvent>,
}

/// Tick grid of a run, for snapping planned times onto sample times.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grid {
    pub start_ms: i64,
    pub end_ms: i64,
    pub interval_ms: i64,
}

impl Grid {
    pub fn of(cfg: &SimConfig) -> Grid {
        Grid {
            start_ms: cfg.start_ms,
            end_ms: cfg.end_ms(),
            interval_ms: cfg.interval_ms(),
        }
    }

    /// The first tick at or after `t` (the start for earlier times).
    pub fn snap(&self, t: i64) -> i64 {
        if t <= self.start_ms {
            return self.start_ms;
        }
        let k = (t - self.start_ms + self.interval_ms - 1) / self.interval_ms;
        self.start_ms + k * self.interval_ms
    }

    pub fn contains(&self, t: i64) -> bool {
        t >= self.start_ms && t < self.end_ms
    }
}

fn hours(h: f64) -> i64 {
    (h * HOUR_MS as f64) as i64
}

/// Plans jobs, idle gaps, checkpoints, crashes, maintenance and reloads.
pub(crate) fn plan(cfg: &SimConfig, fleet: &Fleet, rng: &mut SimRng) -> Schedule {
    let grid = Grid::of(cfg);
    let mut s = Schedule {
        hosts: vec![HostPlan::default(); fleet.hosts.len()],
        ..Schedule::default()
    };
    let mut counters = [0u32; 4];
    let mut h = 0;
    while h < fleet.hosts.len() {
        let cluster = fleet.hosts[h].cluster;
        let in_cluster = fleet.hosts[h..]
            .iter()
            .take_while(|x| x.cluster == cluster)
            .count();
        let size = [1usize, 2, 4, 8][rng.weighted(&[0.35, 0.2, 0.25, 0.2])].min(in_cluster);
        let group: Vec<usize> = (h..h + size).collect();
        let mut grng = rng.fork(h as u64);
        plan_group(cfg, grid, fleet, &group, &mut grng, &mut counters, &mut s);
        h += size;
    }
    if cfg.scenario == Scenario::DriverReloadWave {
        let wave = grid.start_ms + (grid.end_ms - grid.start_ms) * 2 / 5;
        let n = fleet.hosts.len() as i64;
        for (i, (plan, info)) in s.hosts.iter_mut().zip(&fleet.hosts).enumerate() {
            let t = grid.snap(wave + 2 * HOUR_MS * i as i64 / n.max(1));
            if grid.contains(t) {
                plan.reloads.push(t);
                s.events.push(SimEvent {
                    ts_ms: t,
                    kind: SimEventKind::DriverReload {
                        host: info.name.clone(),
                    },
                });
            }
        }
    }
    for p in &mut s.hosts {
        p.reloads.sort_unstable();
        p.reloads.dedup();
    }
    s.events.sort_by_key(|e| e.ts_ms);
    s
}

fn plan_group(
    cfg: &SimConfig,
    grid: Grid,
    fleet: &Fleet,
    group: &[usize],
    rng: &mut SimRng,
    counters: &mut [u32; 4],
    s: &mut Schedule,
) {
    let host_names: Vec<Arc<str>> = group.iter().map(|h| fleet.hosts[*h].name.clone()).collect();
    let mut t = grid.start_ms - hours(rng.range(0.0, 36.0));
    let mut busy = rng.chance(0.85);
    let mut segments = Vec::new();
    while t < grid.end_ms {
        if busy {
            let training = group.len() > 1 || rng.chance(0.3);
            let len = if training {
                rng.log_range(3.0, 48.0)
            } else {
                rng.log_range(12.0, 120.0)
            };
            let end = t + hours(len);
            let job = make_job(cfg, grid, group, training, t, end, rng, counters);
            let id = s.jobs.len() as u32;
            push_job_events(grid, &job, &host_names, &mut s.events);
            s.jobs.push(job);
            segments.push(Segment {
                start_ms: t,
                end_ms: end,
                job: Some(id),
            });
            t = end;
        } else {
            let end = t + hours(rng.log_range(0.25, 4.0));
            segments.push(Segment {
                start_ms: t,
                end_ms: end,
                job: None,
            });
            plan_idle_gap(grid, group, &host_names, t, end, rng, s);
            t = end;
        }
        busy = !busy;
    }
    if let Some(last) = segments.last_mut() {
        last.end_ms = last.end_ms.max(grid.end_ms);
    }
    for h in group {
        s.hosts[*h].segments.clone_from(&segments);
    }
}

fn push_job_events(grid: Grid, job: &Job, hosts: &[Arc<str>], events: &mut Vec<SimEvent>) {
    let start = grid.snap(job.start_ms);
    if job.start_ms >= grid.start_ms && grid.contains(start) {
        let kind = SimEventKind::JobStart {
            job: job.name.clone(),
            kind: job.kind,
            hosts: hosts.to_vec(),
        };
        events.push(SimEvent { ts_ms: start, kind });
    }
    let end = grid.snap(job.end_ms);
    if grid.contains(end) && job.end_ms > grid.start_ms {
        events.push(SimEvent {
            ts_ms: end,
            kind: SimEventKind::JobEnd {
                job: job.name.clone(),
            },
        });
    }
    for c in &job.crashes {
        let kind = SimEventKind::AppXid {
            job: job.name.clone(),
            xid: c.xid,
            restart_ms: c.restart_end_ms,
        };
        events.push(SimEvent {
            ts_ms: c.ts_ms,
            kind,
        });
    }
    if job.kind == JobKind::Training {
        let mut t = job.start_ms + job.ckpt_offset_ms;
        while t < job.end_ms.min(grid.end_ms) {
            let first = grid.snap(t);
            let end = t + job.ckpt_len_ms;
            let crashed = job
                .crashes
                .iter()
                .any(|c| t < c.restart_end_ms && end > c.ts_ms);
            if t >= grid.start_ms && first < end && grid.contains(first) && !crashed {
                let kind = SimEventKind::Checkpoint {
                    job: job.name.clone(),
                    end_ms: end,
                };
                events.push(SimEvent { ts_ms: first, kind });
            }
            t += job.ckpt_period_ms;
        }
    }
}

/// Maintenance windows and driver reloads land in idle gaps, where an
/// operator would put them.
fn plan_idle_gap(
    grid: Grid,
    group: &[usize],
    hosts: &[Arc<str>],
    start: i64,
    end: i64,
    rng: &mut SimRng,
    s: &mut Schedule,
) {
    for (h, name) in group.iter().zip(hosts) {
        let plan = &mut s.hosts[*h];
        let gap_min = (end - start) / MIN_MS;
        if gap_min >= 45 && rng.chance(0.08) {
            let dur = rng.range(20.0, (gap_min - 10).min(90) as f64);
            let m0 = start + rng.below(((gap_min as f64 - dur) * MIN_MS as f64) as u64) as i64;
            let (a, b) = (grid.snap(m0), grid.snap(m0 + (dur * MIN_MS as f64) as i64));
            if grid.contains(a) && b > a {
                plan.maintenance.push((a, b));
                s.events.push(SimEvent {
                    ts_ms: a,
                    kind: SimEventKind::Maintenance {
                        host: name.clone(),
                        end_ms: b,
                    },
                });
                if grid.contains(b) {
                    plan.reloads.push(b);
                    s.events.push(SimEvent {
                        ts_ms: b,
                        kind: SimEventKind::DriverReload { host: name.clone() },
                    });
                }
                continue;
            }
        }
        if rng.chance(0.2) {
            let t = grid.snap(start + (rng.range(2.0, 10.0) * MIN_MS as f64) as i64);
            if t < end && grid.contains(t) {
                plan.reloads.push(t);
                s.events.push(SimEvent {
                    ts_ms: t,
                    kind: SimEventKind::DriverReload { host: name.clone() },
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulator::rng::Stream;

    #[test]
    fn segments_cover_the_run_and_events_are_sorted() {
        let cfg = SimConfig {
            gpus: 256,
            hours: 48.0,
            ..SimConfig::default()
        };
        let fleet = Fleet::build(cfg.gpus, cfg.gpus_per_host, 4, 8, &mut SimRng::new(1));
        let s = plan(&cfg, &fleet, &mut SimRng::stream(1, Stream::Schedule));
        for p in &s.hosts {
            assert!(p.segments[0].start_ms <= cfg.start_ms);
            assert!(p.segments.last().is_some_and(|x| x.end_ms >= cfg.end_ms()));
            assert!(p.segments.windows(2).all(|w| w[0].end_ms == w[1].start_ms));
        }
        assert!(s.events.windows(2).all(|w| w[0].ts_ms <= w[1].ts_ms));
        let count = |f: fn(&SimEventKind) -> bool| s.events.iter().filter(|e| f(&e.kind)).count();
        assert!(count(|k| matches!(k, SimEventKind::Checkpoint { .. })) > 50);
        assert!(count(|k| matches!(k, SimEventKind::DriverReload { .. })) > 0);
        assert!(count(|k| matches!(k, SimEventKind::JobStart { .. })) > 0);
        assert!(s.jobs.iter().any(|j| j.name.starts_with("train-llm-")));
        assert!(s.jobs.iter().any(|j| j.name.starts_with("infer-")));
    }
}
