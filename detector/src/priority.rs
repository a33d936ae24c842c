//! Scheduling priority of the pipeline's threads. The source, shard and
//! alert threads are throughput work; REST lookups are latency work. When
//! ingest keeps every core busy, the pipeline threads run at a higher nice
//! value (`pipeline.nice`, default 10 for `serve`) so the kernel runs a woken
//! REST worker first: a lookup waits microseconds for a core, not a
//! scheduler slice. Ingest loses nothing while cores are otherwise idle.

use std::sync::atomic::{AtomicI32, Ordering};

static PIPELINE_NICE: AtomicI32 = AtomicI32::new(0);

/// Sets the nice value pipeline threads take from now on (0: unchanged).
pub fn set_pipeline_nice(nice: i32) {
    PIPELINE_NICE.store(nice.clamp(0, 19), Ordering::Relaxed);
}

/// Called by each pipeline thread as it starts.
pub fn apply_to_current_thread() {
    let nice = PIPELINE_NICE.load(Ordering::Relaxed);
    if nice == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // On Linux the nice value is per thread: PRIO_PROCESS with a thread
        // id changes only that thread.
        let tid = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(tid), nice) {
            tracing::debug!(error = %e, nice, "could not lower a pipeline thread's priority");
        }
    }
}
