//! Per-target scrape metrics, appended to `/metrics` through the metrics
//! page's hook for source metrics (`crate::metrics::SourceMetrics`). A
//! target removed from the `file_sd` file leaves the page with it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec, Opts, Registry};

pub const TARGET_UP: &str = "forewarn_scrape_target_up";
pub const DURATION: &str = "forewarn_scrape_duration_seconds";
pub const SAMPLES: &str = "forewarn_scrape_samples";
pub const FAILURES: &str = "forewarn_scrape_failures_total";

#[derive(Debug, Default, Clone)]
struct Row {
    /// None until the first scrape ended.
    up: Option<bool>,
    seconds: f64,
    samples: usize,
    failures: u64,
}

/// The targets' last scrapes.
#[derive(Debug, Default)]
pub struct ScrapeMetrics {
    rows: Mutex<BTreeMap<String, Row>>,
}

impl ScrapeMetrics {
    fn with(&self, target: &str, f: impl FnOnce(&mut Row)) {
        if let Ok(mut m) = self.rows.lock() {
            f(m.entry(target.to_owned()).or_default());
        }
    }

    /// Keeps only these targets (others were removed from `file_sd`).
    pub fn retain<'a>(&self, targets: impl Iterator<Item = &'a str>) {
        let keep: std::collections::BTreeSet<&str> = targets.collect();
        if let Ok(mut m) = self.rows.lock() {
            m.retain(|k, _| keep.contains(k.as_str()));
            for k in keep {
                m.entry(k.to_owned()).or_default();
            }
        }
    }

    pub fn succeeded(&self, target: &str, took: Duration, samples: usize) {
        self.with(target, |r| {
            if r.up == Some(false) {
                tracing::info!(target, "scrape target answers again");
            }
            r.up = Some(true);
            r.seconds = took.as_secs_f64();
            r.samples = samples;
        });
    }

    pub fn failed(&self, target: &str, took: Duration, why: &str) {
        self.with(target, |r| {
            if r.up != Some(false) {
                tracing::warn!(
                    target,
                    error = why,
                    "scrape target down: its GPUs are silent from now on"
                );
            }
            r.up = Some(false);
            r.seconds = took.as_secs_f64();
            r.samples = 0;
            r.failures += 1;
        });
    }

    /// Whether `target`'s last scrape worked (None: not scraped yet).
    pub fn up(&self, target: &str) -> Option<bool> {
        self.rows.lock().ok()?.get(target)?.up
    }
}

impl crate::metrics::SourceMetrics for ScrapeMetrics {
    fn render(&self) -> String {
        let Ok(rows) = self.rows.lock().map(|m| m.clone()) else {
            return String::new();
        };
        let reg = Registry::new();
        let labels = &["target"];
        if let Ok(g) = IntGaugeVec::new(
            Opts::new(
                TARGET_UP,
                "1 if the target's last scrape worked, 0 if it failed (its GPUs then fall silent).",
            ),
            labels,
        ) {
            for (t, r) in rows.iter().filter(|(_, r)| r.up.is_some()) {
                g.with_label_values(&[t.as_str()])
                    .set(i64::from(r.up == Some(true)));
            }
            let _ = reg.register(Box::new(g));
        }
        if let Ok(g) = GaugeVec::new(
            Opts::new(DURATION, "Duration of the target's last scrape."),
            labels,
        ) {
            for (t, r) in &rows {
                g.with_label_values(&[t.as_str()]).set(r.seconds);
            }
            let _ = reg.register(Box::new(g));
        }
        if let Ok(g) = IntGaugeVec::new(
            Opts::new(
                SAMPLES,
                "GPU samples decoded from the target's last scrape.",
            ),
            labels,
        ) {
            for (t, r) in &rows {
                g.with_label_values(&[t.as_str()])
                    .set(i64::try_from(r.samples).unwrap_or(i64::MAX));
            }
            let _ = reg.register(Box::new(g));
        }
        if let Ok(c) =
            IntCounterVec::new(Opts::new(FAILURES, "Failed scrapes of the target."), labels)
        {
            for (t, r) in &rows {
                c.with_label_values(&[t.as_str()]).inc_by(r.failures);
            }
            let _ = reg.register(Box::new(c));
        }
        let mut s = String::new();
        let _ = prometheus::TextEncoder::new().encode_utf8(&reg.gather(), &mut s);
        s
    }
}
