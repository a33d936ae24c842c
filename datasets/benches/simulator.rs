//! Throughput of the fleet simulator alone (no Parquet): samples generated
//! per second on one core. The acceptance target for `forewarn simulate` is
//! 1 M samples/s end to end, so the generator alone must reach ≥ 3 M/s.
//!
//! `cargo bench -p datasets --bench simulator -- --warm-up-time 1 --measurement-time 3`

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use datasets::simulator::{SimConfig, Simulator};

/// 1,000 GPUs for one hour at 30 s: 120,000 samples per iteration.
fn fleet_hour(dirty: bool) -> SimConfig {
    SimConfig {
        gpus: 1_000,
        hours: 1.0,
        interval_s: 30,
        dirty,
        ..SimConfig::default()
    }
}

fn ticks(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator");
    group.sample_size(20);
    for dirty in [false, true] {
        let cfg = fleet_hour(dirty);
        group.throughput(Throughput::Elements(cfg.gpus as u64 * cfg.ticks()));
        let name = if dirty {
            "1000_gpus_1h_dirty"
        } else {
            "1000_gpus_1h"
        };
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    (
                        Simulator::new(cfg.clone()).expect("valid config"),
                        Vec::with_capacity(cfg.gpus * 2),
                    )
                },
                |(mut sim, mut out)| {
                    let mut n = 0usize;
                    while sim.next_tick(&mut out).is_some() {
                        n += out.len();
                        out.clear();
                    }
                    n
                },
                BatchSize::PerIteration,
            );
        });
    }
    // Planning a day (topology, schedule, failures) is paid once per run.
    group.throughput(Throughput::Elements(1));
    group.bench_function("plan_1000_gpus_24h", |b| {
        b.iter(|| Simulator::new(SimConfig::default()).expect("valid config"));
    });
    group.finish();
}

criterion_group!(benches, ticks);
criterion_main!(benches);
