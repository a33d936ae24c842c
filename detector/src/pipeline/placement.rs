//! Which shard thread runs a GPU on the instance-wide path (files, the
//! simulator, backtests, Kafka without a partition store): the GPUs of one
//! host together, as partition units keyed by rack or host have them.
//!
//! Host-peer features (a GPU's temperature against its host mates', the
//! host's air) are computed inside a shard: a GPU hashed away from every
//! host mate has no peers and its thermal tests never run (with eight
//! shards, 39 % of lone GPUs in an 8-GPU host's worth). So a GPU goes to
//! the shard of its host label (FNV of the label), or of its UUID when it
//! has none, and stays there: the first placement sticks for as long as
//! the GPU is tracked, so a relabelled host or a host label that appears
//! later never splits one GPU's state over two shards. A restored
//! pipeline places each GPU where its restored state is.

use std::collections::HashMap;

use features::hash::FxBuild;
use features::{GpuId, Sample};

use super::shard::shard_of;

/// Sticky GPU → shard placement.
pub(super) struct Placement {
    shards: usize,
    of: HashMap<GpuId, u32, FxBuild>,
}

impl Placement {
    /// Placement over `shards` threads, each GPU of `restored` (shard
    /// index, GPU) where its state is.
    pub(super) fn new(shards: usize, restored: impl IntoIterator<Item = (usize, GpuId)>) -> Self {
        let of = restored.into_iter().map(|(i, g)| (g, i as u32)).collect();
        Placement {
            shards: shards.max(1),
            of,
        }
    }

    /// The shard of `s`'s GPU (placing it on first sight).
    pub(super) fn shard(&mut self, s: &Sample) -> usize {
        if let Some(&i) = self.of.get(&s.gpu) {
            return i as usize;
        }
        let i = match &s.topo.host {
            Some(h) => shard_of(h, self.shards),
            None => shard_of(&s.gpu, self.shards),
        };
        self.of.insert(s.gpu.clone(), i as u32);
        i
    }

    /// The shard that holds `gpu`, which is forgotten here.
    pub(super) fn evict(&mut self, gpu: &str) -> usize {
        self.of
            .remove(gpu)
            .map_or_else(|| shard_of(gpu, self.shards), |i| i as usize)
    }

    /// GPUs placed.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.of.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(gpu: &str, host: Option<&str>) -> Sample {
        let mut s = Sample::new(gpu, 0);
        s.topo.host = host.map(Into::into);
        s
    }

    #[test]
    fn a_hosts_gpus_share_a_shard_and_keep_it() {
        let mut p = Placement::new(8, []);
        let gpus: Vec<String> = (0..8).map(|i| format!("GPU-{i:08x}")).collect();
        let at: Vec<usize> = gpus
            .iter()
            .map(|g| p.shard(&sample(g, Some("node-0007"))))
            .collect();
        assert!(at.iter().all(|i| *i == at[0]), "{at:?}");
        // Hashed by UUID they would not be together.
        let hashed: Vec<usize> = gpus.iter().map(|g| shard_of(g, 8)).collect();
        assert!(hashed.iter().any(|i| *i != hashed[0]), "{hashed:?}");
        // A host label that changes later does not move a tracked GPU.
        assert_eq!(p.shard(&sample(&gpus[0], Some("node-0999"))), at[0]);
        assert_eq!(p.shard(&sample(&gpus[0], None)), at[0]);
        assert_eq!(p.evict(&gpus[0]), at[0]);
        assert_eq!(p.len(), 7);
    }

    #[test]
    fn restored_gpus_stay_with_their_state_and_unlabelled_ones_hash_by_uuid() {
        let mut p = Placement::new(4, [(3, GpuId::from("GPU-a"))]);
        assert_eq!(p.shard(&sample("GPU-a", Some("node-1"))), 3);
        assert_eq!(p.shard(&sample("GPU-b", None)), shard_of("GPU-b", 4));
        assert_eq!(p.evict("GPU-unknown"), shard_of("GPU-unknown", 4));
    }
}
