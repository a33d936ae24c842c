//! One GPU's entry in the risk table: its latest assessment, when it last
//! reported and a short risk history. A leaf shared by the table
//! ([`crate::risk_table`], which swaps these snapshots) and its list orders
//! ([`crate::risk_index`], which holds the same `Arc`s), so that neither of
//! the two imports the other.

use std::collections::VecDeque;

use crate::assess::{Assessment, HealthState};

/// Points of risk history kept per GPU, one per [`HISTORY_STEP_MS`].
pub const HISTORY_LEN: usize = 48;
/// Spacing of history points: 48 × 5 min = the last 4 hours.
pub const HISTORY_STEP_MS: i64 = 300_000;

/// What REST knows about one GPU: an immutable snapshot, replaced whole.
#[derive(Debug, Clone)]
pub struct GpuView {
    pub latest: Assessment,
    pub last_seen_ms: i64,
    /// (ts, risk), oldest first.
    pub history: VecDeque<(i64, f32)>,
}

/// Whether `a` was made for a GPU that stopped reporting (state `silent`,
/// or `failing` for a hard-failed GPU that went quiet: its reasons carry
/// `last_seen`), not from its telemetry.
fn quiet(a: &Assessment) -> bool {
    a.state == HealthState::Silent || a.reasons.iter().any(|r| r.signal == "last_seen")
}

impl GpuView {
    pub(crate) fn first(a: &Assessment) -> GpuView {
        let mut history = VecDeque::with_capacity(HISTORY_LEN);
        history.push_back((a.ts_ms, a.risk as f32));
        GpuView {
            latest: a.clone(),
            last_seen_ms: a.ts_ms,
            history,
        }
    }

    /// Takes `a` in: one history point per [`HISTORY_STEP_MS`] (the step's
    /// highest risk), last seen only when the GPU reported.
    pub(crate) fn advance(&mut self, a: &Assessment) {
        self.latest = a.clone();
        if !quiet(a) {
            self.last_seen_ms = a.ts_ms;
        }
        let due = self
            .history
            .back()
            .is_none_or(|(t, _)| a.ts_ms - t >= HISTORY_STEP_MS);
        if due {
            if self.history.len() == HISTORY_LEN {
                self.history.pop_front();
            }
            self.history.push_back((a.ts_ms, a.risk as f32));
        } else if let Some(last) = self.history.back_mut() {
            last.1 = last.1.max(a.risk as f32);
        }
    }
}
