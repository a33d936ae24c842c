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
    cpu_rate(&rows, &root);
    let _ = std::fs::remove_dir_all(&root);
}

/// This thread's CPU time (user + system) in seconds, from
/// `/proc/thread-self/stat` (Linux; clock ticks of 10 ms): wall time on a
/// loaded 2-core machine says little, CPU time is the cost on one core.
fn thread_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Rows per CPU-second over 10 full passes (printed; not a criterion result).
fn cpu_rate(rows: &[FeatureRow], root: &std::path::Path) {
    let passes = 10;
    let Some(start) = thread_cpu_s() else {
        return;
    };
    let mut bytes = 0;
    for _ in 0..passes {
        let _ = std::fs::remove_dir_all(root);
        let mut cfg = ExportConfig::new(root, "bench");
        cfg.fsync = false;
        let mut w = PartitionedWriter::new(FeatureTable::new(), cfg).expect("writer");
        w.push_all(rows).expect("push");
        w.close().expect("close");
    }
    let end = thread_cpu_s().unwrap_or(start);
    for f in datasets::export::list_files(root, "features", i64::MIN, i64::MAX).expect("list") {
        bytes += std::fs::metadata(&f.path).map_or(0, |m| m.len());
    }
    let n = (rows.len() * passes) as f64;
    println!(
        "export/features every 1: {} rows x {passes} in {:.2} CPU-s = {:.0} rows per CPU-second; \
         {:.1} bytes per row on disk",
        rows.len(),
        end - start,
        n / (end - start),
        bytes as f64 / rows.len() as f64
    );
}

criterion_group!(benches, export);
criterion_main!(benches);
