//! Inlet-temperature proxy: the mean temperature of a host's *other* GPUs in
//! the last closed time bucket. Part of the feature stage's expected-value
//! models: a GPU's temperature is judged given its own power and the air its
//! host breathes, so a hot host (failed fan, hot aisle) is not eight GPU
//! anomalies, while one GPU hotter than its neighbours at the same power is.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::peers::slab::KeyedSlab;

/// Running sums of one host's GPU temperatures per bucket.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct HostAgg {
    bucket: i64,
    sum: f64,
    n: u32,
    prev_bucket: i64,
    prev_sum: f64,
    prev_n: u32,
}

/// A GPU's contributions to its host's current and previous bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostSlot {
    /// Host id; `u32::MAX` when the GPU has no host.
    pub host: u32,
    cur: (i64, f32),
    prev: (i64, f32),
}

impl Default for HostSlot {
    fn default() -> Self {
        HostSlot {
            host: u32::MAX,
            cur: (i64::MIN, 0.0),
            prev: (i64::MIN, 0.0),
        }
    }
}

impl HostSlot {
    /// A slot on host `id` with no contribution yet.
    pub fn new(id: u32) -> Self {
        HostSlot {
            host: id,
            ..HostSlot::default()
        }
    }
}

/// Per-host temperature sums for the GPUs one shard owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostTemps {
    hosts: KeyedSlab<Arc<str>, HostAgg>,
    bucket_ms: i64,
}

impl HostTemps {
    /// Buckets of `bucket_ms`.
    pub fn new(bucket_ms: i64) -> Self {
        HostTemps {
            hosts: KeyedSlab::default(),
            bucket_ms,
        }
    }

    /// The id of `host`.
    pub fn resolve(&mut self, host: &Arc<str>) -> u32 {
        self.hosts.resolve(host, HostAgg::default)
    }

    /// Changes when host ids may have been reused.
    pub fn epoch(&self) -> u32 {
        self.hosts.epoch()
    }

    /// Records one GPU's temperature, then returns the mean of the host's
    /// other GPUs over the last closed bucket (NaN when there is none).
    pub fn push_and_proxy(&mut self, slot: &mut HostSlot, ts_ms: i64, temp: f32) -> f32 {
        let b = ts_ms.div_euclid(self.bucket_ms);
        let Some(h) = self.hosts.get_mut(slot.host) else {
            return f32::NAN;
        };
        if b > h.bucket {
            if h.n > 0 {
                h.prev_bucket = h.bucket;
                h.prev_sum = h.sum;
                h.prev_n = h.n;
            }
            h.bucket = b;
            h.sum = 0.0;
            h.n = 0;
        }
        if temp.is_finite() {
            if slot.cur.0 == h.bucket {
                h.sum += f64::from(temp) - f64::from(slot.cur.1);
                slot.cur.1 = temp;
            } else {
                slot.prev = slot.cur;
                slot.cur = (h.bucket, temp);
                h.sum += f64::from(temp);
                h.n += 1;
            }
        }
        if h.prev_n == 0 || h.prev_bucket < b - 2 {
            return f32::NAN;
        }
        let own = [slot.prev, slot.cur]
            .into_iter()
            .find(|(bucket, _)| *bucket == h.prev_bucket)
            .map(|(_, v)| v);
        let (sum, n) = match own {
            Some(v) => (h.prev_sum - f64::from(v), h.prev_n - 1),
            None => (h.prev_sum, h.prev_n),
        };
        if n == 0 {
            f32::NAN
        } else {
            (sum / f64::from(n)) as f32
        }
    }

    /// Drops hosts with no sample for `idle_buckets` buckets.
    pub fn gc(&mut self, now_ms: i64, idle_buckets: i64) -> usize {
        let b = now_ms.div_euclid(self.bucket_ms);
        self.hosts.retain(|_, h| h.bucket >= b - idle_buckets)
    }

    /// Approximate heap bytes held.
    pub fn approx_heap_bytes(&self) -> usize {
        self.hosts.table_heap_bytes() + self.hosts.iter().map(|(k, _)| k.len() + 16).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_is_the_mean_of_the_other_gpus() {
        let mut h = HostTemps::new(60_000);
        let id = h.resolve(&"node-1".into());
        let mut slots = [HostSlot::new(id); 3];
        for (i, s) in slots.iter_mut().enumerate() {
            assert!(h.push_and_proxy(s, 0, 40.0 + 10.0 * i as f32).is_nan());
        }
        // Next bucket: GPU 0 sees the mean of GPUs 1 and 2 (50, 60).
        assert_eq!(h.push_and_proxy(&mut slots[0], 60_000, 99.0), 55.0);
        assert_eq!(h.push_and_proxy(&mut slots[2], 60_000, 99.0), 45.0);
        let mut alone = HostSlot::new(h.resolve(&"node-2".into()));
        h.push_and_proxy(&mut alone, 0, 40.0);
        assert!(h.push_and_proxy(&mut alone, 60_000, 40.0).is_nan());
    }
}
