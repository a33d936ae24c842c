//! Feature-engine throughput in samples per CPU-second of one thread
//! (target ≥ 1,000,000 samples/s on one core). On a shared VM wall time
//! understates it, and criterion (`benches/features.rs`) reports wall time,
//! so this reads the thread's own CPU time from procfs. Run with
//! `cargo run --release -p features --example cpu_throughput`.

use features::{FeatureConfig, FeatureEngine};

#[path = "../benches/support/synth.rs"]
mod synth;

/// CPU time of this thread in seconds (utime + stime from procfs, 100 Hz).
fn thread_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields of the whole line.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Throughput in samples per CPU-second of one thread: on a shared machine
/// wall time understates it (criterion reports wall time).
fn main() {
    let fleet = synth::fleet(10_000);
    let mut engine = FeatureEngine::new(FeatureConfig::default()).expect("default config");
    let (mut samples, mut rows, mut events, mut rejected) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for k in 0..120 {
        samples.clear();
        rows.clear();
        events.clear();
        synth::tick(&fleet, k, &mut samples);
        engine.process_batch(&samples, &mut rows, &mut events, &mut rejected);
    }
    // Measure only the engine: build every batch first.
    let mut batches = Vec::new();
    for k in 120..360 {
        let mut b = Vec::new();
        synth::tick(&fleet, k, &mut b);
        batches.push(b);
    }
    let (c0, t0) = (thread_cpu_s(), std::time::Instant::now());
    let mut n = 0;
    for b in &batches {
        rows.clear();
        events.clear();
        engine.process_batch(b, &mut rows, &mut events, &mut rejected);
        n += b.len();
    }
    let (c1, wall) = (thread_cpu_s(), t0.elapsed().as_secs_f64());
    println!(
        "samples {n} wall {wall:.2}s -> {:.0} samples/s (wall)",
        n as f64 / wall
    );
    if let (Some(a), Some(b)) = (c0, c1) {
        println!(
            "cpu {:.2}s -> {:.0} samples/CPU-s",
            b - a,
            n as f64 / (b - a)
        );
    }
}
