//! Property tests of the forest: finite non-negative scores for any finite
//! input, attribution that sums to the score, and snapshot/restore equivalence.

use models::grading::GraderConfig;
use models::rcf::{Forest, ThresholdedForest};
use proptest::prelude::*;

fn small_forest(dims: usize, shingle: usize, seed: u64) -> Forest {
    Forest::builder()
        .trees(5)
        .sample_size(32)
        .input_dimensions(dims)
        .shingle_size(shingle)
        .output_after(4)
        .seed(seed)
        .build()
        .expect("valid")
}

/// Finite values of very different magnitudes, with repeats.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        -10.0f64..10.0,
        prop::num::f64::NORMAL,
        Just(0.0),
        Just(1.0),
        Just(f64::MAX),
        Just(-f64::MAX),
        Just(f64::MIN_POSITIVE),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn scores_are_finite_and_non_negative(
        rows in prop::collection::vec(prop::collection::vec(value(), 2), 1..300),
        seed in any::<u64>(),
        shingle in 1usize..4,
    ) {
        let mut f = small_forest(2, shingle, seed);
        for r in &rows {
            let a = f.attribution(r).expect("dims");
            let s = f.score_and_update(r).expect("dims");
            prop_assert!(s.is_finite() && s >= 0.0, "score {}", s);
            prop_assert!(a.high.iter().chain(&a.low).all(|x| x.is_finite() && *x >= 0.0));
            // Equal up to the f32 rounding of the box arithmetic.
            prop_assert!((a.total() - s).abs() <= 1e-6 * s.max(1.0), "attr {} score {}", a.total(), s);
        }
    }

    #[test]
    fn snapshot_restore_continue_equals_uninterrupted(
        rows in prop::collection::vec(prop::collection::vec(-5.0f64..5.0, 3), 20..400),
        cut in 0usize..400,
        seed in any::<u64>(),
        nan_every in 0usize..20,
    ) {
        let rows: Vec<Vec<f64>> = rows
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                if nan_every > 0 && i % (nan_every + 3) == 0 {
                    r[1] = f64::NAN;
                }
                r
            })
            .collect();
        let cut = cut.min(rows.len());
        let calib = GraderConfig { warmup: 16, ..Default::default() };
        let mut a = ThresholdedForest::new(small_forest(calib.forest_dimensions(3), 2, seed), calib.clone()).expect("valid");
        for r in &rows[..cut] {
            a.process(r).expect("dims");
        }
        let mut b = ThresholdedForest::from_json(&a.to_json().expect("encodes")).expect("restores");
        for r in &rows[cut..] {
            let va = a.process(r).expect("dims");
            let vb = b.process(r).expect("dims");
            prop_assert_eq!(va, vb);
        }
    }
}
