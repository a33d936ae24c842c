//! Sources of telemetry: files (JSON lines, Parquet, dcgm-exporter text,
//! nvidia-smi CSV), stdin, the built-in simulator, and Kafka. Each yields
//! batches of decoded samples; bad input is counted by reason, written to
//! the dead-letter file with the reason, and never stops the stream.

pub mod file;
pub mod kafka;
mod pacing;
pub mod simulator;

use std::io::Write;
use std::path::Path;

use features::DecodeError;

use crate::state::State;

/// Samples per batch handed to the pipeline.
pub const BATCH: usize = 4096;

/// Where undecodable input goes: a JSON-lines file of `{reason, error,
/// source, payload}`, or nowhere but the counter.
pub struct DeadLetters {
    out: Option<std::io::BufWriter<std::fs::File>>,
    pub count: u64,
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
        Ok(DeadLetters { out, count: 0 })
    }

    /// Records one bad record.
    pub fn record(&mut self, state: &State, source: &str, err: &DecodeError, payload: &[u8]) {
        self.count += 1;
        state.metrics.decode_error(err.reason());
        tracing::debug!(source, reason = err.reason(), error = %err, "undecodable input");
        if let Some(out) = &mut self.out {
            let line = serde_json::json!({
                "reason": err.reason(),
                "error": err.to_string(),
                "source": source,
                "payload": String::from_utf8_lossy(&payload[..payload.len().min(4096)]),
            });
            let _ = writeln!(out, "{line}");
        }
    }

    pub fn flush(&mut self) {
        if let Some(out) = &mut self.out {
            let _ = out.flush();
        }
    }
}
