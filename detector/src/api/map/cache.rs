//! The fleet map's compact view of the risk table: every GPU gets a stable
//! cell index in cluster → rack → host → GPU order (the layout), and each
//! cell's state, risk and job carry the version at which they last changed,
//! so a browser asks for "what changed since version v" and gets a few
//! columns instead of 100,000 objects.
//!
//! [`MapCache::refresh`] brings it up to date: one pass over
//! [`SharedState::gpus`](crate::state::SharedState), one stripe's read lock
//! at a time, comparing cells in place. When the set of GPUs changes the
//! layout is rebuilt: its rows are copied out stripe by stripe, sorted and
//! encoded with no lock held. The cells live in an [`Arc`]`<`[`Cells`]`>` that
//! [`super::hub`] hands to requests as an immutable snapshot; a refresh
//! copies them only when a snapshot still holds them and a cell changed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use features::GpuId;

use super::cells::{Cells, Layout};
use super::frame;
use crate::assess::HealthState;
use crate::risk_table::RiskTable;
use crate::state::GpuView;

/// Shortest time between two layout rebuilds. A new layout makes every
/// open page fetch it again and redraw everything, so GPUs that appear in
/// a trickle (a fleet coming up, replacements) wait up to this long to get
/// a cell.
pub const MIN_LAYOUT_AGE: Duration = Duration::from_secs(30);

/// Name shown for a missing topology label.
const NONE: &str = "(none)";

/// A lock (named) was poisoned by a panicking holder.
#[derive(Debug, thiserror::Error)]
#[error("{0} lock poisoned")]
pub struct Poisoned(pub &'static str);

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

/// The cache behind `/v1/map` and `/v1/map/states`.
#[derive(Debug, Default)]
pub struct MapCache {
    layout: Arc<Layout>,
    /// `layout` encoded ([`frame::layout`]), once per layout version.
    layout_frame: Bytes,
    index: HashMap<GpuId, u32>,
    cells: Arc<Cells>,
    /// The job `Arc` each cell's `job` was interned from.
    job_src: Vec<Option<Arc<str>>>,
    job_index: HashMap<Arc<str>, u32>,
    rebuilt: Option<Instant>,
}

impl MapCache {
    /// Brings the cache up to date with the risk table. GPUs new since the
    /// layout get cells at the next rebuild, at most every
    /// [`MIN_LAYOUT_AGE`] (`force` skips the wait).
    pub fn refresh(&mut self, table: &RiskTable, force: bool) -> Result<(), Poisoned> {
        if self.cells.jobs.is_empty() {
            self.intern_job(None);
        }
        let due = self.layout.gpu_ids.is_empty()
            || force
            || self.rebuilt.is_none_or(|t| t.elapsed() >= MIN_LAYOUT_AGE);
        let (all_placed, seen) = self.compare(table)?;
        let stale = !all_placed || seen != self.layout.gpu_ids.len();
        if stale && due {
            // Copy the rows out; sort and encode without a lock.
            self.rebuild(rows(table)?);
            self.rebuilt = Some(Instant::now());
            self.compare(table)?;
        }
        Ok(())
    }

    /// The encoded layout and the cells, to share with requests.
    pub fn snapshot(&self) -> (Bytes, Arc<Cells>) {
        (self.layout_frame.clone(), self.cells.clone())
    }

    /// One pass over the table: records changed cells under a new version.
    /// Returns whether every GPU had a cell, and how many GPUs there were.
    fn compare(&mut self, table: &RiskTable) -> Result<(bool, usize), Poisoned> {
        let next = self.cells.version + 1;
        let mut changed = false;
        let mut all_placed = true;
        let mut seen = 0;
        table
            .for_each(|id, v| {
                seen += 1;
                match self.compare_cell(id, v, next) {
                    Some(c) => changed |= c,
                    None => all_placed = false,
                }
            })
            .map_err(|_| Poisoned("risk table"))?;
        if changed || self.cells.job_added.last().is_some_and(|&v| v == next) {
            Arc::make_mut(&mut self.cells).version = next;
        }
        Ok((all_placed, seen))
    }

    /// Compares one GPU's cell with its view; `None` when it has no cell
    /// yet, else whether the cell changed (recorded under version `next`).
    fn compare_cell(&mut self, id: &GpuId, v: &GpuView, next: u64) -> Option<bool> {
        let &i = self.index.get(id.as_ref())?;
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
            self.cells.job[i]
        } else {
            self.job_src[i] = a.topo.job.clone();
            self.intern_job(a.topo.job.as_ref())
        };
        let (c, r) = (state_code(a.state), risk_pct(a.risk));
        let cur = &self.cells;
        if cur.code[i] != c || cur.risk[i] != r || cur.job[i] != j {
            // Copies the cells once if a snapshot still holds them.
            let cells = Arc::make_mut(&mut self.cells);
            cells.code[i] = c;
            cells.risk[i] = r;
            cells.job[i] = j;
            cells.changed_at[i] = next;
            return Some(true);
        }
        Some(false)
    }

    fn intern_job(&mut self, job: Option<&Arc<str>>) -> u32 {
        let name: Arc<str> = job.cloned().unwrap_or_else(|| Arc::from(""));
        if let Some(&j) = self.job_index.get(&name) {
            return j;
        }
        let cells = Arc::make_mut(&mut self.cells);
        let j = cells.jobs.len() as u32;
        cells.jobs.push(name.clone());
        cells.job_added.push(cells.version + 1);
        self.job_index.insert(name, j);
        j
    }

    /// New layout from `rows`: cells sorted cluster → rack → host → GPU id.
    fn rebuild(&mut self, mut rows: Vec<Row>) {
        rows.sort_unstable_by(|a, b| (&a.0, &a.1, &a.2, &a.3).cmp(&(&b.0, &b.1, &b.2, &b.3)));
        let mut l = Layout {
            layout_version: now_ms().max(self.layout.layout_version + 1),
            ..Layout::default()
        };
        let mut models: BTreeMap<Arc<str>, u32> = BTreeMap::new();
        for (cluster, rack, host, id, model) in rows {
            if l.clusters.last() != Some(&cluster) {
                l.clusters.push(cluster);
            }
            let ci = (l.clusters.len() - 1) as u32;
            if l.rack_names.last() != Some(&rack) || l.rack_cluster.last() != Some(&ci) {
                l.rack_names.push(rack);
                l.rack_cluster.push(ci);
            }
            let ri = (l.rack_names.len() - 1) as u32;
            if l.host_names.last() != Some(&host) || l.host_rack.last() != Some(&ri) {
                l.host_names.push(host);
                l.host_rack.push(ri);
            }
            let next = models.len() as u32;
            let mi = *models.entry(model).or_insert(next);
            l.gpu_ids.push(id);
            l.gpu_host.push((l.host_names.len() - 1) as u32);
            l.gpu_model.push(mi);
        }
        l.models = vec![Arc::from(""); models.len()];
        for (m, i) in models {
            l.models[i as usize] = m;
        }
        let n = l.gpu_ids.len();
        self.index = l
            .gpu_ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i as u32))
            .collect();
        // Every cell is new: mark it changed so deltas after the rebuild
        // carry it. The placeholder code 255 never matches a real state.
        let cells = Arc::make_mut(&mut self.cells);
        cells.layout_version = l.layout_version;
        cells.code = vec![u8::MAX; n];
        cells.risk = vec![0; n];
        cells.job = vec![0; n];
        cells.changed_at = vec![cells.version + 1; n];
        self.job_src = vec![None; n];
        self.layout_frame = frame::layout(&l);
        self.layout = Arc::new(l);
    }

    #[cfg(test)]
    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    #[cfg(test)]
    pub fn version(&self) -> u64 {
        self.cells.version
    }

    #[cfg(test)]
    pub fn delta(&self, since: u64) -> super::cells::Delta {
        self.cells.delta(since)
    }
}

/// Every GPU's row, copied out of the table (clones of interned `Arc`s).
fn rows(table: &RiskTable) -> Result<Vec<Row>, Poisoned> {
    let none: Arc<str> = Arc::from(NONE);
    let name = |n: &Option<Arc<str>>| n.clone().unwrap_or_else(|| none.clone());
    let mut out = Vec::new();
    table
        .for_each(|id, v| {
            let t = &v.latest.topo;
            out.push((
                name(&t.cluster),
                name(&t.rack),
                name(&t.host),
                id.clone(),
                name(&t.model),
            ));
        })
        .map_err(|_| Poisoned("risk table"))?;
    Ok(out)
}

fn now_ms() -> u64 {
    crate::checkpoint::wall_ms().max(0) as u64
}
