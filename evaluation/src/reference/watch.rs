//! The reference's pass over a fleet's telemetry, tick by tick: the fleet
//! background rate of each counter (`Rates`, first pass, healthy GPUs
//! only), then every GPU's statistics (`Watch`, second pass): a Poisson
//! CUSUM per counter against that background, and the temperature CUSUM
//! on the GPU's temperature minus its host peers' median. A healthy GPU
//! keeps only its maxima (they set the hindsight thresholds); a watched
//! (labelled) GPU keeps its whole trace, so its first crossing of a
//! threshold known only at the end can be found.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use alerts::{AlertEvent, Labels, Scope, Severity, Status};
use features::{Field, Sample};

use super::cusum::{PoissonCusum, TempCusum, increment, load_level, median};
use super::settings::{COUNTERS, STATS, Settings, TEMP, stat_name};

const HOUR_MS: f64 = 3_600_000.0;

/// Counter readings of a sample, NaN where missing.
fn readings(s: &Sample) -> [f64; COUNTERS.len()] {
    COUNTERS.map(|(f, _)| s.metrics.get(f).unwrap_or(f64::NAN))
}

/// First pass: events per hour of each counter over the healthy GPUs.
#[derive(Debug, Default)]
pub struct Rates {
    healthy_excluded: HashSet<Arc<str>>,
    last: HashMap<Arc<str>, (i64, [f64; COUNTERS.len()])>,
    events: [f64; COUNTERS.len()],
    hours: [f64; COUNTERS.len()],
}

impl Rates {
    /// Counts every GPU except those in `labelled`.
    pub fn new(labelled: HashSet<Arc<str>>) -> Rates {
        Rates {
            healthy_excluded: labelled,
            ..Rates::default()
        }
    }

    pub fn tick(&mut self, samples: &[Sample]) {
        for s in samples {
            if self.healthy_excluded.contains(&s.gpu) {
                continue;
            }
            let now = readings(s);
            if let Some((ts, prev)) = self.last.get(&s.gpu)
                && s.ts_ms > *ts
            {
                let dt_h = (s.ts_ms - ts) as f64 / HOUR_MS;
                for c in 0..COUNTERS.len() {
                    if now[c].is_finite() && prev[c].is_finite() {
                        self.events[c] += increment(prev[c], now[c]);
                        self.hours[c] += dt_h;
                    }
                }
            }
            self.last.insert(s.gpu.clone(), (s.ts_ms, now));
        }
    }

    /// Events per GPU-hour of each counter, at least `floor`.
    pub fn per_h(&self, floor: f64) -> [f64; COUNTERS.len()] {
        std::array::from_fn(|c| {
            if self.hours[c] > 0.0 {
                (self.events[c] / self.hours[c]).max(floor)
            } else {
                floor
            }
        })
    }
}

#[derive(Debug, Clone)]
struct Gpu {
    labels: Labels,
    watched: bool,
    last_ts: Option<i64>,
    last: [f64; COUNTERS.len()],
    counters: [PoissonCusum; COUNTERS.len()],
    temp: TempCusum,
    max: [f64; STATS],
    trace: Vec<(i64, [f32; STATS])>,
    /// Each sample's counter increments (watched GPUs only).
    counts: Vec<(i64, [f32; COUNTERS.len()])>,
}

/// Second pass: every GPU's statistics.
#[derive(Debug)]
pub struct Watch {
    settings: Settings,
    lambda0: [f64; COUNTERS.len()],
    watched: HashSet<Arc<str>>,
    index: HashMap<Arc<str>, usize>,
    gpus: Vec<Gpu>,
    /// Per tick: host → (sample index, temperature).
    hosts: HashMap<Arc<str>, Vec<(usize, f64)>>,
    peers: Vec<f64>,
}

impl Watch {
    /// `lambda0`: the fleet background per counter (events / h);
    /// `watched`: the GPUs whose traces are kept (the labelled ones).
    pub fn new(
        settings: Settings,
        lambda0: [f64; COUNTERS.len()],
        watched: HashSet<Arc<str>>,
    ) -> Watch {
        Watch {
            settings,
            lambda0,
            watched,
            index: HashMap::new(),
            gpus: Vec::new(),
            hosts: HashMap::new(),
            peers: Vec::with_capacity(8),
        }
    }

    fn gpu(&mut self, s: &Sample) -> usize {
        if let Some(i) = self.index.get(&s.gpu) {
            return *i;
        }
        let mut labels = Labels::new();
        labels.insert("gpu".into(), s.gpu.to_string());
        for (k, v) in [
            ("host", &s.topo.host),
            ("rack", &s.topo.rack),
            ("cluster", &s.topo.cluster),
        ] {
            if let Some(v) = v {
                labels.insert(k.into(), v.to_string());
            }
        }
        self.gpus.push(Gpu {
            labels,
            watched: self.watched.contains(&s.gpu),
            last_ts: None,
            last: [f64::NAN; COUNTERS.len()],
            counters: [PoissonCusum::default(); COUNTERS.len()],
            temp: TempCusum::default(),
            max: [0.0; STATS],
            trace: Vec::new(),
            counts: Vec::new(),
        });
        self.index.insert(s.gpu.clone(), self.gpus.len() - 1);
        self.gpus.len() - 1
    }

    /// One tick's samples (one per reporting GPU).
    pub fn tick(&mut self, samples: &[Sample]) {
        for v in self.hosts.values_mut() {
            v.clear();
        }
        for (i, s) in samples.iter().enumerate() {
            if let (Some(h), Some(t)) = (&s.topo.host, s.metrics.get(Field::GpuTemp)) {
                self.hosts.entry(h.clone()).or_default().push((i, t));
            }
        }
        for (i, s) in samples.iter().enumerate() {
            let residual = self.residual(i, s);
            let g = self.gpu(s);
            self.step(g, s, residual);
        }
    }

    /// Temperature minus the median of the host's other GPUs at this tick.
    fn residual(&mut self, i: usize, s: &Sample) -> Option<f64> {
        let t = s.metrics.get(Field::GpuTemp)?;
        let on_host = self.hosts.get(s.topo.host.as_ref()?)?;
        self.peers.clear();
        self.peers
            .extend(on_host.iter().filter(|(j, _)| *j != i).map(|(_, t)| *t));
        median(&mut self.peers).map(|m| t - m)
    }

    fn step(&mut self, g: usize, s: &Sample, residual: Option<f64>) {
        let (rho, temp) = (self.settings.rho, self.settings.temp);
        let lambda0 = self.lambda0;
        let gpu = &mut self.gpus[g];
        let now = readings(s);
        let Some(last_ts) = gpu.last_ts.filter(|t| s.ts_ms > *t) else {
            if gpu.last_ts.is_none() {
                gpu.last_ts = Some(s.ts_ms);
                gpu.last = now;
            }
            return;
        };
        let dt_h = (s.ts_ms - last_ts) as f64 / HOUR_MS;
        let mut stats = [0.0; STATS];
        let mut counts = [0.0f32; COUNTERS.len()];
        for c in 0..COUNTERS.len() {
            let k = if now[c].is_finite() && gpu.last[c].is_finite() {
                increment(gpu.last[c], now[c])
            } else {
                0.0
            };
            counts[c] = k as f32;
            stats[c] = gpu.counters[c].step(k, dt_h, lambda0[c], rho);
        }
        stats[TEMP] = match residual {
            Some(r) => {
                let power = s.metrics.get(Field::PowerUsage).unwrap_or(0.0);
                let limit = s.metrics.get(Field::PowerLimit).unwrap_or(0.0);
                gpu.temp.step(r, load_level(power, limit), dt_h, &temp)
            }
            None => gpu.temp.s,
        };
        for (m, v) in gpu.max.iter_mut().zip(stats) {
            *m = m.max(v);
        }
        if gpu.watched {
            gpu.trace.push((s.ts_ms, stats.map(|v| v as f32)));
            gpu.counts.push((s.ts_ms, counts));
        }
        gpu.last_ts = Some(s.ts_ms);
        gpu.last = now;
    }

    /// Per statistic, the largest value any healthy (unwatched) GPU
    /// reached (the hindsight thresholds), and that GPU.
    pub fn healthy_max(&self) -> [(f64, String); STATS] {
        let mut m: [(f64, String); STATS] = std::array::from_fn(|_| (0.0, String::new()));
        for g in self.gpus.iter().filter(|g| !g.watched) {
            for (a, b) in m.iter_mut().zip(g.max) {
                if b > a.0 {
                    *a = (b, g.labels.get("gpu").cloned().unwrap_or_default());
                }
            }
        }
        m
    }

    /// A watched GPU's counter increments, sample by sample.
    pub fn counts(&self, gpu: &str) -> Option<&[(i64, [f32; COUNTERS.len()])]> {
        let g = &self.gpus[*self.index.get(gpu)?];
        g.watched.then_some(g.counts.as_slice())
    }

    /// Healthy GPUs seen.
    pub fn healthy(&self) -> usize {
        self.gpus.iter().filter(|g| !g.watched).count()
    }

    /// A warning each time a watched GPU's statistic rises above its
    /// threshold (from at or below it), by time.
    pub fn alerts(&self, thresholds: &[f64; STATS]) -> Vec<AlertEvent> {
        let mut out = Vec::new();
        for g in self.gpus.iter().filter(|g| g.watched) {
            let mut above = [false; STATS];
            for (ts, stats) in &g.trace {
                for s in 0..STATS {
                    let now = f64::from(stats[s]) > thresholds[s];
                    if now && !above[s] {
                        out.push(event(*ts, s, &g.labels, f64::from(stats[s])));
                    }
                    above[s] = now;
                }
            }
        }
        out.sort_by_key(|e| e.ts);
        out
    }
}

fn event(ts: i64, stat: usize, labels: &Labels, value: f64) -> AlertEvent {
    let gpu = labels.get("gpu").map_or("", String::as_str);
    let kind = format!("reference_{}", stat_name(stat));
    AlertEvent {
        ts,
        status: Status::Firing,
        severity: Severity::Warning,
        dedup_key: format!("reference/gpu/{gpu}/{kind}"),
        summary: format!(
            "{} CUSUM {value:.1} above every healthy GPU's",
            stat_name(stat)
        ),
        kind,
        scope: Scope::Gpu,
        labels: labels.clone(),
        risk: 0.0,
        eta_hours: None,
        reasons: Vec::new(),
    }
}
