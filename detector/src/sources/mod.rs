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
pub mod simulator;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use features::decode::Decoded;

use crate::state::State;

/// Samples per batch handed to the pipeline.
pub const BATCH: usize = 4096;

/// Where undecodable input goes: a JSON-lines file of `{reason, error,
/// source, payload}`, or nowhere but the counter.
pub struct DeadLetters {
    out: Option<std::io::BufWriter<std::fs::File>>,
    /// Bad records so far.
    pub count: u64,
    /// Bad records so far by reason (what `/metrics` counts).
    pub by_reason: BTreeMap<&'static str, u64>,
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
            out,
            count: 0,
            by_reason: BTreeMap::new(),
        })
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
        for err in unit.errors {
            self.count += 1;
            *self.by_reason.entry(err.reason()).or_default() += 1;
            state.metrics.decode_error(err.reason());
            tracing::debug!(source = %source, reason = err.reason(), error = %err, "undecodable input");
            if let Some(out) = &mut self.out {
                let line = serde_json::json!({
                    "reason": err.reason(),
                    "error": err.to_string(),
                    "source": source,
                    "payload": String::from_utf8_lossy(payload),
                });
                let _ = writeln!(out, "{line}");
            }
        }
    }

    pub fn flush(&mut self) {
        if let Some(out) = &mut self.out {
            let _ = out.flush();
        }
    }
}

#[cfg(test)]
mod tests;
