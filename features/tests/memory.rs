//! Scale measurements of the feature stage: feature state per GPU with
//! 100,000 GPUs (target ≤ 4 KB) and throughput per CPU-second (target
//! ≥ 1,000,000 samples/s on one core). Ignored by default; run with
//! `cargo test -p features --profile bench --test memory -- --ignored --nocapture --test-threads 1`.

use features::{FeatureConfig, FeatureEngine};

#[path = "../benches/support/synth.rs"]
mod synth;

const GPUS: usize = 100_000;

fn rss_kib() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
#[ignore = "measurement: run explicitly, in release"]
fn feature_state_per_gpu_with_100k_gpus() {
    let fleet = synth::fleet(GPUS);
    let mut engine = FeatureEngine::new(FeatureConfig::default()).expect("default config");
    let (mut samples, mut rows, mut events, mut rejected) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let before = rss_kib();
    for k in 0..6 {
        samples.clear();
        rows.clear();
        synth::tick(&fleet, k, &mut samples);
        engine.process_batch(&samples, &mut rows, &mut events, &mut rejected);
    }
    let after = rss_kib();
    let approx = engine.approx_heap_bytes();
    println!(
        "gpus {} approx_heap_bytes {} ({} B/GPU)",
        engine.gpu_count(),
        approx,
        approx / engine.gpu_count()
    );
    assert_eq!(engine.gpu_count(), GPUS);
    assert!(approx / GPUS <= 4096, "{} B/GPU", approx / GPUS);
    if let (Some(b), Some(a)) = (before, after) {
        let grown = a.saturating_sub(b) * 1024;
        println!(
            "rss growth {} KiB = {} B/GPU (includes the last batch's samples and rows)",
            grown / 1024,
            grown / GPUS
        );
        // The real footprint, not only the estimate, and even with the
        // batch buffers counted in.
        assert!(grown / GPUS <= 4096, "RSS grew {} B/GPU", grown / GPUS);
    }
}

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
#[test]
#[ignore = "measurement: run explicitly, in release"]
fn throughput_per_cpu_second() {
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
