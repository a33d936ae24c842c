//! The simulator's ground truth: one [`FailureLabel`] per planned GPU
//! failure or rack incident, as the planners in `failures` and
//! `random_precursors` write it and the label files carry it.

use std::sync::Arc;

use features::GpuId;

use super::failures::{FailureKind, FailurePlan};
use super::topology::GpuInfo;

/// One labelled failure or incident.
#[derive(Debug, Clone, PartialEq)]
pub struct FailureLabel {
    pub kind: FailureKind,
    /// The GPU; `None` for rack incidents.
    pub gpu: Option<GpuId>,
    /// The GPU's host; `None` for rack incidents.
    pub host: Option<Arc<str>>,
    pub rack: Arc<str>,
    pub cluster: Arc<str>,
    /// Start of the precursor (may precede the run: the GPU was already
    /// degrading). Equals `failure_ms` for sudden death.
    pub onset_ms: i64,
    /// First tick that shows the hard failure (the XID, or the first missing
    /// sample for sudden death). `None` for stragglers and incidents.
    pub failure_ms: Option<i64>,
    /// When a straggler or incident ends (exclusive).
    pub end_ms: Option<i64>,
    /// XID at `failure_ms` (HBM: 48, followed by 94 or 95 one tick later).
    pub xid: Option<u32>,
}

impl FailureLabel {
    /// The label of a GPU failure planned for `info`.
    pub(crate) fn planned(info: &GpuInfo, kind: FailureKind, p: &FailurePlan) -> Self {
        FailureLabel {
            kind,
            gpu: Some(info.uuid.clone()),
            host: Some(info.host.clone()),
            rack: info.rack.clone(),
            cluster: info.cluster.clone(),
            onset_ms: p.onset_ms,
            failure_ms: (p.failure_ms != i64::MAX).then_some(p.failure_ms),
            end_ms: (p.end_ms != i64::MAX).then_some(p.end_ms),
            xid: kind.xid(),
        }
    }
}
