//! Synchronous calls into the async `object_store` client for the
//! partition store, whose callers are plain threads (the alert thread, the
//! Kafka source's poll loop) and, at start and in tests, code running
//! inside a tokio runtime.
//!
//! The store owns a small current-thread runtime that only runs while a
//! call blocks on it. A caller already inside a runtime (where `block_on`
//! would panic with "cannot start a runtime from within a runtime") is
//! served on a short-lived scoped thread instead; dropping the runtime
//! never blocks (`shutdown_background`), so the store may be dropped
//! anywhere too.

use std::future::Future;

use anyhow::Context;
use tokio::runtime::{Builder, Handle, Runtime};

#[derive(Debug)]
pub struct Blocking {
    /// Always `Some` until drop.
    rt: Option<Runtime>,
}

impl Blocking {
    pub fn new() -> anyhow::Result<Self> {
        let rt = Builder::new_current_thread()
            .enable_all()
            .thread_name("forewarn-object-store")
            .build()
            .context("starting the object store client's runtime")?;
        Ok(Blocking { rt: Some(rt) })
    }

    /// Runs the future `make` returns to completion and returns its output.
    pub fn run<F, T>(&self, make: impl FnOnce() -> F + Send) -> anyhow::Result<T>
    where
        F: Future<Output = anyhow::Result<T>>,
        T: Send,
    {
        let rt = self
            .rt
            .as_ref()
            .context("the object store client's runtime is gone")?;
        if Handle::try_current().is_err() {
            return rt.block_on(make());
        }
        std::thread::scope(|s| {
            s.spawn(|| rt.block_on(make()))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl Drop for Blocking {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}
