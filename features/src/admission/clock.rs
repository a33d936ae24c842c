//! The admission gate's clock: what the fleet's established GPUs claim,
//! summarized as a lower median (the clock silence and timers run on) and
//! a band (what a sample is judged against). Part of [`super::Admission`].

use super::Admission;
use crate::Sample;

/// The fleet's claims, summarized.
struct Quantiles {
    low: i64,
    mid: i64,
    high: i64,
    /// From established GPUs (else from whatever is tracked).
    settled: bool,
}

/// The band of `values` (reordered in place): the low and high quantiles
/// once the lowest and highest tenth, and at least one value at each end,
/// are left out, so no single source moves either end. `None` when empty.
pub fn band(values: &mut [i64]) -> Option<(i64, i64)> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let tail = (n / 10).max(1).min(n - 1);
    let low = *values.select_nth_unstable(tail).1;
    let high = *values.select_nth_unstable(n - 1 - tail).1;
    Some((low, high))
}

impl Admission {
    /// Sets the clock and band from the tracked GPUs alone (after a
    /// restore): the clock may move back here.
    pub(super) fn reset_clock(&mut self) {
        if let Some(q) = self.quantiles(&[]) {
            self.clock_ms = Some(q.mid);
            self.band = Some((q.low, q.high));
        }
    }

    /// Records the batch's claims, then moves the clock to the lower
    /// median of the established GPUs' claims (the batch's own GPUs while
    /// none is established). Never moves back.
    pub(super) fn advance_clock(&mut self, batch: &[Sample]) {
        let mut fresh = Vec::new();
        let established = self.cfg.established_after;
        for s in batch {
            match self.gpus.get_mut(&s.gpu) {
                Some(g) => {
                    g.claim_ms = s.ts_ms;
                    // Only established GPUs count in the clock, so only
                    // their samples measure how recently one reported: a
                    // flood of new ids must not age the fleet out of it.
                    if g.samples >= established {
                        self.seq += 1;
                        g.seen_seq = self.seq;
                    }
                }
                None => fresh.push(s.ts_ms),
            }
        }
        if let Some(q) = self.quantiles(&fresh) {
            // Until some GPU is established the clock may still move back:
            // a lone first sample from a broken clock must not pin it.
            self.clock_ms = Some(match self.clock_ms {
                Some(old) if q.settled => old.max(q.mid),
                _ => q.mid,
            });
            self.band = Some((q.low, q.high));
        }
    }

    /// Quantiles of the claims of established GPUs still reporting
    /// (`settled`); without any, of every tracked GPU and `fresh`. A GPU
    /// still reports if it sent a sample within the last two rounds of the
    /// fleet (arrival order), so GPUs that went silent, even half the
    /// fleet, stop holding the clock back within two rounds.
    fn quantiles(&mut self, fresh: &[i64]) -> Option<Quantiles> {
        let window = 2 * self.established as u64 + 8;
        let recent = self.seq.saturating_sub(window);
        let established = self.cfg.established_after;
        let mut claims = std::mem::take(&mut self.claims);
        claims.clear();
        claims.extend(
            self.gpus
                .values()
                .filter(|g| g.samples >= established && g.seen_seq >= recent)
                .map(|g| g.claim_ms),
        );
        let settled = !claims.is_empty();
        if !settled {
            claims.extend(self.gpus.values().map(|g| g.claim_ms));
            claims.extend_from_slice(fresh);
        }
        let q = if claims.is_empty() {
            None
        } else {
            // Lower median: a strict majority claims at least this.
            let k = (claims.len() - 1) / 2;
            let mid = *claims.select_nth_unstable(k).1;
            let (low, high) = band(&mut claims).unwrap_or((mid, mid));
            Some(Quantiles {
                low,
                mid,
                high,
                settled,
            })
        };
        self.claims = claims;
        q
    }
}
