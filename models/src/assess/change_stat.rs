//! One GPU's state for one signal of the change tests (part of
//! [`super`]): the open bucket, the baselines (lagged for the counters),
//! the dispersion, the CUSUM statistics and the temperature's per-phase
//! levels and own fit. `bucket` closes buckets on it, `fit` and `peers`
//! keep the temperature's parts; checkpoints serialise it (fields added
//! since take their defaults).

use serde::{Deserialize, Serialize};

/// One signal of one GPU.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct Stat {
    pub(super) bucket: i64,
    /// The open bucket: sum of values (counters: samples with errors),
    /// rows, hours covered.
    pub(super) sum: f64,
    /// Counters: the open bucket's errors (the reason's number; the test
    /// reads `sum`).
    #[serde(default)]
    pub(super) errors: f64,
    pub(super) n: u32,
    pub(super) hours: f64,
    /// Baseline: decayed sums (counts and hours; or mean and variance of
    /// bucket means).
    pub(super) base_a: f64,
    pub(super) base_b: f64,
    pub(super) base_h: f64,
    /// The CUSUM statistic and when it last rose from 0.
    pub(super) s: f64,
    pub(super) since_ms: i64,
    /// Counts (samples with errors; or buckets) since it rose, for the
    /// reason.
    pub(super) excess: f64,
    /// Counters: errors since it rose, for the reason.
    #[serde(default)]
    pub(super) excess_errors: f64,
    /// Gauges: the previous bucket's standardised value and the lag-1
    /// autocorrelation of the standardised values.
    pub(super) prev_u: f64,
    pub(super) lag1: f64,
    /// Gauges: the recent mean and mean square of the standardised
    /// values (with `lag1`, the autocorrelation around the recent level).
    #[serde(default)]
    pub(super) u1: f64,
    #[serde(default)]
    pub(super) u2: f64,
    /// Counters: buckets learned from and their dispersion (var / mean).
    pub(super) nb: u32,
    pub(super) disp: f64,
    /// Counters: decayed sums of squared deviations and of expected
    /// counts, whose ratio (with a prior) is the dispersion.
    #[serde(default)]
    pub(super) dev2: f64,
    #[serde(default)]
    pub(super) expected: f64,
    /// Counters: the same decayed sum of the counts observed (the link
    /// counters' dispersion divides by the larger of the two; 0 in a
    /// snapshot of an older build, where the expected stand in).
    #[serde(default)]
    pub(super) observed: f64,
    /// Counters: the baseline's (counts, hours) as of the last two
    /// snapshots, two hours apart ([`super::bucket::snapshot`]), and when
    /// the newer was taken: the test compares with the older, so the last
    /// 2–4 h (a precursor's first rise) are not yet part of what it calls
    /// usual.
    #[serde(default)]
    pub(super) lagged: [(f64, f64); 2],
    #[serde(default)]
    pub(super) lagged_at_ms: i64,
    /// Counters: the dispersion as of the same two snapshots (0: none
    /// taken yet, the current one stands in). The test divides by the
    /// older, like the rate: a precursor's first bucket of errors on a
    /// quiet GPU is a huge squared deviation, and learned at once it
    /// divided the next buckets' evidence by tens.
    #[serde(default)]
    pub(super) lagged_disp: [f64; 2],
    /// Counters of a GPU that joined a running fleet (a replacement):
    /// judged from its first bucket against its SKU's background, with no
    /// warm-up of its own (see [`super::ChangeDetector::assess`]).
    #[serde(default)]
    pub(super) newcomer: bool,
    /// The temperature: the open bucket's workload phase
    /// ([`super::MIXED`] when it changed within), and per phase the mean,
    /// variance and hours of the bucket means.
    pub(super) phase: u8,
    pub(super) phases: [(f64, f64, f64); 4],
    /// The thermal peer signal: the open bucket's group, and the bucket
    /// waiting for its group's median (bucket, mean, group, phase).
    #[serde(default)]
    pub(super) group: Option<u64>,
    #[serde(default)]
    pub(super) peer_prev: Option<(i64, f64, u64, u8)>,
    /// Gauges: the sum of the judged buckets' departures from their
    /// phase's usual level since the statistic last rose (with `excess`,
    /// the buckets, their mean departure: the reason's number).
    #[serde(default)]
    pub(super) dev_sum: f64,
    /// Counters: the slow and the fast alternative's CUSUM statistics
    /// (`s` is the largest of these and `steep` less ln 3).
    #[serde(default)]
    pub(super) pair: [f64; 2],
    /// Counters: the steep alternative's CUSUM statistic.
    #[serde(default)]
    pub(super) steep: f64,
    /// The temperature: the GPU's own model of its load and air, whose
    /// residual the test judges ([`super::fit`]).
    #[serde(default)]
    pub(super) fit: Option<Box<super::fit::ThermalFit>>,
}
