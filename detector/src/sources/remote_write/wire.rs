//! How `serve` starts the queue-fed sources (remote-write, scrape): the
//! queue to the source thread, the scrape loop on the runtime, the
//! `/api/v1/write` extension for the REST router, and the source's own
//! metrics on `/metrics`. Kept here so `serve` only gains a few lines.

use std::sync::Arc;
use std::sync::mpsc::Receiver;

use features::Sample;
use tokio_util::sync::CancellationToken;

use super::RemoteWrite;
use super::{RemoteWriteMetrics, queue};
use crate::config::SourceKind;
use crate::sources::DeadLetters;
use crate::sources::scrape::{self, ScrapeMetrics};
use crate::state::State;

/// What a queue-fed source needs started.
#[derive(Default)]
pub struct Wired {
    /// The source thread's end (None: the source is not queue-fed).
    pub rx: Option<Receiver<Vec<Sample>>>,
    /// For the REST router (remote-write only).
    pub api: Option<RemoteWrite>,
}

/// Starts what `source` needs before the source thread and REST run.
/// Call on the runtime: scrape mode spawns its loop there.
pub fn wire(
    source: &SourceKind,
    state: &State,
    dead: &DeadLetters,
    shutdown: &CancellationToken,
) -> Wired {
    match source {
        SourceKind::RemoteWrite => {
            let metrics = Arc::new(RemoteWriteMetrics::default());
            let _ = state.metrics.source.set(metrics.clone());
            let (ingest, rx) = queue(metrics);
            Wired {
                rx: Some(rx),
                api: Some(RemoteWrite {
                    ingest,
                    dead: dead.clone(),
                }),
            }
        }
        SourceKind::Scrape(settings) => {
            let metrics = Arc::new(ScrapeMetrics::default());
            let _ = state.metrics.source.set(metrics.clone());
            let (ingest, rx) = queue(Arc::new(RemoteWriteMetrics::default()));
            let st = state.clone();
            let task = scrape::run(
                settings.clone(),
                state.clone(),
                dead.clone(),
                ingest.tx,
                metrics,
                shutdown.clone(),
            );
            tokio::spawn(async move {
                if let Err(e) = task.await {
                    // The supervisor stops the service on a source down.
                    st.health.down("source", format!("scrape: {e:#}"));
                }
            });
            Wired {
                rx: Some(rx),
                api: None,
            }
        }
        _ => Wired::default(),
    }
}
