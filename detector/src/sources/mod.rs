//! Sources of telemetry: files (JSON lines, Parquet, dcgm-exporter text,
//! nvidia-smi CSV), stdin, the built-in simulator, and Kafka. Each yields
//! batches of decoded samples; bad input is counted by reason, written to
//! the dead-letter file with the reason, and never stops the stream.
//!
//! Every source decodes through one [`features::decode::Decoder`] and hands
//! each unit it gave ([`Decoded`]) to [`DeadLetters::record`], so the same
//! bad bytes give the same counters and dead letters in backtest and live.

pub mod file;
pub mod kafka;
pub mod remote_write;
pub mod scrape;
pub mod simulator;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use features::decode::Decoded;
use features::decode::limits::cut;

use crate::state::State;

/// Samples per batch handed to the pipeline.
pub const BATCH: usize = 4096;

/// Where undecodable or refused input goes: a JSON-lines file of
/// `{reason, error, source, payload}`, or nowhere but the counter. A
/// cheap handle: clones share one file and one count, so the source (what
/// cannot be decoded) and the pipeline (what its admission gate or the
/// feature engine refuse) write to the same place.
#[derive(Clone)]
pub struct DeadLetters {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    out: Option<std::io::BufWriter<std::fs::File>>,
    count: u64,
    by_reason: BTreeMap<&'static str, u64>,
}

impl DeadLetters {
    pub fn open(path: Option<&Path>) -> anyhow::Result<Self> {
        let out = match path {
            Some(p) => Some(std::io::BufWriter::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| {
                        anyhow::anyhow!("opening dead-letter file {}: {e}", p.display())
                    })?,
            )),
            None => None,
        };
        Ok(DeadLetters {
            inner: Arc::new(Mutex::new(Inner {
                out,
                count: 0,
                by_reason: BTreeMap::new(),
            })),
        })
    }

    /// Dead letters so far (undecodable and refused).
    pub fn count(&self) -> u64 {
        self.lock().count
    }

    /// Dead letters so far by reason.
    pub fn by_reason(&self) -> BTreeMap<&'static str, u64> {
        self.lock().by_reason.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A writer that panicked mid-line leaves nothing worth refusing.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records every error of one decoded unit: counted by reason and
    /// written as `{reason, error, source, payload}` (the payload cut at
    /// 4 KiB, as lossy UTF-8), `source` being the unit's position.
    pub fn record(&mut self, state: &State, unit: &Decoded<'_>) {
        if unit.errors.is_empty() {
            return;
        }
        let source = unit.position.to_string();
        let payload = &unit.payload[..unit.payload.len().min(4096)];
        let mut inner = self.lock();
        for err in unit.errors {
            state.metrics.decode_error(err.reason());
            tracing::debug!(source = %source, reason = err.reason(), error = %err, "undecodable input");
            inner.write(
                err.reason(),
                &err.to_string(),
                &source,
                &String::from_utf8_lossy(payload),
            );
        }
    }

    /// Records a decoded sample that was refused after decoding (by the
    /// admission gate or the feature engine): the payload names the GPU,
    /// its event time and host, which is what an operator needs to find
    /// the exporter at fault.
    pub fn refused(
        &self,
        reason: &'static str,
        error: &str,
        gpu: &str,
        ts_ms: i64,
        host: Option<&str>,
    ) {
        let payload = serde_json::json!({
            "gpu": cut(gpu, 256),
            "ts_ms": ts_ms,
            "host": host.map(|h| cut(h, 256)),
        });
        self.lock()
            .write(reason, error, "pipeline", &payload.to_string());
    }

    /// Records a whole input that could not be decoded at all (a
    /// remote-write body that is not snappy or not protobuf): counted
    /// under `reason`, written with the payload cut at 4 KiB (lossy UTF-8).
    pub fn unit(
        &self,
        state: &State,
        reason: &'static str,
        error: &str,
        source: &str,
        payload: &[u8],
    ) {
        state.metrics.decode_error(reason);
        let payload = &payload[..payload.len().min(4096)];
        self.lock()
            .write(reason, error, source, &String::from_utf8_lossy(payload));
    }

    pub fn flush(&mut self) {
        if let Some(out) = &mut self.lock().out {
            let _ = out.flush();
        }
    }
}

impl Inner {
    fn write(&mut self, reason: &'static str, error: &str, source: &str, payload: &str) {
        self.count += 1;
        *self.by_reason.entry(reason).or_default() += 1;
        if let Some(out) = &mut self.out {
            let line = serde_json::json!({
                "reason": reason,
                "error": error,
                "source": source,
                "payload": payload,
            });
            let _ = writeln!(out, "{line}");
        }
    }
}

#[cfg(test)]
mod tests;
