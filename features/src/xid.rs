//! XID classification and job-level attribution, part of the feature stage.
//!
//! `DCGM_FI_DEV_XID_ERRORS` holds the *last* XID the driver logged for a GPU;
//! a change of value is an XID event (the telemetry contract). Each event is
//! classified by [`classify`] as hardware, application or unknown, following
//! NVIDIA's Xid documentation and catalog:
//! <https://docs.nvidia.com/deploy/xid-errors/> (catalog for Ampere and newer:
//! <https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html>).
//!
//! An application XID is ambiguous: the catalog's "restart the application"
//! codes (13, 31, 43, 45, …) are usually a bug in the user's program, but the
//! same code repeating on one GPU while its peers stay clean points at the
//! GPU. [`XidCorrelator`] settles it: application XIDs on a job's GPUs within
//! one window count together; a pending XID is judged once the window has
//! passed, as the job's fault when at least a fraction of the job's GPUs saw
//! one, else the GPU's. Limitation: a repeat of the *same* code on one GPU
//! does not change the field's value and so cannot be seen.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Who is to blame for an XID, per NVIDIA's catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum XidClass {
    /// The GPU, its memory, links or firmware: drain or repair.
    Hardware,
    /// Usually the user's program (catalog action: restart the application).
    Application,
    /// Driver, system or not in our table.
    Unknown,
}

impl XidClass {
    /// A stable label for metrics and exports.
    pub fn label(self) -> &'static str {
        match self {
            XidClass::Hardware => "hardware",
            XidClass::Application => "application",
            XidClass::Unknown => "unknown",
        }
    }
}

/// Classifies an XID code. Sources: NVIDIA Xid documentation
/// (<https://docs.nvidia.com/deploy/xid-errors/>), its catalog's
/// "Resolution Bucket" and the per-code descriptions quoted below.
pub fn classify(xid: u32) -> XidClass {
    match xid {
        // Hardware, per https://docs.nvidia.com/deploy/xid-errors/ :
        // 48 double-bit ECC error; 61/62 internal micro-controller breakpoint /
        // halt; 63 ECC page retirement or row-remapping recording event;
        // 64 page retirement or row-remapper recording failure; 74 NVLink
        // error; 79 GPU has fallen off the bus; 92 high single-bit ECC error
        // rate; 94 contained ECC error; 95 uncontained ECC error; 119 GSP RPC
        // timeout; 120 GSP error; 121 C2C link error; 122/123 SPI PMU RPC
        // errors; 140 unrecovered ECC error.
        48 | 61 | 62 | 63 | 64 | 74 | 79 | 92 | 94 | 95 | 119 | 120 | 121 | 122 | 123 | 140 => {
            XidClass::Hardware
        }
        // Application, per https://docs.nvidia.com/deploy/xid-errors/ :
        // 13 graphics engine exception; 31 GPU memory page fault (illegal
        // address); 43 GPU stopped processing (the channel was reset after a
        // user fault); 45 preemptive cleanup due to previous errors (the
        // process was killed); 68 video processor (NVDEC) exception;
        // 69 graphics engine class error.
        13 | 31 | 43 | 45 | 68 | 69 => XidClass::Application,
        // Everything else (32 corrupted push buffer, 38 driver firmware error,
        // 109 context-switch timeout, 154 recovery action changed, …) may be
        // driver, system or hardware: left to the models.
        _ => XidClass::Unknown,
    }
}

/// The verdict on one application XID once its window has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum XidBlame {
    /// Most of the job's GPUs saw an application XID at once: the job crashed.
    Job,
    /// This GPU alone (or nearly): the GPU is suspect.
    Gpu,
}

/// An application XID waiting for its window to pass, kept per GPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PendingXid {
    pub xid: u32,
    pub ts_ms: i64,
}

/// Application XIDs of one group (job, else host) in recent windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct XidGroup {
    /// `(window start, GPUs hit, largest group size seen)`, newest last; at
    /// most `WINDOWS`.
    windows: Vec<(i64, u32, u32)>,
    last_ts_ms: i64,
}

/// Enough windows to judge XIDs that are still pending when newer ones come.
const WINDOWS: usize = 4;

/// Counts application XIDs per job (or host) and time window, to tell a job
/// crash from a bad GPU. Looked up only on XID events, which are rare, so a
/// string-keyed map is fine here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct XidCorrelator {
    groups: HashMap<Arc<str>, XidGroup>,
}

impl XidCorrelator {
    /// Records an application XID on one GPU of `group` (which has
    /// `group_size` GPUs as far as this instance knows) at `ts_ms`.
    pub fn record(&mut self, group: &Arc<str>, ts_ms: i64, window_ms: i64, group_size: u32) {
        let g = self.groups.entry(group.clone()).or_default();
        g.last_ts_ms = g.last_ts_ms.max(ts_ms);
        if let Some(w) = g
            .windows
            .iter_mut()
            .find(|(start, _, _)| ts_ms >= *start && ts_ms < start + window_ms)
        {
            w.1 += 1;
            w.2 = w.2.max(group_size);
            return;
        }
        if g.windows.len() == WINDOWS {
            g.windows.remove(0);
        }
        g.windows.push((ts_ms, 1, group_size));
    }

    /// Judges a pending XID of a GPU in `group`: the job's fault when at
    /// least `job_fraction` of the group (and at least two GPUs) saw an
    /// application XID in the same window.
    pub fn judge(
        &self,
        group: Option<&Arc<str>>,
        pending: PendingXid,
        window_ms: i64,
        job_fraction: f64,
    ) -> XidBlame {
        let (hits, size) = group
            .and_then(|g| self.groups.get(g))
            .and_then(|g| {
                g.windows.iter().find(|(start, _, _)| {
                    pending.ts_ms >= *start && pending.ts_ms < start + window_ms
                })
            })
            .map_or((1, 1), |w| (w.1, w.2));
        let needed = (f64::from(size) * job_fraction).ceil().max(2.0);
        if f64::from(hits) >= needed {
            XidBlame::Job
        } else {
            XidBlame::Gpu
        }
    }

    /// Forgets groups with no XID since `before_ms`.
    pub fn gc(&mut self, before_ms: i64) {
        self.groups.retain(|_, g| g.last_ts_ms >= before_ms);
    }

    /// Approximate heap bytes held.
    pub fn approx_heap_bytes(&self) -> usize {
        self.groups.capacity() * (std::mem::size_of::<(Arc<str>, XidGroup)>() + 1)
            + self
                .groups
                .iter()
                .map(|(k, g)| k.len() + 16 + g.windows.capacity() * 16 + 8)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_issue_examples() {
        for x in [48, 63, 64, 74, 79, 92, 94, 95, 119, 120] {
            assert_eq!(classify(x), XidClass::Hardware, "{x}");
        }
        for x in [13, 31, 43, 45, 68] {
            assert_eq!(classify(x), XidClass::Application, "{x}");
        }
        assert_eq!(classify(32), XidClass::Unknown);
        assert_eq!(classify(0), XidClass::Unknown);
    }

    #[test]
    fn job_wide_xid_blames_the_job_and_a_lone_one_the_gpu() {
        let mut c = XidCorrelator::default();
        let job: Arc<str> = "train-1".into();
        for _ in 0..8 {
            c.record(&job, 1_000, 60_000, 8);
        }
        let p = PendingXid {
            xid: 13,
            ts_ms: 1_000,
        };
        assert_eq!(c.judge(Some(&job), p, 60_000, 0.5), XidBlame::Job);
        c.record(&job, 500_000, 60_000, 8);
        let lone = PendingXid {
            xid: 13,
            ts_ms: 500_000,
        };
        assert_eq!(c.judge(Some(&job), lone, 60_000, 0.5), XidBlame::Gpu);
        assert_eq!(c.judge(None, lone, 60_000, 0.5), XidBlame::Gpu);
        c.gc(400_000);
        assert_eq!(c.groups.len(), 1);
        c.gc(600_000);
        assert!(c.groups.is_empty());
    }
}
