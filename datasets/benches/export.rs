//! Throughput of the continuous feature export: feature rows per second
//! through `PartitionedWriter<FeatureTable>` (clone into the buffer, Arrow
//! batch, zstd Parquet row groups, finish + rename) on one core. The
//! service ingests ≥ 100,000 samples/s, one feature row each.
//!
//! Rows are real: the seeded simulator (1,000 GPUs, 1 h at 30 s, seed 7)
//! through the feature engine, so NaN patterns and value spreads compress as
//! in production. fsync is off (it is once per file, not per row).
//!
//! `cargo bench -p datasets --bench export -- --warm-up-time 1 --measurement-time 5`

use std::num::NonZeroU32;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use datasets::export::{ExportConfig, FeatureTable, PartitionedWriter};
use datasets::simulator::{SimConfig, Simulator};
use features::{FeatureConfig, FeatureEngine, FeatureRow};

fn feature_rows() -> Vec<FeatureRow> {
    let cfg = SimConfig {
        gpus: 1_000,
        hours: 1.0,
        interval_s: 30,
        seed: 7,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(cfg).expect("valid simulator config");
    let mut engine = FeatureEngine::new(FeatureConfig::default()).expect("valid feature config");
    let (mut rows, mut events, mut rejected, mut batch) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    while sim.next_tick(&mut batch).is_some() {
        engine.process_batch(&batch, &mut rows, &mut events, &mut rejected);
        batch.clear();
    }
    rows
}

fn export(c: &mut Criterion) {
    let rows = feature_rows();
    let root = std::env::temp_dir().join(format!("forewarn-export-bench-{}", std::process::id()));
    let mut group = c.benchmark_group("export");
    group.sample_size(10);
    group.throughput(Throughput::Elements(rows.len() as u64));
    for every in [1, 10] {
        group.bench_function(format!("features_{}_rows_every_{every}", rows.len()), |b| {
            b.iter_batched(
                || {
                    let _ = std::fs::remove_dir_all(&root);
                    let mut cfg = ExportConfig::new(&root, "bench");
                    cfg.fsync = false;
                    cfg.sample_every = NonZeroU32::new(every).expect("non-zero");
                    PartitionedWriter::new(FeatureTable::new(), cfg).expect("writer")
                },
                |mut w| {
                    w.push_all(&rows).expect("push");
                    w.close().expect("close")
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&root);
}

criterion_group!(benches, export);
criterion_main!(benches);
