//! What happened to each GPU in a dataset (a feature file or the service's
//! exports, [`Dataset`]): when it was first and last seen, and when (and
//! how) it failed, from the telemetry itself and from labels merged in
//! afterwards, one source at a time. The first pass of building a training
//! set.
//!
//! Failures read off the telemetry (the same conditions as the hard rules):
//! a double-bit ECC error (`ecc_dbe_delta` > 0), a hard XID (48, 64, 79,
//! 94, 95, 119, 120 as `last_xid`), a row-remap failure, or a GPU that stops
//! reporting while its host goes on. A label naming the GPU adds (or moves
//! earlier) its failure; stragglers and rack incidents are not failures.

use std::collections::BTreeMap;

use features::Col;

use super::reader::Interner;
use super::source::Dataset;
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

/// Label kinds that are not GPU failures (`false_alarm`: an operator's
/// "this alert was wrong", `POST /v1/labels`).
pub const NOT_FAILURES: [&str; 3] = ["straggler", "rack_cooling", "false_alarm"];

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

impl Fate {
    /// A GPU interned but with no row in the time range.
    fn unseen() -> Fate {
        Fate {
            first_ms: i64::MAX,
            last_ms: i64::MIN,
            host: 0,
            failure_ms: None,
            kind: None,
            onset_ms: None,
        }
    }

    /// Whether the GPU has a row in the data.
    pub fn seen(&self) -> bool {
        self.first_ms <= self.last_ms
    }
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
    /// Reads `data` (only the columns the failure conditions need, in any
    /// order) and merges `labels`. `file_done(i)` follows the files read.
    pub fn scan(
        data: &Dataset,
        labels: &[Label],
        file_done: impl FnMut(usize),
    ) -> Result<Fates, DatasetError> {
        let mut gpus = Interner::default();
        let mut hosts = Interner::default();
        let mut fates: Vec<Fate> = Vec::new();
        let (mut start, mut end) = (i64::MAX, i64::MIN);
        let cols = [
            Col::EccDbeDelta as usize,
            Col::LastXid as usize,
            Col::RowRemapFailure as usize,
        ];
        let scan = |r: &super::RowRef<'_>| {
            start = start.min(r.ts_ms);
            end = end.max(r.ts_ms);
            let g = r.gpu as usize;
            // GPUs are interned as files are read, rows out of the time
            // range included: a GPU with no row in range stays unseen.
            if g >= fates.len() {
                fates.resize(g + 1, Fate::unseen());
            }
            let f = &mut fates[g];
            if f.first_ms > f.last_ms {
                f.host = r.host;
            }
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
        };
        let rows = data.for_each_row(&mut gpus, &mut hosts, Some(&cols), false, scan, file_done)?;
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
        for f in self.fates.iter().filter(|f| f.seen()) {
            let h = &mut host_last[f.host as usize];
            *h = (*h).max(f.last_ms);
        }
        for f in self.fates.iter_mut().filter(|f| f.seen()) {
            let host_end = host_last[f.host as usize];
            if f.failure_ms.is_none() && f.last_ms + LOST_AFTER_MS < host_end {
                f.failure_ms = Some(f.last_ms);
                f.kind = Some("gpu_lost".into());
            }
        }
    }

    /// Merges failure labels; returns how many named a GPU seen in the
    /// data (the others, and labels of kinds in [`NOT_FAILURES`], change
    /// nothing).
    pub fn merge_labels(&mut self, labels: &[Label]) -> usize {
        let mut applied = 0;
        for l in labels {
            let Some(gpu) = &l.gpu else { continue };
            if NOT_FAILURES.contains(&l.kind.as_str()) {
                continue;
            }
            let Some(f) = self
                .gpus
                .get(gpu)
                .and_then(|g| self.fates.get_mut(g as usize))
                .filter(|f| f.seen())
            else {
                continue;
            };
            applied += 1;
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
        applied
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

    /// Number of GPUs that fail in the data.
    pub fn failures(&self) -> usize {
        self.fates.iter().filter(|f| f.failure_ms.is_some()).count()
    }

    /// Number of GPUs with a row in the data.
    pub fn gpu_count(&self) -> usize {
        self.fates.iter().filter(|f| f.seen()).count()
    }

    /// Failures by kind.
    pub fn failures_by_kind(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for f in self.fates.iter().filter(|f| f.failure_ms.is_some()) {
            *out.entry(f.kind.clone().unwrap_or_else(|| "unknown".into()))
                .or_insert(0) += 1;
        }
        out
    }

    /// The event time `fraction` of the way through the data.
    pub fn cut_ms(&self, fraction: f64) -> i64 {
        self.start_ms + ((self.end_ms - self.start_ms) as f64 * fraction) as i64
    }
}
