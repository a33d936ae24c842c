//! Keeps the map's requests off the pipeline's path. Requests answer from
//! the latest immutable [`Snapshot`] (the encoded layout and the cells),
//! taken under a lock held only to clone an `Arc`; they never touch the
//! risk table's lock. A snapshot older than [`MIN_REFRESH`] is still
//! served, and a refresh started behind it on the blocking pool (one at a
//! time; stale-while-revalidate), so a page polling every second sees
//! data about one poll old and any number of pages cost one pass over the
//! table per [`MIN_REFRESH`]. A `fleet-map` thread refreshes every
//! [`IDLE_REFRESH`] when nobody asks, so a first visitor finds a recent
//! snapshot and does not wait for a pass over a contended table. Only
//! without a snapshot, or with one older than [`MAX_STALE`], does a request
//! wait for the refresh.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;

use super::cache::{MapCache, Poisoned};
use super::cells::Cells;
use crate::api::ApiError;
use crate::state::State;

/// Oldest a snapshot may be before a request starts a refresh. Browsers
/// poll about once a second; several tabs share one pass over the table.
pub const MIN_REFRESH: Duration = Duration::from_millis(250);

/// Oldest snapshot a request is answered from without waiting.
pub const MAX_STALE: Duration = Duration::from_secs(60);

/// How old the snapshot may get with nobody asking: the `fleet-map`
/// thread's refresh period (one pass over the table, ~0.1 s of CPU at
/// 100,000 GPUs).
pub const IDLE_REFRESH: Duration = Duration::from_secs(5);

/// How often the `fleet-map` thread looks at the snapshot's age.
const TICK: Duration = Duration::from_secs(1);

/// What requests answer from.
#[derive(Debug)]
pub struct Snapshot {
    /// When the refresh behind it finished.
    pub at: Instant,
    /// The layout, encoded once per layout version.
    pub layout: Bytes,
    pub cells: Arc<Cells>,
}

/// The map's cache and its latest snapshot.
#[derive(Debug)]
pub struct Hub {
    shared: State,
    /// Only refreshes lock it (on the blocking pool).
    cache: Mutex<MapCache>,
    latest: Mutex<Option<Arc<Snapshot>>>,
    refreshing: AtomicBool,
}

impl Hub {
    /// The hub, and its `fleet-map` thread (which ends when the hub is
    /// dropped).
    pub fn new(shared: State) -> Arc<Hub> {
        let hub = Arc::new(Hub {
            shared,
            cache: Mutex::new(MapCache::default()),
            latest: Mutex::new(None),
            refreshing: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&hub);
        let spawned = std::thread::Builder::new()
            .name("fleet-map".into())
            .spawn(move || keep_warm(weak));
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "fleet map: no background refresh thread");
        }
        hub
    }

    fn latest(&self) -> Result<Option<Arc<Snapshot>>, Poisoned> {
        Ok(self
            .latest
            .lock()
            .map_err(|_| Poisoned("map snapshot"))?
            .clone())
    }

    /// The snapshot to answer from (see the module doc).
    pub async fn snapshot(self: &Arc<Self>) -> Result<Arc<Snapshot>, ApiError> {
        if let Some(s) = self.latest().map_err(internal)? {
            let age = s.at.elapsed();
            if (MIN_REFRESH..MAX_STALE).contains(&age) {
                self.refresh_behind();
            }
            if age < MAX_STALE {
                return Ok(s);
            }
        }
        let hub = self.clone();
        tokio::task::spawn_blocking(move || hub.refresh())
            .await
            .map_err(|e| ApiError::Internal(format!("fleet map refresh task: {e}")))?
            .map_err(internal)?;
        self.latest()
            .map_err(internal)?
            .ok_or_else(|| ApiError::Internal("fleet map: no snapshot after a refresh".into()))
    }

    /// Starts one refresh on the blocking pool unless one is running.
    fn refresh_behind(self: &Arc<Self>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let hub = self.clone();
        tokio::task::spawn_blocking(move || {
            if let Err(e) = hub.refresh() {
                tracing::warn!(error = %e, "fleet map refresh failed");
            }
            hub.refreshing.store(false, Ordering::Release);
        });
    }

    /// Blocking: refreshes the cache and publishes a snapshot, unless a
    /// refresh that finished less than [`MIN_REFRESH`] ago already did.
    pub fn refresh(&self) -> Result<(), Poisoned> {
        let mut cache = self.cache.lock().map_err(|_| Poisoned("map cache"))?;
        if self.latest()?.is_some_and(|s| s.at.elapsed() < MIN_REFRESH) {
            return Ok(());
        }
        let t0 = Instant::now();
        cache.refresh(&self.shared.gpus, false)?;
        let (layout, cells) = cache.snapshot();
        drop(cache);
        let (n, version) = (cells.code.len(), cells.version);
        let snap = Arc::new(Snapshot {
            at: Instant::now(),
            layout,
            cells,
        });
        *self.latest.lock().map_err(|_| Poisoned("map snapshot"))? = Some(snap);
        tracing::debug!(
            gpus = n,
            version,
            ms = t0.elapsed().as_secs_f64() * 1e3,
            "fleet map refreshed"
        );
        Ok(())
    }
}

/// The `fleet-map` thread: refreshes when the snapshot is older than
/// [`IDLE_REFRESH`] (or missing), until the hub is gone. It is background
/// work like the pipeline's, so it takes the pipeline's priority and never
/// delays a REST lookup.
fn keep_warm(hub: std::sync::Weak<Hub>) {
    crate::priority::apply_to_current_thread();
    loop {
        std::thread::sleep(TICK);
        let Some(hub) = hub.upgrade() else { return };
        let due = match hub.latest() {
            Ok(s) => s.is_none_or(|s| s.at.elapsed() >= IDLE_REFRESH),
            Err(_) => return,
        };
        if due && let Err(e) = hub.refresh() {
            tracing::warn!(error = %e, "fleet map refresh failed");
            return;
        }
    }
}

fn internal(e: Poisoned) -> ApiError {
    ApiError::Internal(e.to_string())
}
