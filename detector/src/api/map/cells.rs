//! The fleet map's data shapes: the layout (names and per-GPU arrays in
//! cell order), every cell's state with the version it changed at, and the
//! delta a browser asks for. [`super::cache`] fills them from the risk
//! table and [`super::frame`] encodes them; they live apart so that neither
//! of those two modules needs the other's internals.

use std::sync::Arc;

use features::GpuId;

/// The layout: names interned once, per-GPU arrays in cell order.
#[derive(Debug, Default)]
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

/// Every cell's state, risk and job with the version it last changed at:
/// what a request needs to answer `/v1/map/states`, shared immutably.
#[derive(Debug, Default, Clone)]
pub struct Cells {
    pub layout_version: u64,
    pub version: u64,
    pub code: Vec<u8>,
    pub risk: Vec<u8>,
    pub job: Vec<u32>,
    pub changed_at: Vec<u64>,
    /// Job names, interned; 0 is "no job".
    pub jobs: Vec<Arc<str>>,
    /// Version at which each job name was interned (non-decreasing).
    pub job_added: Vec<u64>,
}

/// Cells that changed since a version, as parallel arrays.
#[derive(Debug, Default, PartialEq)]
pub struct Delta {
    pub layout_version: u64,
    pub version: u64,
    /// Whether this holds every cell, in cell order (asked with `since=0`,
    /// or `since` was unknown); `idx` is then left empty.
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

impl Cells {
    /// Cells changed after `since` (all of them for 0 or a future version).
    pub fn delta(&self, since: u64) -> Delta {
        let full = since == 0 || since > self.version;
        let since = if full { 0 } else { since };
        let mut d = Delta {
            layout_version: self.layout_version,
            version: self.version,
            full,
            ..Delta::default()
        };
        if full {
            d.state = self.code.clone();
            d.risk = self.risk.clone();
            d.job = self.job.clone();
        } else {
            for (i, &at) in self.changed_at.iter().enumerate() {
                if at > since {
                    d.idx.push(i as u32);
                    d.state.push(self.code[i]);
                    d.risk.push(self.risk[i]);
                    d.job.push(self.job[i]);
                }
            }
        }
        let from = self.job_added.partition_point(|&v| v <= since);
        d.jobs_from = from as u32;
        d.jobs = self.jobs[from..].to_vec();
        d
    }
}
