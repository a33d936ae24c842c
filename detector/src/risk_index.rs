//! The orders `GET /v1/gpus` pages through, kept by the publisher of the
//! risk table ([`crate::risk_table`]) as rows change: by risk (highest
//! first, then GPU id) and by GPU id. A ranked page walks the first
//! `offset + limit` entries instead of copying and sorting the fleet per
//! request (issue 26: that sort made 20 dashboards starve `/healthz` at
//! 100,000 GPUs). Each entry holds the same `Arc<GpuView>` as the table,
//! so a page is pointer copies.
//!
//! The order by risk is exactly the one the handler used to sort by:
//! `f64::total_cmp` descending, ties by the id's string order.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use features::GpuId;

use crate::gpu_view::GpuView;

/// How a page is ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Highest risk first, ties by GPU id.
    Risk,
    /// By GPU id.
    Gpu,
}

/// A position in the risk order.
#[derive(Debug, Clone)]
struct RiskKey {
    risk: f64,
    gpu: GpuId,
}

impl Ord for RiskKey {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .risk
            .total_cmp(&self.risk)
            .then_with(|| self.gpu.cmp(&other.gpu))
    }
}

impl PartialOrd for RiskKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for RiskKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for RiskKey {}

/// Both orders of the table's views.
#[derive(Debug, Default)]
pub struct Ranked {
    by_risk: BTreeMap<RiskKey, Arc<GpuView>>,
    by_gpu: BTreeMap<GpuId, Arc<GpuView>>,
}

impl Ranked {
    pub fn len(&self) -> usize {
        self.by_gpu.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_gpu.is_empty()
    }

    /// `id`'s view is now `new` (it was `old`).
    pub fn set(&mut self, id: &GpuId, old: Option<&GpuView>, new: &Arc<GpuView>) {
        let risk = new.latest.risk;
        let key = RiskKey {
            risk,
            gpu: id.clone(),
        };
        match old {
            // Unchanged risk (most updates): the entry stays in place.
            Some(o) if o.latest.risk.to_bits() == risk.to_bits() => {
                match self.by_risk.get_mut(&key) {
                    Some(slot) => *slot = new.clone(),
                    None => {
                        self.by_risk.insert(key, new.clone());
                    }
                }
            }
            Some(o) => {
                self.by_risk.remove(&RiskKey {
                    risk: o.latest.risk,
                    gpu: id.clone(),
                });
                self.by_risk.insert(key, new.clone());
            }
            None => {
                self.by_risk.insert(key, new.clone());
            }
        }
        self.by_gpu.insert(id.clone(), new.clone());
    }

    /// `id` is gone (its last view was `old`).
    pub fn remove(&mut self, id: &GpuId, old: &GpuView) {
        self.by_risk.remove(&RiskKey {
            risk: old.latest.risk,
            gpu: id.clone(),
        });
        self.by_gpu.remove(id);
    }

    /// The views in `order` passing `keep` (all when none): how many
    /// pass, and those from `offset` on, at most `limit`. Without a
    /// filter this walks `offset + limit` entries; with one, every entry
    /// is tested (to count them) and none is copied but the page.
    pub fn page(
        &self,
        order: Order,
        keep: Option<&dyn Fn(&GpuView) -> bool>,
        offset: usize,
        limit: usize,
    ) -> (usize, Vec<Arc<GpuView>>) {
        let views: Box<dyn Iterator<Item = &Arc<GpuView>>> = match order {
            Order::Risk => Box::new(self.by_risk.values()),
            Order::Gpu => Box::new(self.by_gpu.values()),
        };
        match keep {
            None => {
                let page = views.skip(offset).take(limit).cloned().collect();
                (self.len(), page)
            }
            Some(keep) => {
                let mut total = 0;
                let mut page = Vec::with_capacity(limit.min(1_024));
                for v in views.filter(|v| keep(v)) {
                    if total >= offset && page.len() < limit {
                        page.push(v.clone());
                    }
                    total += 1;
                }
                (total, page)
            }
        }
    }
}
