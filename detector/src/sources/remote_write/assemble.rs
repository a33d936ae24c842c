//! Reassembles GPU samples split across remote-write requests. Prometheus
//! shards its queue by series, so the values one scrape read from one GPU
//! (one series per field) reach forewarn in several requests, in any
//! order, seconds apart. Each request's part becomes a partial sample;
//! the feature stage would drop every part after the first as a duplicate
//! of the same GPU and time. [`Assembler`] merges the parts of one
//! (timestamp, GPU) and lets a group go once event time (the newest
//! timestamp received) has moved `wait` past it, or once `wait` has passed
//! on the wall clock with nothing newer arriving; a part later than that
//! starts a new group (and is dropped downstream as a duplicate).

use std::collections::BTreeMap;

use features::{GpuId, Sample};

/// Groups waiting, at most: past it the oldest go early. A 100,000-GPU
/// fleet scraped every 30 s keeps well under this with a 15 s wait.
const MAX_PENDING: usize = 200_000;

pub struct Assembler {
    wait_ms: i64,
    watermark: i64,
    pending: BTreeMap<(i64, GpuId), Sample>,
}

impl Assembler {
    pub fn new(wait_ms: i64) -> Self {
        Assembler {
            wait_ms,
            watermark: i64::MIN,
            pending: BTreeMap::new(),
        }
    }

    /// Merges `parts` in; appends the groups now complete to `out`.
    pub fn push(&mut self, parts: Vec<Sample>, wall_ms: i64, out: &mut Vec<Sample>) {
        for part in parts {
            // Event time is judged against the wall clock downstream; a
            // part far in the future must not flush everything early.
            self.watermark = self.watermark.max(part.ts_ms.min(wall_ms));
            match self.pending.entry((part.ts_ms, part.gpu.clone())) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(part);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => merge(o.get_mut(), part),
            }
        }
        self.flush(wall_ms, out);
    }

    /// Appends the groups `wait` behind event time, or behind the wall
    /// clock when nothing newer arrives (call when idle too).
    pub fn flush(&mut self, wall_ms: i64, out: &mut Vec<Sample>) {
        let cut = self
            .watermark
            .max(wall_ms.saturating_sub(self.wait_ms))
            .saturating_sub(self.wait_ms);
        loop {
            let over = self.pending.len() > MAX_PENDING;
            let Some(e) = self.pending.first_entry() else {
                break;
            };
            if e.key().0 >= cut && !over {
                break;
            }
            out.push(e.remove());
        }
    }

    /// Appends everything (shutdown).
    pub fn finish(&mut self, out: &mut Vec<Sample>) {
        out.extend(std::mem::take(&mut self.pending).into_values());
    }

    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// `part`'s values and labels into `into` (first value of a field wins, as
/// within one request).
fn merge(into: &mut Sample, part: Sample) {
    for (field, v) in part.metrics.iter() {
        if into.metrics.get(field).is_none() {
            into.metrics.set(field, v);
        }
    }
    let t = &mut into.topo;
    for (slot, v) in [
        (&mut t.host, part.topo.host),
        (&mut t.model, part.topo.model),
        (&mut t.rack, part.topo.rack),
        (&mut t.cluster, part.topo.cluster),
        (&mut t.job, part.topo.job),
    ] {
        if slot.is_none() {
            *slot = v;
        }
    }
    into.extra.extend(part.extra);
}

#[cfg(test)]
mod tests {
    use super::*;
    use features::Field;

    fn part(gpu: &str, ts: i64, field: Field, v: f64) -> Sample {
        let mut s = Sample::new(gpu, ts);
        s.metrics.set(field, v);
        s
    }

    #[test]
    fn parts_of_one_gpu_and_time_become_one_sample_once_time_moves_on() {
        let mut a = Assembler::new(10_000);
        let mut out = Vec::new();
        // The wall clock just after each push's newest sample.
        let wall = 901_000;
        a.push(
            vec![part("GPU-a", 900_000, Field::GpuTemp, 61.0)],
            wall,
            &mut out,
        );
        a.push(
            vec![
                part("GPU-b", 900_000, Field::GpuTemp, 50.0),
                part("GPU-a", 900_000, Field::PowerUsage, 300.0),
            ],
            wall,
            &mut out,
        );
        assert!(out.is_empty(), "waiting for stragglers");
        a.push(
            vec![part("GPU-a", 911_000, Field::GpuTemp, 62.0)],
            911_000,
            &mut out,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(&*out[0].gpu, "GPU-a");
        assert_eq!(out[0].metrics.get(Field::PowerUsage), Some(300.0));
        assert_eq!(out[0].metrics.get(Field::GpuTemp), Some(61.0));
        assert_eq!(a.pending(), 1);
        // Nothing newer: the wall clock lets it go.
        a.flush(911_000 + 20_001, &mut out);
        assert_eq!(out.len(), 3);
    }
}
