//! Throughput of the feature stage: decoded samples → feature rows on one
//! core, with a warm engine (state for every GPU, models past warm-up,
//! cohorts with references). Target: ≥ 1,000,000 samples/s.
//!
//! `cargo bench -p features --bench features -- --warm-up-time 1 --measurement-time 3`

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use features::{FeatureConfig, FeatureEngine};

#[path = "support/synth.rs"]
mod synth;

const GPUS: usize = 10_000;
/// Ticks processed before measuring: ~1 h of a 30 s scrape.
const WARM_TICKS: i64 = 120;

fn bench(c: &mut Criterion) {
    let fleet = synth::fleet(GPUS);
    let mut engine = FeatureEngine::new(FeatureConfig::default()).expect("default config");
    let (mut samples, mut rows, mut events, mut rejected) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for k in 0..WARM_TICKS {
        samples.clear();
        synth::tick(&fleet, k, &mut samples);
        engine.process_batch(&samples, &mut rows, &mut events, &mut rejected);
        rows.clear();
        events.clear();
    }
    // Four more ticks are measured; each iteration starts from the warm engine.
    let mut batch = Vec::new();
    for k in WARM_TICKS..WARM_TICKS + 4 {
        synth::tick(&fleet, k, &mut batch);
    }
    let mut g = c.benchmark_group("features");
    g.throughput(Throughput::Elements(batch.len() as u64));
    g.sample_size(10);
    g.bench_function("process_batch_warm_10k_gpus", |b| {
        b.iter_batched(
            || {
                (
                    engine.clone(),
                    Vec::with_capacity(batch.len()),
                    Vec::new(),
                    Vec::new(),
                )
            },
            |(mut e, mut rows, mut events, mut rejected)| {
                e.process_batch(&batch, &mut rows, &mut events, &mut rejected);
                (e, rows)
            },
            BatchSize::PerIteration,
        );
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
