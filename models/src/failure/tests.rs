use super::*;
use crate::failure::gbdt::Columns;
use crate::rng::SplitMix64;

/// A toy problem: y = 1 when column 3 is high and column 7 is present;
/// NaNs sprinkled in.
fn toy(n: usize, seed: u64) -> (Vec<f32>, Vec<u8>, Vec<f32>) {
    let mut r = SplitMix64::new(seed);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let mut row = vec![0f32; INPUT_WIDTH];
        for v in row.iter_mut() {
            *v = (r.next_u64() % 1000) as f32 / 100.0;
        }
        if r.next_u64().is_multiple_of(5) {
            row[7] = f32::NAN;
        }
        let pos = row[3] > 7.0 && !row[7].is_nan();
        y.push(u8::from(pos));
        x.extend(row);
    }
    let w = vec![1.0; y.len()];
    (x, y, w)
}

#[test]
fn flattened_trees_predict_like_perpetual() {
    let (x, y, w) = toy(2_000, 1);
    let p = GbdtParams {
        booster: Booster::Perpetual,
        threads: Some(1),
        iteration_limit: Some(30),
        ..GbdtParams::default()
    };
    let b = gbdt::fit_booster(&x, INPUT_WIDTH, &y, &w, &p).expect("fit");
    let g = Gbdt::from_booster(&b).expect("flatten");
    let d = Columns::new(&x, INPUT_WIDTH, &y, &w);
    let theirs = b.predict(&perpetual::Matrix::new(&d.cols, d.n, INPUT_WIDTH), false);
    predicts_like_and_learns(&g, &theirs, &x, &y);
}

/// `g` gives the booster's own predictions `theirs` on every row, and it
/// learnt the toy rule.
fn predicts_like_and_learns(g: &Gbdt, theirs: &[f64], x: &[f32], y: &[u8]) {
    for (r, row) in x.chunks_exact(INPUT_WIDTH).enumerate() {
        assert!((g.logit(row) - theirs[r]).abs() < 1e-6, "row {r}");
    }
    let n = y.len();
    let acc = x
        .chunks_exact(INPUT_WIDTH)
        .zip(y)
        .filter(|(row, y)| (g.logit(row) > 0.0) == (**y == 1))
        .count();
    assert!(acc as f64 > 0.95 * n as f64, "accuracy {acc}/{n}");
}

#[test]
fn flattened_trees_predict_like_forust() {
    let (x, y, w) = toy(2_000, 3);
    let d = Columns::new(&x, INPUT_WIDTH, &y, &w);
    let p = GbdtParams {
        threads: Some(1),
        rounds: 30,
        ..GbdtParams::default()
    };
    let b = forust::fit_booster(&d, INPUT_WIDTH, &p).expect("fit");
    let g = forust::flatten(&b).expect("flatten");
    let theirs = b.predict(&forust_ml::Matrix::new(&d.cols, d.n, INPUT_WIDTH), false);
    predicts_like_and_learns(&g, &theirs, &x, &y);
}

#[test]
fn artifact_round_trips_and_refuses_other_schemas() {
    let (x, y, w) = toy(600, 2);
    let p = GbdtParams {
        threads: Some(1),
        rounds: 10,
        ..GbdtParams::default()
    };
    let g = Gbdt::train(&x, INPUT_WIDTH, &y, &w, &p).expect("train");
    let l = Logistic::train(&x, INPUT_WIDTH, &y).expect("baseline");
    // The baseline ranks the toy problem well above chance.
    let s: Vec<f64> = x.chunks_exact(INPUT_WIDTH).map(|r| l.logit(r)).collect();
    let ap = metrics::average_precision(&metrics::pr_curve(&s, &y, &w));
    let prevalence = y.iter().filter(|v| **v == 1).count() as f64 / y.len() as f64;
    assert!(
        ap > 2.0 * prevalence,
        "baseline AP {ap} vs prevalence {prevalence}"
    );
    let m = FailureModel::new(
        g,
        Platt::IDENTITY,
        l,
        Platt::IDENTITY,
        [0.5, 0.5],
        TrainingMeta::default(),
    );
    let dir = std::env::temp_dir().join(format!("fw-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("m.fwm");
    m.save(&path).expect("save");
    let back = FailureModel::load(&path).expect("load");
    assert_eq!(back, m);
    // Another feature schema: a clear refusal.
    let mut other = m.clone();
    other.feature_schema_version += 1;
    other.save(&path).expect("save");
    let err = FailureModel::load(&path).expect_err("mismatch").to_string();
    assert!(
        err.contains("feature schema version") && err.contains("retrain"),
        "{err}"
    );
    // Another model input: refused too.
    let mut other = m.clone();
    other.input_version = INPUT_VERSION - 1;
    other.save(&path).expect("save");
    let err = FailureModel::load(&path).expect_err("mismatch").to_string();
    assert!(
        err.contains("model input version") && err.contains("retrain"),
        "{err}"
    );
    std::fs::write(&path, b"{\"hello\": 1}").expect("write");
    assert!(matches!(
        FailureModel::load(&path),
        Err(FailureModelError::Format { .. })
    ));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
