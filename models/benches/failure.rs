//! Inference cost of the failure path per GPU sample: trend update and
//! forecast, model input, and the flattened booster with Platt scaling.
//! The model is trained here on a synthetic problem of the real input width
//! with the default parameters, so the ensemble has a realistic size; pass
//! `FOREWARN_MODEL=path/to/model.fwm` to bench a trained artifact instead.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use features::{Col, FEATURE_COUNT};
use models::failure::{
    FailureModel, Gbdt, GbdtParams, INPUT_WIDTH, InputState, Logistic, Platt, TrainingMeta,
};
use models::rng::SplitMix64;
use models::trend::TrendConfig;

fn synthetic_model() -> FailureModel {
    let mut r = SplitMix64::new(3);
    let n = 20_000;
    let (mut x, mut y) = (Vec::with_capacity(n * INPUT_WIDTH), Vec::with_capacity(n));
    for _ in 0..n {
        let row: Vec<f32> = (0..INPUT_WIDTH)
            .map(|_| (r.next_u64() % 10_000) as f32 / 100.0)
            .collect();
        let z = row[3] * 0.05 + row[40] * 0.03 - row[7] * 0.04 + (r.next_u64() % 100) as f32 / 50.0;
        y.push(u8::from(z > 3.0));
        x.extend(row);
    }
    let w = vec![1.0; n];
    let g = Gbdt::train(&x, INPUT_WIDTH, &y, &w, &GbdtParams::default()).expect("train");
    let l = Logistic::train(&x, INPUT_WIDTH, &y).expect("baseline");
    FailureModel::new(
        g,
        Platt::IDENTITY,
        l,
        Platt::IDENTITY,
        [0.5, 0.5],
        TrainingMeta::default(),
    )
}

fn bench(c: &mut Criterion) {
    let model = match std::env::var("FOREWARN_MODEL") {
        Ok(p) => FailureModel::load(std::path::Path::new(&p)).expect("load the model"),
        Err(_) => synthetic_model(),
    };
    eprintln!(
        "model: {} trees, {} nodes",
        model.gbdt.trees.len(),
        model.gbdt.nodes()
    );
    let mut values = [0f32; FEATURE_COUNT];
    let mut r = SplitMix64::new(9);
    for v in values.iter_mut() {
        *v = (r.next_u64() % 10_000) as f32 / 100.0;
    }
    let cfg = TrendConfig::default();
    let mut state = InputState::new();
    let mut ts = 1_800_000_000_000i64;
    let mut x = vec![0f32; INPUT_WIDTH];
    c.bench_function("failure_model_per_sample", |b| {
        b.iter(|| {
            ts += 30_000;
            values[Col::EccSbeDelta as usize] = (ts / 30_000 % 3) as f32;
            let f = state.update(&cfg, ts, &values);
            state.build(ts, &values, f.as_ref(), &mut x);
            black_box(model.probability(black_box(&x)))
        })
    });
    c.bench_function("gbdt_probability_only", |b| {
        b.iter(|| black_box(model.probability(black_box(&x))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
