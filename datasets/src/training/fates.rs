//! What happened to each GPU in a feature export: when it was first and
//! last seen, and when (and how) it failed, from the telemetry itself and an
//! optional labels file. The first pass of building a training set.
//!
//! Failures read off the telemetry (the same conditions as the hard rules):
//! a double-bit ECC error (`ecc_dbe_delta` > 0), a hard XID (48, 64, 79,
//! 94, 95, 119, 120 as `last_xid`), a row-remap failure, or a GPU that stops
//! reporting while its host goes on. A label naming the GPU adds (or moves
//! earlier) its failure; stragglers and rack incidents are not failures.

use std::path::Path;

use features::Col;

use super::reader::{Interner, for_each_row};
use crate::error::DatasetError;
use crate::labels::Label;

/// XIDs that mean the GPU has failed (see `detector::assess::rules`).
pub const HARD_XIDS: [u32; 7] = [48, 64, 79, 94, 95, 119, 120];

/// A GPU that stops reporting this long before its host does is lost.
pub const LOST_AFTER_MS: i64 = 10 * 60 * 1000;

/// Failure kinds with no precursor to predict from: a GPU that dies
/// (the simulator's `sudden_death`) or stops reporting (`gpu_lost`, read
/// off the telemetry when no label names the kind).
pub const NO_PRECURSOR: [&str; 2] = ["sudden_death", "gpu_lost"];

/// Label kinds that are not GPU failures.
pub const NOT_FAILURES: [&str; 2] = ["straggler", "rack_cooling"];

/// One GPU's fate.
#[derive(Debug, Clone, PartialEq)]
pub struct Fate {
    pub first_ms: i64,
    pub last_ms: i64,
    pub host: u32,
    /// First failure, if any.
    pub failure_ms: Option<i64>,
    /// The label's kind when a label names it, else the telemetry's
    /// (`dbe`, `hard_xid`, `remap_failure`, `gpu_lost`).
    pub kind: Option<String>,
    /// When the failure's precursor began, when a label says so
    /// (simulator ground truth); None when unknown.
    pub onset_ms: Option<i64>,
}

/// The fates of every GPU in a feature export.
#[derive(Debug, Clone, Default)]
pub struct Fates {
    pub gpus: Interner,
    pub hosts: Interner,
    pub fates: Vec<Fate>,
    /// Last event time in the file.
    pub end_ms: i64,
    pub start_ms: i64,
    pub rows: u64,
}

impl Fates {
    /// Reads `path` (only the columns the failure conditions need) and
    /// merges `labels`.
    pub fn scan(path: &Path, labels: &[Label]) -> Result<Fates, DatasetError> {
        let mut gpus = Interner::default();
        let mut hosts = Interner::default();
        let mut fates: Vec<Fate> = Vec::new();
        let (mut start, mut end) = (i64::MAX, i64::MIN);
        let cols = [
            Col::EccDbeDelta as usize,
            Col::LastXid as usize,
            Col::RowRemapFailure as usize,
        ];
        let rows = for_each_row(path, &mut gpus, &mut hosts, Some(&cols), |r| {
            start = start.min(r.ts_ms);
            end = end.max(r.ts_ms);
            let g = r.gpu as usize;
            if g == fates.len() {
                fates.push(Fate {
                    first_ms: r.ts_ms,
                    last_ms: r.ts_ms,
                    host: r.host,
                    failure_ms: None,
                    kind: None,
                    onset_ms: None,
                });
            }
            let f = &mut fates[g];
            f.first_ms = f.first_ms.min(r.ts_ms);
            f.last_ms = f.last_ms.max(r.ts_ms);
            let v = |c: Col| r.values[c as usize];
            let why = if v(Col::EccDbeDelta) > 0.0 {
                Some("dbe")
            } else if HARD_XIDS.contains(&(v(Col::LastXid) as u32)) {
                Some("hard_xid")
            } else if v(Col::RowRemapFailure) >= 1.0 {
                Some("remap_failure")
            } else {
                None
            };
            if let Some(why) = why
                && f.failure_ms.is_none_or(|t| r.ts_ms < t)
            {
                f.failure_ms = Some(r.ts_ms);
                f.kind = Some(why.to_string());
            }
        })?;
        let mut out = Fates {
            gpus,
            hosts,
            fates,
            end_ms: end,
            start_ms: start,
            rows,
        };
        out.mark_lost();
        out.merge_labels(labels);
        Ok(out)
    }

    /// GPUs whose host went on reporting after they stopped.
    fn mark_lost(&mut self) {
        let mut host_last = vec![i64::MIN; self.hosts.len()];
        for f in &self.fates {
            let h = &mut host_last[f.host as usize];
            *h = (*h).max(f.last_ms);
        }
        for f in &mut self.fates {
            let host_end = host_last[f.host as usize];
            if f.failure_ms.is_none() && f.last_ms + LOST_AFTER_MS < host_end {
                f.failure_ms = Some(f.last_ms);
                f.kind = Some("gpu_lost".into());
            }
        }
    }

    fn merge_labels(&mut self, labels: &[Label]) {
        for l in labels {
            let Some(gpu) = &l.gpu else { continue };
            if NOT_FAILURES.contains(&l.kind.as_str()) {
                continue;
            }
            let Some(g) = self.gpus.get(gpu) else {
                continue;
            };
            let f = &mut self.fates[g as usize];
            // The label names the kind of a failure the telemetry shows
            // within the hour; otherwise it is a failure of its own.
            match f.failure_ms {
                Some(t) if (t - l.ts_ms).abs() <= 3_600_000 => {
                    f.kind = Some(l.kind.clone());
                    f.failure_ms = Some(t.min(l.ts_ms));
                    f.onset_ms = l.onset_ms;
                }
                Some(t) if t < l.ts_ms => {}
                _ => {
                    f.failure_ms = Some(l.ts_ms);
                    f.kind = Some(l.kind.clone());
                    f.onset_ms = l.onset_ms;
                }
            }
        }
    }

    /// Whether `fate`'s failure shows at `ts_ms`: its kind has a
    /// precursor and, when the labels give the precursor's onset, `ts_ms`
    /// is at or after it. True for GPUs that do not fail.
    pub fn visible(fate: &Fate, ts_ms: i64) -> bool {
        if fate.failure_ms.is_none() {
            return true;
        }
        !NO_PRECURSOR.contains(&fate.kind.as_deref().unwrap_or(""))
            && fate.onset_ms.is_none_or(|o| ts_ms >= o)
    }

    /// Number of GPUs that fail in the file.
    pub fn failures(&self) -> usize {
        self.fates.iter().filter(|f| f.failure_ms.is_some()).count()
    }
}
