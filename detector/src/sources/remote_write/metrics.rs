//! The remote-write receiver's own counters, appended to `/metrics`
//! through the metrics page's hook for source metrics
//! (`crate::metrics::SourceMetrics`).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

pub const REQUESTS: &str = "forewarn_remote_write_requests_total";
pub const VALUES: &str = "forewarn_remote_write_values_total";

/// Requests by answer and values received.
#[derive(Debug, Default)]
pub struct RemoteWriteMetrics {
    by_code: Mutex<BTreeMap<u16, u64>>,
    values: AtomicU64,
}

impl RemoteWriteMetrics {
    /// A request answered with `code`, holding `values` values.
    pub fn answered(&self, code: u16, values: usize) {
        if let Ok(mut m) = self.by_code.lock() {
            *m.entry(code).or_default() += 1;
        }
        self.values.fetch_add(values as u64, Relaxed);
    }

    /// Requests answered with `code` so far.
    pub fn requests(&self, code: u16) -> u64 {
        self.by_code
            .lock()
            .map(|m| m.get(&code).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

impl crate::metrics::SourceMetrics for RemoteWriteMetrics {
    fn render(&self) -> String {
        let reg = Registry::new();
        if let Ok(c) = IntCounterVec::new(
            Opts::new(
                REQUESTS,
                "Remote-write requests, by HTTP status answered (503: queue full, retried by the sender; 400: undecodable, dropped).",
            ),
            &["code"],
        ) {
            if let Ok(m) = self.by_code.lock() {
                for (code, n) in m.iter() {
                    c.with_label_values(&[code.to_string().as_str()]).inc_by(*n);
                }
            }
            let _ = reg.register(Box::new(c));
        }
        if let Ok(c) = IntCounter::new(
            VALUES,
            "Values in remote-write requests (every answer; staleness markers included).",
        ) {
            c.inc_by(self.values.load(Relaxed));
            let _ = reg.register(Box::new(c));
        }
        let mut s = String::new();
        let _ = prometheus::TextEncoder::new().encode_utf8(&reg.gather(), &mut s);
        s
    }
}
