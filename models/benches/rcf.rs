//! Speed and memory of the random cut forest at the acceptance parameters:
//! 50 trees, sample size 256, 2 metrics x shingle 4 = 8 dimensions.
//! Run: `cargo bench -p models --bench rcf -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use models::rcf::Forest;

#[path = "../examples/support/stream.rs"]
mod stream;
use stream::noisy_sines as stream;

fn warmed(metrics: usize, shingle: usize, rows: &[Vec<f64>]) -> Forest {
    let mut f = Forest::builder()
        .trees(50)
        .sample_size(256)
        .input_dimensions(metrics)
        .shingle_size(shingle)
        .seed(17)
        .build()
        .expect("valid bench config");
    for r in rows {
        f.update(r).expect("dims match");
    }
    f
}

fn print_memory() {
    for (metrics, shingle) in [(2, 4), (4, 4), (8, 4)] {
        let rows = stream(metrics, 20_000, 1);
        let f = warmed(metrics, shingle, &rows);
        println!(
            "memory: 50 trees x 256 samples x {} dims = {} bytes ({} distinct stored points)",
            metrics * shingle,
            f.heap_bytes(),
            f.stored_points()
        );
    }
}

fn bench(c: &mut Criterion) {
    print_memory();
    let rows = stream(2, 120_000, 2);
    let (warm, rest) = rows.split_at(20_000);
    let mut f = warmed(2, 4, warm);
    let mut i = 0;
    c.bench_function("update_and_score/50x256x8", |b| {
        b.iter(|| {
            let s = f
                .score_and_update(black_box(&rest[i % rest.len()]))
                .expect("dims match");
            i += 1;
            black_box(s)
        })
    });
    let mut j = 0;
    c.bench_function("score/50x256x8", |b| {
        b.iter(|| {
            let s = f
                .score(black_box(&rest[j % rest.len()]))
                .expect("dims match");
            j += 7;
            black_box(s)
        })
    });
    let mut k = 0;
    c.bench_function("attribute_and_update/50x256x8", |b| {
        b.iter(|| {
            let a = f
                .attribute_and_update(black_box(&rest[k % rest.len()]))
                .expect("dims match");
            k += 1;
            black_box(a)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
