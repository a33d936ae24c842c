//! Per-partition figures of the Kafka source with partition-aligned state
//! (issue #31): samples taken in from each topic-partition, and for each
//! partition this instance holds, its newest checkpoint's size and how
//! long its last restore took. Rendered by [`super::Metrics::render`];
//! the consumer lag per partition sits beside them.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::page::Page;

pub const PARTITION_SAMPLES: &str = "forewarn_partition_samples_total";
pub const PARTITION_CHECKPOINT_BYTES: &str = "forewarn_partition_checkpoint_bytes";
pub const PARTITION_RESTORE_SECONDS: &str = "forewarn_partition_restore_seconds";

/// A topic-partition's `partition` label value: `topic/p`.
pub fn label((topic, partition): &crate::checkpoint::PartitionKey) -> String {
    format!("{topic}/{partition}")
}

#[derive(Debug, Default, Clone, Copy)]
struct Figures {
    samples: u64,
    checkpoint_bytes: Option<u64>,
    restore_s: Option<f64>,
}

/// Keyed by `topic/partition`, as the lag gauge.
#[derive(Debug, Default)]
pub struct PartitionFigures(Mutex<BTreeMap<String, Figures>>);

impl PartitionFigures {
    fn with(&self, f: impl FnOnce(&mut BTreeMap<String, Figures>)) {
        if let Ok(mut m) = self.0.lock() {
            f(&mut m);
        }
    }

    /// Samples handed to the pipeline, per partition.
    pub fn samples(&self, rows: impl IntoIterator<Item = (String, u64)>) {
        self.with(|m| {
            for (k, n) in rows {
                m.entry(k).or_default().samples += n;
            }
        });
    }

    /// A checkpoint of `partition` was written, `bytes` long.
    pub fn checkpoint(&self, partition: String, bytes: u64) {
        self.with(|m| m.entry(partition).or_default().checkpoint_bytes = Some(bytes));
    }

    /// `partition` was taken over; restoring (or starting) it took `seconds`.
    pub fn restored(&self, partition: String, seconds: f64) {
        self.with(|m| m.entry(partition).or_default().restore_s = Some(seconds));
    }

    /// Drops the gauges of every partition but `held` (its sample count
    /// stays: a counter).
    pub fn keep(&self, held: &[String]) {
        self.with(|m| {
            for (k, f) in m.iter_mut() {
                if !held.contains(k) {
                    (f.checkpoint_bytes, f.restore_s) = (None, None);
                }
            }
        });
    }

    pub(super) fn render(&self, p: &Page) {
        let Ok(m) = self.0.lock() else {
            return;
        };
        if m.is_empty() {
            return;
        }
        p.counters(
            PARTITION_SAMPLES,
            "Samples taken in, by topic-partition.",
            "partition",
            m.iter().map(|(k, f)| (k.as_str(), f.samples)),
        );
        p.gauges(
            PARTITION_CHECKPOINT_BYTES,
            "Size of the newest checkpoint of each partition this instance holds.",
            "partition",
            m.iter()
                .filter_map(|(k, f)| Some((k.as_str(), super::gauge(f.checkpoint_bytes?)))),
        );
        p.float_gauges(
            PARTITION_RESTORE_SECONDS,
            "Time the last take-over of each partition this instance holds took to restore its state (or start it fresh).",
            "partition",
            m.iter()
                .filter_map(|(k, f)| Some((k.as_str(), f.restore_s?))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_partition_and_forgets_the_gauges_of_those_let_go() {
        let f = PartitionFigures::default();
        f.samples([("t/0".into(), 5), ("t/1".into(), 2)]);
        f.samples([("t/0".into(), 1)]);
        f.checkpoint("t/0".into(), 1000);
        f.checkpoint("t/1".into(), 900);
        f.restored("t/1".into(), 0.25);
        f.keep(&["t/0".into()]);
        let p = Page(prometheus::Registry::new());
        f.render(&p);
        let text = p.text();
        assert!(
            text.contains("forewarn_partition_samples_total{partition=\"t/0\"} 6"),
            "{text}"
        );
        assert!(
            text.contains("forewarn_partition_samples_total{partition=\"t/1\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("forewarn_partition_checkpoint_bytes{partition=\"t/0\"} 1000"),
            "{text}"
        );
        assert!(
            !text.contains("checkpoint_bytes{partition=\"t/1\"}"),
            "{text}"
        );
        assert!(
            !text.contains("restore_seconds{partition=\"t/1\"}"),
            "{text}"
        );
    }
}
