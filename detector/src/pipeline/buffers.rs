//! Sample buffers recycled through the pipeline. A batch of samples is a
//! few megabytes; it is filled by the source, admitted into another
//! buffer, cut into rounds and split over the shards, which drop their
//! parts on their own threads. Allocating every one of those fresh made
//! the allocator map and fault in new pages for every batch and hand
//! them back when a shard freed them (glibc trims the top of a thread's
//! heap), which cost more system time than decoding. So emptied buffers
//! come back here, with their capacity, and the next batch takes one.
//!
//! The pool is process-wide (sources, the feed and the shards run on
//! different threads and know nothing of each other's lifetimes) and
//! bounded in samples, so an idle process keeps at most
//! [`MAX_POOLED_SAMPLES`] samples' worth of memory.

use std::sync::Mutex;

use features::Sample;

/// Most samples' worth of capacity the pool keeps: a few batches of
/// [`crate::sources::BATCH`] for the source, the feed and the shards
/// (a round bigger than that is allocated as before).
pub const MAX_POOLED_SAMPLES: usize = 1 << 15;

static POOL: Mutex<Pool> = Mutex::new(Pool {
    buffers: Vec::new(),
    samples: 0,
});

struct Pool {
    buffers: Vec<Vec<Sample>>,
    /// Capacity held, in samples.
    samples: usize,
}

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    // The pool holds only empty buffers: one left by a panic is as good.
    POOL.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An empty buffer with room for at least `capacity` samples: a recycled
/// one when the pool has one, else a new one.
pub fn take(capacity: usize) -> Vec<Sample> {
    let reused = {
        let mut p = pool();
        // The smallest that fits, so a small part does not pin a batch's
        // worth of memory while it waits in a queue; else the biggest.
        let fits = p
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= capacity)
            .min_by_key(|(_, b)| b.capacity())
            .or_else(|| {
                p.buffers
                    .iter()
                    .enumerate()
                    .max_by_key(|(_, b)| b.capacity())
            })
            .map(|(i, _)| i);
        let found = fits.map(|i| p.buffers.swap_remove(i));
        if let Some(b) = &found {
            p.samples -= b.capacity();
        }
        found
    };
    match reused {
        Some(mut b) => {
            b.reserve(capacity);
            b
        }
        None => Vec::with_capacity(capacity),
    }
}

/// Gives a buffer back: its samples are dropped here (on the caller's
/// thread), its capacity is kept if the pool has room.
pub fn give(mut buffer: Vec<Sample>) {
    buffer.clear();
    let cap = buffer.capacity();
    if cap == 0 {
        return;
    }
    let mut p = pool();
    if p.samples + cap <= MAX_POOLED_SAMPLES {
        p.samples += cap;
        p.buffers.push(buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_with_their_capacity_and_the_pool_is_bounded() {
        let mut b = take(10);
        b.push(Sample::new("GPU-0", 1));
        let cap = b.capacity();
        give(b);
        // Another test may race for the pool: what comes back is empty
        // and big enough either way.
        let b = take(5);
        assert!(b.is_empty());
        assert!(b.capacity() >= 5);
        give(b);
        give(Vec::with_capacity(MAX_POOLED_SAMPLES + 1));
        assert!(pool().samples <= MAX_POOLED_SAMPLES);
        assert!(cap >= 10);
    }
}
