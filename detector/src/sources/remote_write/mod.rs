//! Prometheus remote-write as a source (`[source] type = "remote_write"`):
//! `POST /api/v1/write` (the handler is `crate::api::remote_write`) takes a
//! snappy block-compressed protobuf `WriteRequest` (remote-write 1.0),
//! [`decode_request`] turns its series into one sample per GPU and
//! timestamp through the dcgm-exporter label mapping
//! (`features::decode::series`), and the handler offers the samples to the
//! source thread through a bounded queue ([`Ingest`]). The source thread
//! ([`drain`]) is the only one that touches the pipeline, as for every
//! other source.
//!
//! Backpressure is the queue: when it is full the handler answers 503 with
//! `Retry-After`, which Prometheus retries (it drops on 4xx, so only a body
//! that can never be decoded gets 400, and is dead-lettered with why).

mod assemble;
pub mod metrics;
pub mod proto;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::Duration;

use features::Sample;
use features::decode::DecodeOutput;
use features::decode::series::SeriesDecoder;
use prost::Message;
use tokio_util::sync::CancellationToken;

use super::{BATCH, DeadLetters};
use crate::pipeline::Pipeline;
use crate::state::State;
pub use metrics::RemoteWriteMetrics;

/// Largest compressed body taken: Prometheus sends at most
/// `max_samples_per_send` (2,000 by default) samples a request, a few
/// hundred KB even with long label sets; 8 MiB leaves room for senders
/// configured far above that.
pub const MAX_BODY: usize = 8 << 20;
/// Largest uncompressed body: snappy states the length up front, so a
/// small body claiming a huge one is refused before anything is allocated.
pub const MAX_DECODED: usize = 64 << 20;
/// Requests decoded and waiting for the source thread. Enough to ride out
/// one slow pipeline round; beyond it the sender is told to retry, so
/// memory stays bounded whatever Prometheus's shard count.
const QUEUE: usize = 64;

/// Why a request body cannot be decoded (answered 400: never retried).
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the body is {len} bytes uncompressed, over the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("the body is not snappy block-compressed: {0}")]
    Snappy(#[from] snap::Error),
    #[error("the body is not a remote-write 1.0 WriteRequest: {0}")]
    Protobuf(#[from] prost::DecodeError),
}

impl BodyError {
    /// The dead-letter and `forewarn_decode_errors_total` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            BodyError::TooLarge { .. } => "too_large",
            BodyError::Snappy(_) => "remote_write_snappy",
            BodyError::Protobuf(_) => "remote_write_protobuf",
        }
    }
}

/// What one request held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Request {
    pub series: usize,
    /// Values in the request (staleness markers included).
    pub values: usize,
}

/// Decodes one request body into `out` (samples and per-series errors).
pub fn decode_request(body: &[u8], out: &mut DecodeOutput) -> Result<Request, BodyError> {
    let len = snap::raw::decompress_len(body)?;
    if len > MAX_DECODED {
        return Err(BodyError::TooLarge {
            len,
            max: MAX_DECODED,
        });
    }
    let raw = snap::raw::Decoder::new().decompress_vec(body)?;
    let req = proto::WriteRequest::decode(raw.as_slice())?;
    let mut d = SeriesDecoder::new(out);
    let mut seen = Request::default();
    for ts in &req.timeseries {
        seen.series += 1;
        seen.values += ts.samples.len();
        d.push(
            ts.labels
                .iter()
                .map(|l| (l.name.as_str(), l.value.as_str())),
            ts.samples.iter().map(|s| (s.value, s.timestamp)),
        );
    }
    Ok(seen)
}

/// The source's end of `/api/v1/write` (`crate::api::remote_write`
/// serves it), present when the source is `remote_write`.
#[derive(Clone)]
pub struct RemoteWrite {
    pub ingest: Ingest,
    pub dead: DeadLetters,
}

/// The handler's end of the queue to the source thread. Cheap to clone.
#[derive(Clone)]
pub struct Ingest {
    tx: SyncSender<Vec<Sample>>,
    pub metrics: Arc<RemoteWriteMetrics>,
}

/// Why samples were not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The queue is full: retry later.
    Full,
    /// The source stopped (shutting down).
    Closed,
}

impl Ingest {
    /// Offers decoded samples without waiting.
    pub fn offer(&self, samples: Vec<Sample>) -> Result<(), Refused> {
        if samples.is_empty() {
            return Ok(());
        }
        self.tx.try_send(samples).map_err(|e| match e {
            TrySendError::Full(_) => Refused::Full,
            TrySendError::Disconnected(_) => Refused::Closed,
        })
    }
}

/// The queue: the handler's [`Ingest`] and the source thread's receiver.
pub fn queue(metrics: Arc<RemoteWriteMetrics>) -> (Ingest, Receiver<Vec<Sample>>) {
    let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
    (Ingest { tx, metrics }, rx)
}

/// How long (event time) parts of one GPU's scrape are waited for before
/// the sample goes to the pipeline: above Prometheus's default
/// `batch_send_deadline` (5 s), so parts sent by different queue shards
/// meet. Only remote-write needs it (a scrape arrives whole).
pub const ASSEMBLY_WAIT_MS: i64 = 15_000;

/// The source thread: hands what arrives to the pipeline, coalescing what
/// queued up meanwhile into batches of up to [`BATCH`] (one pipeline round
/// per small request would cost a round trip through every shard each).
/// With `assemble_ms`, parts of one GPU's sample split across requests
/// are merged first ([`assemble::Assembler`]). Returns at shutdown or when
/// every sender is gone. Used by scrape mode too (without assembly).
pub fn drain(
    rx: &Receiver<Vec<Sample>>,
    state: &State,
    shutdown: &CancellationToken,
    pipeline: &mut Pipeline,
    assemble_ms: Option<i64>,
) -> anyhow::Result<()> {
    let mut asm = assemble_ms.map(assemble::Assembler::new);
    let send = |batch: Vec<Sample>, pipeline: &mut Pipeline| -> anyhow::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        state
            .metrics
            .samples_in
            .fetch_add(batch.len() as u64, Relaxed);
        pipeline.send(batch)
    };
    while !shutdown.is_cancelled() {
        let mut batch = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(b) => b,
            Err(RecvTimeoutError::Timeout) => {
                if let Some(a) = &mut asm {
                    let mut ready = Vec::new();
                    a.flush(crate::checkpoint::wall_ms(), &mut ready);
                    send(ready, pipeline)?;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(mut more) => batch.append(&mut more),
                Err(_) => break,
            }
        }
        if let Some(a) = &mut asm {
            let mut ready = Vec::with_capacity(batch.len());
            a.push(batch, crate::checkpoint::wall_ms(), &mut ready);
            batch = ready;
        }
        send(batch, pipeline)?;
    }
    if let Some(a) = &mut asm {
        let mut rest = Vec::new();
        a.finish(&mut rest);
        send(rest, pipeline)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
