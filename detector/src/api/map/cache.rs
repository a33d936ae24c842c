//! The fleet map's compact view of the risk table: every GPU gets a stable
//! cell index in cluster → rack → host → GPU order (the layout), and each
//! cell's state, risk and job carry the version at which they last changed,
//! so a browser asks for "what changed since version v" and gets a few
//! arrays instead of 100,000 objects.
//!
//! The cache is refreshed from [`SharedState::gpus`] on demand, at most once
//! per [`MIN_REFRESH`], under the table's read lock only (one pass over the
//! table; the pipeline's writers wait at most that long). The layout is
//! rebuilt, and its version bumped, when the set of GPUs changes; cells are
//! compared in place otherwise.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use features::GpuId;
use serde::Serialize;

use crate::assess::HealthState;
use crate::state::GpuView;

/// Oldest a cached snapshot may be when a request comes in. Browsers poll
/// about once a second; several tabs share one pass over the table.
pub const MIN_REFRESH: Duration = Duration::from_millis(250);

/// Shortest time between two layout rebuilds. A new layout makes every
/// open page fetch it again and redraw everything (a few hundred ms at
/// 100,000 GPUs), so GPUs that appear in a trickle (a fleet coming up,
/// replacements) wait up to this long to get a cell.
pub const MIN_LAYOUT_AGE: Duration = Duration::from_secs(30);

/// Name shown for a missing topology label.
const NONE: &str = "(none)";

/// The cell code of a state, as the page's palette indexes it.
pub fn state_code(s: HealthState) -> u8 {
    match s {
        HealthState::Healthy => 0,
        HealthState::Watch => 1,
        HealthState::Degraded => 2,
        HealthState::Failing => 3,
        HealthState::Silent => 4,
    }
}

/// Risk in whole percent: the map's colour does not need more, and a
/// coarser value means fewer cells change per poll.
fn risk_pct(risk: f64) -> u8 {
    (risk.clamp(0.0, 1.0) * 100.0).round() as u8
}

/// (cluster, rack, host, GPU, model) of one cell, sorted into the layout.
type Row = (Arc<str>, Arc<str>, Arc<str>, GpuId, Arc<str>);

/// The layout: names interned once, per-GPU arrays in cell order.
#[derive(Debug, Default, Serialize)]
pub struct Layout {
    /// Changes whenever the set of GPUs changes (wall-clock ms of the
    /// rebuild, so it also changes across restarts).
    pub layout_version: u64,
    pub clusters: Vec<Arc<str>>,
    pub rack_names: Vec<Arc<str>>,
    /// Index into `clusters`.
    pub rack_cluster: Vec<u32>,
    pub host_names: Vec<Arc<str>>,
    /// Index into `rack_names`.
    pub host_rack: Vec<u32>,
    pub models: Vec<Arc<str>>,
    pub gpu_ids: Vec<GpuId>,
    /// Index into `host_names`.
    pub gpu_host: Vec<u32>,
    /// Index into `models`.
    pub gpu_model: Vec<u32>,
}

/// Cells that changed since a version, as parallel arrays.
#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Delta {
    pub layout_version: u64,
    pub version: u64,
    /// Whether this holds every cell (asked with `since=0`, or `since` was
    /// unknown).
    pub full: bool,
    pub idx: Vec<u32>,
    pub state: Vec<u8>,
    pub risk: Vec<u8>,
    /// Index into the job names; 0 is "no job".
    pub job: Vec<u32>,
    /// Index of `jobs[0]` in the page's job list.
    pub jobs_from: u32,
    /// Job names first seen after `since`.
    pub jobs: Vec<Arc<str>>,
}

/// The cache behind `/v1/map` and `/v1/map/states`.
#[derive(Debug, Default)]
pub struct MapCache {
    layout: Arc<Layout>,
    /// Serialized `layout`, built once per layout version.
    layout_json: Option<Arc<String>>,
    index: HashMap<GpuId, u32>,
    version: u64,
    code: Vec<u8>,
    risk: Vec<u8>,
    job: Vec<u32>,
    /// The job `Arc` each cell's `job` was interned from.
    job_src: Vec<Option<Arc<str>>>,
    changed_at: Vec<u64>,
    jobs: Vec<Arc<str>>,
    job_index: HashMap<Arc<str>, u32>,
    /// Version at which each job name was interned (non-decreasing).
    job_added: Vec<u64>,
    refreshed: Option<Instant>,
    rebuilt: Option<Instant>,
}

impl MapCache {
    /// Brings the cache up to date with `gpus` unless it was refreshed less
    /// than [`MIN_REFRESH`] ago; GPUs new since the layout get cells at the
    /// next rebuild, at most every [`MIN_LAYOUT_AGE`] (`force` skips both
    /// waits).
    pub fn refresh<'a, I>(&mut self, len: usize, gpus: impl Fn() -> I, force: bool)
    where
        I: Iterator<Item = (&'a GpuId, &'a GpuView)>,
    {
        if !force && self.refreshed.is_some_and(|t| t.elapsed() < MIN_REFRESH) {
            return;
        }
        self.refreshed = Some(Instant::now());
        if self.jobs.is_empty() {
            self.intern_job(None);
        }
        let due = self.layout.gpu_ids.is_empty()
            || force
            || self.rebuilt.is_none_or(|t| t.elapsed() >= MIN_LAYOUT_AGE);
        let all_placed = self.compare(gpus());
        if (!all_placed || len != self.layout.gpu_ids.len()) && due {
            self.rebuild(gpus());
            self.rebuilt = Some(Instant::now());
            self.compare(gpus());
        }
    }

    /// One pass over the table: records changed cells under a new version.
    /// Returns whether every GPU had a cell.
    fn compare<'a>(&mut self, gpus: impl Iterator<Item = (&'a GpuId, &'a GpuView)>) -> bool {
        let next = self.version + 1;
        let mut changed = false;
        let mut all_placed = true;
        for (id, v) in gpus {
            let Some(&i) = self.index.get(id.as_ref()) else {
                all_placed = false;
                continue;
            };
            let i = i as usize;
            let a = &v.latest;
            // Jobs are interned `Arc`s upstream: the same pointer is the
            // same job, so most cells skip the name lookup.
            let same_job = match (&self.job_src[i], &a.topo.job) {
                (None, None) => true,
                (Some(x), Some(y)) => Arc::ptr_eq(x, y),
                _ => false,
            };
            let j = if same_job {
                self.job[i]
            } else {
                self.job_src[i] = a.topo.job.clone();
                self.intern_job(a.topo.job.as_ref())
            };
            let (c, r) = (state_code(a.state), risk_pct(a.risk));
            if self.code[i] != c || self.risk[i] != r || self.job[i] != j {
                self.code[i] = c;
                self.risk[i] = r;
                self.job[i] = j;
                self.changed_at[i] = next;
                changed = true;
            }
        }
        if changed || self.job_added.last().is_some_and(|&v| v == next) {
            self.version = next;
        }
        all_placed
    }

    fn intern_job(&mut self, job: Option<&Arc<str>>) -> u32 {
        let name: Arc<str> = job.cloned().unwrap_or_else(|| Arc::from(""));
        if let Some(&j) = self.job_index.get(&name) {
            return j;
        }
        let j = self.jobs.len() as u32;
        self.jobs.push(name.clone());
        self.job_index.insert(name, j);
        self.job_added.push(self.version + 1);
        j
    }

    /// New layout: cells sorted cluster → rack → host → GPU id.
    fn rebuild<'a>(&mut self, gpus: impl Iterator<Item = (&'a GpuId, &'a GpuView)>) {
        let none: Arc<str> = Arc::from(NONE);
        let name = |n: &Option<Arc<str>>| n.clone().unwrap_or_else(|| none.clone());
        let mut rows: Vec<Row> = gpus
            .map(|(id, v)| {
                let t = &v.latest.topo;
                (
                    name(&t.cluster),
                    name(&t.rack),
                    name(&t.host),
                    id.clone(),
                    name(&t.model),
                )
            })
            .collect();
        rows.sort_unstable_by(|a, b| (&a.0, &a.1, &a.2, &a.3).cmp(&(&b.0, &b.1, &b.2, &b.3)));

        let mut l = Layout {
            layout_version: now_ms().max(self.layout.layout_version + 1),
            ..Layout::default()
        };
        let mut models: BTreeMap<Arc<str>, u32> = BTreeMap::new();
        for (cluster, rack, host, id, model) in &rows {
            if l.clusters.last() != Some(cluster) {
                l.clusters.push(cluster.clone());
            }
            let ci = (l.clusters.len() - 1) as u32;
            if l.rack_names.last() != Some(rack) || l.rack_cluster.last() != Some(&ci) {
                l.rack_names.push(rack.clone());
                l.rack_cluster.push(ci);
            }
            let ri = (l.rack_names.len() - 1) as u32;
            if l.host_names.last() != Some(host) || l.host_rack.last() != Some(&ri) {
                l.host_names.push(host.clone());
                l.host_rack.push(ri);
            }
            let next = models.len() as u32;
            let mi = *models.entry(model.clone()).or_insert(next);
            l.gpu_ids.push(id.clone());
            l.gpu_host.push((l.host_names.len() - 1) as u32);
            l.gpu_model.push(mi);
        }
        l.models = vec![Arc::from(""); models.len()];
        for (m, i) in models {
            l.models[i as usize] = m;
        }
        let n = rows.len();
        self.index = l
            .gpu_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i as u32))
            .collect();
        // Every cell is new: mark it changed so deltas after the rebuild
        // carry it. The placeholder code 255 never matches a real state.
        self.code = vec![u8::MAX; n];
        self.risk = vec![0; n];
        self.job = vec![0; n];
        self.job_src = vec![None; n];
        self.changed_at = vec![self.version + 1; n];
        self.layout = Arc::new(l);
        self.layout_json = None;
    }

    #[cfg(test)]
    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    /// The layout serialized, cached until the layout changes.
    pub fn layout_json(&mut self) -> Result<Arc<String>, serde_json::Error> {
        if let Some(j) = &self.layout_json {
            return Ok(j.clone());
        }
        let j = Arc::new(serde_json::to_string(&*self.layout)?);
        self.layout_json = Some(j.clone());
        Ok(j)
    }

    #[cfg(test)]
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Cells changed after `since` (all of them for 0 or a future version).
    pub fn delta(&self, since: u64) -> Delta {
        let full = since == 0 || since > self.version;
        let since = if full { 0 } else { since };
        let mut d = Delta {
            layout_version: self.layout.layout_version,
            version: self.version,
            full,
            ..Delta::default()
        };
        for (i, &at) in self.changed_at.iter().enumerate() {
            if at > since {
                d.idx.push(i as u32);
                d.state.push(self.code[i]);
                d.risk.push(self.risk[i]);
                d.job.push(self.job[i]);
            }
        }
        let from = self.job_added.partition_point(|&v| v <= since);
        d.jobs_from = from as u32;
        d.jobs = self.jobs[from..].to_vec();
        d
    }
}

fn now_ms() -> u64 {
    crate::checkpoint::wall_ms().max(0) as u64
}
