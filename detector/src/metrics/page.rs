//! The parts of a `/metrics` page: latency histograms with fixed buckets,
//! and one scrape's registry with helpers for the plain counter and gauge
//! families [`super::Metrics::render`] writes.

use prometheus::core::Collector;
use prometheus::{
    GaugeVec, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

/// Upper bounds (seconds) of the latency histograms: 0.5 ms to 10 s.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram with the fixed [`BUCKETS`].
#[derive(Clone)]
pub struct Histogram(pub(super) prometheus::Histogram);

impl Histogram {
    pub(super) fn new(name: &str, help: &str) -> Self {
        let opts = HistogramOpts::new(name, help).buckets(BUCKETS.to_vec());
        // Only fails on an invalid name or buckets, both constants here.
        let h = prometheus::Histogram::with_opts(opts)
            .unwrap_or_else(|e| panic!("histogram {name}: {e}"));
        Histogram(h)
    }

    pub fn observe(&self, seconds: f64) {
        self.0.observe(seconds);
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.0.get_sample_count())
            .finish()
    }
}

/// One scrape's registry. Registration only fails on a clash of names or
/// an invalid one, i.e. a bug in this file: logged, and the metric left
/// out rather than failing the scrape.
pub(super) struct Page(pub(super) Registry);

impl Page {
    pub(super) fn add(&self, c: impl Collector + 'static) {
        if let Err(e) = self.0.register(Box::new(c)) {
            tracing::error!(error = %e, "metric not registered");
        }
    }

    pub(super) fn counter(&self, name: &str, help: &str, v: u64) {
        if let Ok(c) = IntCounter::new(name, help) {
            c.inc_by(v);
            self.add(c);
        }
    }

    pub(super) fn gauge(&self, name: &str, help: &str, v: i64) {
        if let Ok(g) = IntGauge::new(name, help) {
            g.set(v);
            self.add(g);
        }
    }

    /// A counter family with one label, from `(label value, count)` rows.
    pub(super) fn counters<'a>(
        &self,
        name: &str,
        help: &str,
        label: &str,
        rows: impl IntoIterator<Item = (&'a str, u64)>,
    ) {
        if let Ok(c) = IntCounterVec::new(Opts::new(name, help), &[label]) {
            for (value, n) in rows {
                c.with_label_values(&[value]).inc_by(n);
            }
            self.add(c);
        }
    }

    /// A gauge family with one label.
    pub(super) fn gauges<'a>(
        &self,
        name: &str,
        help: &str,
        label: &str,
        rows: impl IntoIterator<Item = (&'a str, i64)>,
    ) {
        if let Ok(g) = IntGaugeVec::new(Opts::new(name, help), &[label]) {
            for (value, n) in rows {
                g.with_label_values(&[value]).set(n);
            }
            self.add(g);
        }
    }

    /// A gauge family with one label and fractional values.
    pub(super) fn float_gauges<'a>(
        &self,
        name: &str,
        help: &str,
        label: &str,
        rows: impl IntoIterator<Item = (&'a str, f64)>,
    ) {
        if let Ok(g) = GaugeVec::new(Opts::new(name, help), &[label]) {
            for (value, v) in rows {
                g.with_label_values(&[value]).set(v);
            }
            self.add(g);
        }
    }

    pub(super) fn text(&self) -> String {
        let mut s = String::new();
        if let Err(e) = prometheus::TextEncoder::new().encode_utf8(&self.0.gather(), &mut s) {
            tracing::error!(error = %e, "encoding metrics");
        }
        s
    }
}
