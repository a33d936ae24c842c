//! The risk table REST reads: the latest assessment and a short risk history
//! per GPU, published by the alert stage once per shard batch.
//!
//! Lookups must never wait on scoring (issue 7), and the writer runs on a
//! pipeline thread at a lower priority than REST (`pipeline.nice`): a reader
//! queued behind a preempted writer would wait for as long as the scheduler
//! keeps that writer off the CPU. So the table is split into [`STRIPES`]
//! independently locked stripes of immutable `Arc<GpuView>` snapshots. The
//! writer builds each new view outside every lock and then only swaps
//! pointers under one stripe's write lock (a few hash inserts); readers clone
//! an `Arc` under a read lock and format the response with no lock held.
//!
//! Beside the stripes the publisher keeps the two orders list pages are
//! read in ([`Ranked`], by risk and by id), updated row by row right after
//! each stripe's swap under their own lock, so a ranked page never sorts
//! the fleet.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use features::GpuId;
use features::hash::FxBuild;

use crate::assess::Assessment;
pub use crate::gpu_view::{GpuView, HISTORY_LEN, HISTORY_STEP_MS};
pub use crate::risk_index::Order;
use crate::risk_index::Ranked;

/// Independently locked parts of the table. 64 keeps a stripe at ~1,600
/// GPUs of a 100,000-GPU fleet, so a writer's swap of one batch's share is
/// microseconds, and a reader of one GPU meets a writer only 1 time in 64.
pub const STRIPES: usize = 64;

type Stripe = HashMap<GpuId, Arc<GpuView>>;

/// The per-GPU views, striped by GPU id.
#[derive(Debug)]
pub struct RiskTable {
    stripes: Box<[RwLock<Stripe>]>,
    /// Serializes publishers, so the read-build-swap of one batch cannot
    /// interleave with another's; readers never take it.
    writer: Mutex<()>,
    /// The list orders; written per stripe swap, read per page.
    ranked: RwLock<Ranked>,
}

impl Default for RiskTable {
    fn default() -> Self {
        RiskTable {
            stripes: (0..STRIPES).map(|_| RwLock::default()).collect(),
            writer: Mutex::new(()),
            ranked: RwLock::default(),
        }
    }
}

/// A stripe whose lock was poisoned (a thread panicked while writing it).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("risk table lock poisoned")]
pub struct Poisoned;

fn stripe_of(gpu: &str) -> usize {
    // FxHash mixes into the high bits; the stripe maps hash with their own
    // (random) state, so sharing the top bits within a stripe costs nothing.
    (FxBuild::default().hash_one(gpu) >> (64 - STRIPES.trailing_zeros())) as usize
}

impl RiskTable {
    fn read(&self, i: usize) -> Result<RwLockReadGuard<'_, Stripe>, Poisoned> {
        self.stripes[i].read().map_err(|_| Poisoned)
    }

    /// One GPU's current view.
    pub fn get(&self, gpu: &str) -> Result<Option<Arc<GpuView>>, Poisoned> {
        Ok(self.read(stripe_of(gpu))?.get(gpu).cloned())
    }

    /// GPUs in the table.
    pub fn len(&self) -> Result<usize, Poisoned> {
        Ok(self.ranked.read().map_err(|_| Poisoned)?.len())
    }

    /// One page of the views in `order` that pass `keep` (all when none),
    /// and how many pass: walks `offset + limit` entries of the kept
    /// order (every entry when filtered), never sorts.
    pub fn page(
        &self,
        order: Order,
        keep: Option<&dyn Fn(&GpuView) -> bool>,
        offset: usize,
        limit: usize,
    ) -> Result<(usize, Vec<Arc<GpuView>>), Poisoned> {
        let ranked = self.ranked.read().map_err(|_| Poisoned)?;
        Ok(ranked.page(order, keep, offset, limit))
    }

    /// Removes GPUs from the table and its orders (eviction).
    pub fn remove(&self, gpus: &[GpuId]) -> Result<(), Poisoned> {
        let _writer = self.writer.lock().map_err(|_| Poisoned)?;
        let mut gone = Vec::new();
        for id in gpus {
            let old = self.stripes[stripe_of(id)]
                .write()
                .map_err(|_| Poisoned)?
                .remove(id);
            if let Some(old) = old {
                gone.push((id, old));
            }
        }
        let mut ranked = self.ranked.write().map_err(|_| Poisoned)?;
        for (id, old) in &gone {
            ranked.remove(id, old);
        }
        Ok(())
    }

    pub fn is_empty(&self) -> Result<bool, Poisoned> {
        Ok(self.len()? == 0)
    }

    /// Every GPU's current view, copied out stripe by stripe (each stripe
    /// is consistent in itself; a batch being published may be half in).
    pub fn views(&self) -> Result<Vec<Arc<GpuView>>, Poisoned> {
        let mut out = Vec::new();
        for i in 0..self.stripes.len() {
            out.extend(self.read(i)?.values().cloned());
        }
        Ok(out)
    }

    /// Calls `f` on every view, holding one stripe's read lock at a time.
    pub fn for_each(&self, mut f: impl FnMut(&GpuId, &GpuView)) -> Result<(), Poisoned> {
        for i in 0..self.stripes.len() {
            for (id, v) in self.read(i)?.iter() {
                f(id, v);
            }
        }
        Ok(())
    }

    /// Publishes a batch of assessments (in order: a GPU's later one wins).
    pub fn publish(&self, batch: &[Assessment]) -> Result<(), Poisoned> {
        if batch.is_empty() {
            return Ok(());
        }
        let _writer = self.writer.lock().map_err(|_| Poisoned)?;
        let mut by_stripe: Vec<(usize, usize)> = batch
            .iter()
            .enumerate()
            .map(|(k, a)| (stripe_of(&a.gpu), k))
            .collect();
        // Stable: a GPU's assessments stay in batch order within its stripe.
        by_stripe.sort_by_key(|&(s, _)| s);
        // One new view per GPU and batch, advanced in place through that
        // GPU's assessments in batch order.
        let mut built: HashMap<GpuId, GpuView> = HashMap::new();
        // (id, replaced view, new view) of one stripe, for the orders; the
        // replaced views are dropped after the locks are released.
        let mut swapped: Vec<(GpuId, Option<Arc<GpuView>>, Arc<GpuView>)> = Vec::new();
        for group in by_stripe.chunk_by(|x, y| x.0 == y.0) {
            let s = group[0].0;
            {
                // Old views: read, never held while the new ones are swapped in.
                let stripe = self.read(s)?;
                for &(_, k) in group {
                    let a = &batch[k];
                    match built.get_mut(&a.gpu) {
                        Some(v) => v.advance(a),
                        None => {
                            let v = match stripe.get(&a.gpu) {
                                Some(old) => {
                                    let mut v = GpuView::clone(old);
                                    v.advance(a);
                                    v
                                }
                                None => GpuView::first(a),
                            };
                            built.insert(a.gpu.clone(), v);
                        }
                    }
                }
            }
            {
                let mut stripe = self.stripes[s].write().map_err(|_| Poisoned)?;
                for (id, v) in built.drain() {
                    let v = Arc::new(v);
                    let old = stripe.insert(id.clone(), v.clone());
                    swapped.push((id, old, v));
                }
            }
            let mut ranked = self.ranked.write().map_err(|_| Poisoned)?;
            for (id, old, v) in &swapped {
                ranked.set(id, old.as_deref(), v);
            }
            drop(ranked);
            swapped.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assess::HealthState;

    fn assessment(gpu: &str, risk: f64, ts_ms: i64, state: HealthState) -> Assessment {
        Assessment {
            ts_ms,
            gpu: gpu.into(),
            topo: Default::default(),
            risk,
            state,
            kind: crate::assess::Kind::HbmEccTrend,
            components: [0.0; crate::assess::KINDS],
            anomaly_grade: 0.0,
            eta_hours: None,
            reasons: Vec::new(),
            confirmed: 0,
        }
    }

    #[test]
    fn later_assessments_win_and_history_keeps_one_point_per_step() {
        let t = RiskTable::default();
        let h = HealthState::Healthy;
        t.publish(&[
            assessment("GPU-a", 0.1, 0, h),
            assessment("GPU-b", 0.2, 0, h),
            assessment("GPU-a", 0.5, 60_000, h),
        ])
        .expect("publish");
        t.publish(&[assessment("GPU-a", 0.3, HISTORY_STEP_MS, h)])
            .expect("publish");
        t.publish(&[assessment(
            "GPU-a",
            0.0,
            HISTORY_STEP_MS + 1,
            HealthState::Silent,
        )])
        .expect("publish");
        let a = t.get("GPU-a").expect("lock").expect("GPU-a");
        assert_eq!(a.latest.risk, 0.0);
        assert_eq!(a.last_seen_ms, HISTORY_STEP_MS, "silent is not seen");
        assert_eq!(
            a.history.iter().copied().collect::<Vec<_>>(),
            vec![(0, 0.5), (HISTORY_STEP_MS, 0.3)],
            "the step's highest risk"
        );
        assert_eq!(t.len().expect("lock"), 2);
        assert!(t.get("GPU-z").expect("lock").is_none());
    }

    #[test]
    fn history_is_bounded_and_views_cover_every_stripe() {
        let t = RiskTable::default();
        for step in 0..(HISTORY_LEN as i64 + 10) {
            let batch: Vec<Assessment> = (0..500)
                .map(|g| {
                    assessment(
                        &format!("GPU-{g}"),
                        0.1,
                        step * HISTORY_STEP_MS,
                        HealthState::Healthy,
                    )
                })
                .collect();
            t.publish(&batch).expect("publish");
        }
        let views = t.views().expect("lock");
        assert_eq!(views.len(), 500);
        assert!(views.iter().all(|v| v.history.len() == HISTORY_LEN));
        let mut n = 0;
        t.for_each(|_, _| n += 1).expect("lock");
        assert_eq!(n, 500);
        let used = (0..500)
            .map(|g| stripe_of(&format!("GPU-{g}")))
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(used.len(), STRIPES, "GPUs spread over every stripe");
    }

    #[test]
    fn a_reader_holds_a_snapshot_while_the_writer_replaces_it() {
        let t = RiskTable::default();
        t.publish(&[assessment("GPU-a", 0.1, 0, HealthState::Healthy)])
            .expect("publish");
        let before = t.get("GPU-a").expect("lock").expect("GPU-a");
        t.publish(&[assessment("GPU-a", 0.9, 1, HealthState::Failing)])
            .expect("publish");
        assert_eq!(before.latest.risk, 0.1, "a taken snapshot never changes");
        let after = t.get("GPU-a").expect("lock").expect("GPU-a");
        assert_eq!(after.latest.risk, 0.9);
    }
}
