//! Throughput and memory probe for the random cut forest, for quick A/B runs
//! outside criterion (e.g. under `perf stat`). Times are CPU time of
//! this thread (Linux `/proc/thread-self/schedstat`), so a loaded machine
//! slows them less than wall time. Usage:
//! `cargo run --release -p models --example rcf_throughput -- [metrics] [shingle] [box_cache_min_mass] [rows] [attr]`
//! (defaults 2 4 16 100000 0); `attr` 1 makes the update phase call
//! `attribute_and_update` (what `forewarn score` does) instead of `score_and_update`.
//! Prints the forest's heap bytes at the end and the largest seen during the
//! update phase (sampled every 1,024 rows), for the memory target.

use models::rcf::Forest;
#[path = "support/stream.rs"]
mod stream;

fn main() -> Result<(), models::rcf::RcfError> {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let (metrics, shingle, mass, rows) = (arg(1, 2), arg(2, 4), arg(3, 16), arg(4, 100_000));
    let attr = arg(5, 0) == 1;
    let data = stream::noisy_sines(metrics, 20_000 + rows, 2);
    let mut f = Forest::builder()
        .input_dimensions(metrics)
        .shingle_size(shingle)
        .box_cache_min_mass(mass)
        .seed(17)
        .build()?;
    for r in &data[..20_000] {
        f.update(r)?;
    }
    let start = cpu_ns();
    let mut sum = score_phase(&f, &data[20_000..])?;
    let score_us = (cpu_ns() - start) as f64 / 1e3 / rows as f64;
    let start = cpu_ns();
    sum += update_phase(&mut f, &data[20_000..], attr)?;
    let update_us = (cpu_ns() - start) as f64 / 1e3 / rows as f64;
    println!(
        "dims {} box_cache_min_mass {mass}: score {score_us:.2} us, update+score {update_us:.2} us, heap {} bytes (max {}), points {} (checksum {sum:.3})",
        metrics * shingle,
        f.heap_bytes(),
        MAX_HEAP.load(std::sync::atomic::Ordering::Relaxed),
        f.stored_points()
    );
    Ok(())
}

/// Scores every row without learning. Not inlined so that callgrind can
/// count this phase alone: `--collect-atstart=no --toggle-collect='*score_phase*'`.
#[inline(never)]
fn score_phase(f: &Forest, rows: &[Vec<f64>]) -> Result<f64, models::rcf::RcfError> {
    let mut sum = 0.0;
    for r in rows {
        sum += f.score(r)?;
    }
    Ok(sum)
}

/// Scores (or attributes) then learns every row (`--toggle-collect='*update_phase*'`).
#[inline(never)]
fn update_phase(
    f: &mut Forest,
    rows: &[Vec<f64>],
    attr: bool,
) -> Result<f64, models::rcf::RcfError> {
    let mut sum = 0.0;
    for (i, r) in rows.iter().enumerate() {
        sum += if attr {
            f.attribute_and_update(r)?.total()
        } else {
            f.score_and_update(r)?
        };
        if i % 1024 == 0 {
            // A sum over the trees' capacities: ~0.1 % of 1,024 updates.
            MAX_HEAP.fetch_max(f.heap_bytes(), std::sync::atomic::Ordering::Relaxed);
        }
    }
    Ok(sum)
}

/// Largest `heap_bytes` seen in the update phase (sampled every 1,024 rows).
static MAX_HEAP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Nanoseconds this thread has run on a CPU (0 where schedstat is missing).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
