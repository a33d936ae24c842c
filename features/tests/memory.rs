//! Scale check of the feature stage: feature state per GPU with 100,000
//! GPUs stays within its 4 KB budget (asserted on the engine's estimate
//! and on the process's RSS growth). Ignored by default because it needs
//! an optimised build; run with
//! `cargo test -p features --profile bench --test memory -- --ignored --nocapture --test-threads 1`.
//! Throughput per CPU-second is measured by `examples/cpu_throughput.rs`.

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
