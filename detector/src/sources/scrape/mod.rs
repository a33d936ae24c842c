//! Scrape mode (`[source] type = "scrape"`): forewarn scrapes dcgm-exporter
//! `/metrics` endpoints itself, for fleets with neither Kafka nor a
//! Prometheus to remote-write from. Targets come from the config and/or a
//! Prometheus `file_sd` file ([`file_sd`]), re-read when it changes.
//!
//! Every `interval` all targets are scraped at once, each bounded by
//! `timeout`; the scrape's start is the event time of the timestamp-less
//! exposition (`features::decode::prom`). Decoded samples go to the
//! source thread through the same bounded queue as remote-write
//! (`super::remote_write::drain`), which feeds the pipeline.
//!
//! A target that stops answering yields nothing: its GPUs fall silent in
//! event time while the other targets' samples move the fleet's clock on,
//! so the pipeline treats them exactly like GPUs of a host that stopped
//! reporting (one `gpu_lost` per GPU after `silence`, never a page of the
//! scraper's own). Per-target up/down, duration and samples are in
//! `/metrics` ([`metrics`]).

pub mod file_sd;
pub mod metrics;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, Instant};

use features::Sample;
use features::decode::{DecodeOutput, Decoded, Position, prom};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::DeadLetters;
use crate::state::State;
pub use metrics::ScrapeMetrics;

/// Largest scrape body read: a dcgm-exporter page of 8 GPUs is ~100 KB;
/// a target sending more than this is refused rather than buffered.
pub const MAX_SCRAPE: usize = 16 << 20;

/// `[source] type = "scrape"`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeSettings {
    /// Static targets: `(name as written, URL)`.
    pub targets: Vec<(String, String)>,
    pub file_sd: Option<PathBuf>,
    pub interval: Duration,
    pub timeout: Duration,
    /// For `file_sd` targets (`host:port`).
    pub scheme: String,
    pub metrics_path: String,
}

/// One target to scrape: its name (the `target` label), URL, and the
/// labels `file_sd` gave it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    pub name: String,
    pub url: String,
    pub labels: BTreeMap<String, String>,
}

/// `host:port` → `scheme://host:port/metrics_path`; a full URL is kept.
/// Returns `(name, url)`.
pub fn target_url(t: &str, scheme: &str, path: &str) -> Result<(String, String), String> {
    let t = t.trim();
    if t.is_empty() {
        return Err("empty target".into());
    }
    if let Some((s, rest)) = t.split_once("://") {
        if !matches!(s, "http" | "https") || rest.is_empty() {
            return Err("a URL target must be http:// or https://".into());
        }
        return Ok((t.to_owned(), t.to_owned()));
    }
    if t.contains('/') || !t.contains(':') {
        return Err("write host:port (or a full http:// URL)".into());
    }
    Ok((t.to_owned(), format!("{scheme}://{t}{path}")))
}

/// Scrapes until shutdown, offering each scrape's samples on `tx`.
pub async fn run(
    settings: ScrapeSettings,
    state: State,
    dead: DeadLetters,
    tx: SyncSender<Vec<Sample>>,
    metrics: Arc<ScrapeMetrics>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(settings.timeout)
        .connect_timeout(settings.timeout)
        .build()?;
    let mut sd = settings
        .file_sd
        .clone()
        .map(|p| file_sd::Watch::new(p, settings.scheme.clone(), settings.metrics_path.clone()));
    let mut tick = tokio::time::interval(settings.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return Ok(()),
        }
        let mut targets: Vec<Target> = settings
            .targets
            .iter()
            .map(|(name, url)| Target {
                name: name.clone(),
                url: url.clone(),
                labels: BTreeMap::new(),
            })
            .collect();
        if let Some(w) = &mut sd {
            targets.extend(w.targets().iter().cloned());
        }
        targets.sort();
        targets.dedup_by(|a, b| a.url == b.url);
        metrics.retain(targets.iter().map(|t| t.name.as_str()));
        let mut scrapes = JoinSet::new();
        for t in targets {
            let (client, state, dead, metrics) =
                (client.clone(), state.clone(), dead.clone(), metrics.clone());
            scrapes.spawn(async move {
                let samples = scrape_one(&client, &t, &state, dead, &metrics).await;
                (t.name, samples)
            });
        }
        while let Some(done) = scrapes.join_next().await {
            let Ok((_, samples)) = done else { continue };
            if !offer(&tx, samples, &shutdown).await {
                return Ok(());
            }
        }
    }
}

/// Hands samples to the source thread, waiting while its queue is full.
/// False when the source is gone or the service stops.
async fn offer(
    tx: &SyncSender<Vec<Sample>>,
    mut samples: Vec<Sample>,
    stop: &CancellationToken,
) -> bool {
    if samples.is_empty() {
        return true;
    }
    loop {
        match tx.try_send(samples) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(back)) => samples = back,
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
            () = stop.cancelled() => return false,
        }
    }
}

/// One scrape: GET, decode with the scrape's start as `ts`, topology from
/// the target's `file_sd` labels where the exporter gave none. A failed
/// scrape yields no samples and marks the target down.
async fn scrape_one(
    client: &reqwest::Client,
    t: &Target,
    state: &State,
    mut dead: DeadLetters,
    metrics: &ScrapeMetrics,
) -> Vec<Sample> {
    let started = Instant::now();
    let ts_ms = crate::checkpoint::wall_ms();
    let body = match fetch(client, &t.url).await {
        Ok(b) => b,
        Err(why) => {
            metrics.failed(&t.name, started.elapsed(), &why);
            return Vec::new();
        }
    };
    let mut out = DecodeOutput::default();
    prom::decode_into(&body, ts_ms, &mut out);
    if !out.errors.is_empty() {
        dead.record(
            state,
            &Decoded {
                position: Position::File { file: &t.url },
                payload: &body,
                samples: &mut Vec::new(),
                errors: &out.errors,
                last: true,
            },
        );
        dead.flush();
    }
    let mut samples = out.samples;
    for s in &mut samples {
        for (label, slot) in [("rack", &mut s.topo.rack), ("cluster", &mut s.topo.cluster)] {
            if slot.is_none()
                && let Some(v) = t.labels.get(label)
            {
                *slot = Some(Arc::from(v.as_str()));
            }
        }
    }
    metrics.succeeded(&t.name, started.elapsed(), samples.len());
    samples
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, String> {
    let mut resp = client
        .get(url)
        .header(reqwest::header::ACCEPT, "text/plain;version=0.0.4")
        .send()
        .await
        .map_err(|e| format!("{e}"))?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| format!("{e}"))? {
        if body.len() + chunk.len() > MAX_SCRAPE {
            return Err(format!("over {MAX_SCRAPE} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests;
