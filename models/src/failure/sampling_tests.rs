use super::*;

/// Columns of a small set: width 1, `x` = the row index.
struct Cols {
    x: Vec<f32>,
    y: Vec<u8>,
    weight: Vec<f32>,
    lead_h: Vec<f32>,
    visible: Vec<bool>,
    gpu: Vec<u32>,
    ts_ms: Vec<i64>,
}

impl Cols {
    fn new(rows: &[(u8, f32, f32, bool, u32)]) -> Cols {
        Cols {
            x: (0..rows.len()).map(|i| i as f32).collect(),
            y: rows.iter().map(|r| r.0).collect(),
            weight: rows.iter().map(|r| r.1).collect(),
            lead_h: rows.iter().map(|r| r.2).collect(),
            visible: rows.iter().map(|r| r.3).collect(),
            gpu: rows.iter().map(|r| r.4).collect(),
            // One row per hour.
            ts_ms: (0..rows.len() as i64).map(|i| i * 3_600_000).collect(),
        }
    }

    fn view(&self) -> Examples<'_> {
        Examples {
            width: 1,
            x: &self.x,
            y: &self.y,
            weight: &self.weight,
            lead_h: &self.lead_h,
            visible: &self.visible,
            gpu: &self.gpu,
            ts_ms: &self.ts_ms,
        }
    }
}

#[test]
fn positives_weigh_as_much_as_all_negatives() {
    let c = Cols::new(&[
        (1, 1.0, 2.0, true, 0),
        (0, 20.0, f32::NAN, true, 1),
        (0, 20.0, f32::NAN, true, 2),
    ]);
    assert_eq!(balanced_weights(&c.view()), vec![40.0, 20.0, 20.0]);
    // No positives: weights stay as they are.
    let n = Cols::new(&[(0, 3.0, f32::NAN, true, 0)]);
    assert_eq!(balanced_weights(&n.view()), vec![3.0]);
}

#[test]
fn the_baseline_sample_keeps_every_positive_and_about_ratio_negatives() {
    let mut rows = vec![(1u8, 1.0f32, 2.0f32, true, 0u32); 10];
    rows.extend(vec![(0, 1.0, f32::NAN, true, 1); 990]);
    let c = Cols::new(&rows);
    // keep = 4 × 10 / 990: the draw below keeps negatives with i % 25 == 0.
    let (x, y) = balanced_sample(&c.view(), 4, |i| if i % 25 == 0 { 0.0 } else { 0.99 });
    assert_eq!(y.iter().filter(|y| **y == 1).count(), 10);
    assert_eq!(y.len(), 10 + (10..1000).filter(|i| i % 25 == 0).count());
    assert_eq!(x.len(), y.len());
    assert_eq!(&x[..10], &(0..10).map(|i| i as f32).collect::<Vec<_>>()[..]);
}

#[test]
fn event_maxima_take_visible_positives_at_least_an_hour_ahead() {
    let c = Cols::new(&[
        (1, 1.0, 5.0, true, 7),
        (1, 1.0, 2.0, true, 7),
        (1, 1.0, 0.5, true, 7),  // under an hour
        (1, 1.0, 3.0, false, 8), // precursor not visible yet
        (0, 1.0, f32::NAN, true, 9),
    ]);
    let mut m = event_maxima(&c.view(), &[0.2, 0.6, 0.9, 0.95, 0.99]);
    m.sort_by(f64::total_cmp);
    assert_eq!(m, vec![0.6]);
}

#[test]
fn the_operating_point_alarms_on_nine_in_ten_failures_ahead() {
    // Ten failing GPUs, one positive row each at the given probability,
    // and negatives below every one of them.
    let mut rows = Vec::new();
    let mut logits = Vec::new();
    for g in 0..10u32 {
        rows.push((1u8, 1.0f32, 2.0f32, true, g));
        logits.push(0.5 + f64::from(g) * 0.05);
    }
    for g in 10..30u32 {
        rows.push((0, 1.0, f32::NAN, true, g));
        logits.push(0.1);
    }
    let c = Cols::new(&rows);
    let platt = Platt::IDENTITY;
    let (t, by_budget) = operating_point(&c.view(), &logits, &platt, 10.0);
    assert!(!by_budget);
    // The 10 % quantile of the maxima (sorted: index 1) is σ(0.55); best
    // F1 separates at σ(0.5) already, so the lower wins.
    let expected = platt.apply(0.5);
    assert!((t - expected).abs() < 1e-12, "{t} vs {expected}");
    let p: Vec<f64> = logits.iter().map(|s| platt.apply(*s)).collect();
    let v = validate(&c.view(), &p, t);
    assert_eq!((v.alarmed, v.failures), (10, 10));
    assert!((v.at.recall - 1.0).abs() < 1e-12 && (v.at.precision - 1.0).abs() < 1e-12);
    assert_eq!(v.false_warnings, 0.0);
}

#[test]
fn the_budget_raises_an_operating_point_that_warns_too_often() {
    // One failing GPU (rows at logit 0.6) and a healthy GPU with 100 hourly
    // rows (≈ 4.1 GPU-days), five of whose 6-h windows reach logit 0.7.
    let mut rows = vec![(1u8, 1.0f32, 2.0f32, true, 0u32)];
    let mut logits = vec![0.6];
    for h in 0..100 {
        rows.push((0, 1.0, f32::NAN, true, 1));
        logits.push(if h % 20 == 0 { 0.7 } else { 0.0 });
    }
    let c = Cols::new(&rows);
    let platt = Platt::IDENTITY;
    let (free, by_budget) = operating_point(&c.view(), &logits, &platt, 1e9);
    assert!(!by_budget && free <= platt.apply(0.6), "{free}");
    // 5 windows over ≈ 4.1 GPU-days: 1,200 per 1,000 GPU-days; a budget of
    // 500 allows two of them — they tie, so the threshold passes them all.
    let (t, by_budget) = operating_point(&c.view(), &logits, &platt, 500.0);
    assert!(by_budget && t > platt.apply(0.7), "{t}");
    let p: Vec<f64> = logits.iter().map(|s| platt.apply(*s)).collect();
    let v = validate(&c.view(), &p, free);
    assert!(v.false_warnings > 1000.0, "{}", v.false_warnings);
    assert_eq!(validate(&c.view(), &p, t).false_warnings, 0.0);
}

#[test]
fn columns_of_unequal_length_are_refused() {
    let c = Cols::new(&[(1, 1.0, 2.0, true, 0)]);
    let mut v = c.view();
    v.gpu = &[];
    assert_eq!(
        v.check().err(),
        Some(ShapeError {
            rows: 1,
            column: "gpu",
            found: 0
        })
    );
    assert!(c.view().check().is_ok());
}

fn figures(pr_auc: f64, alarmed: usize) -> Validation {
    Validation {
        pr_auc,
        brier: 0.1,
        at: metrics::PrPoint {
            threshold: 0.5,
            precision: 0.5,
            recall: 0.5,
        },
        alarmed,
        failures: 10,
        false_warnings: 0.0,
    }
}

#[test]
fn the_better_model_on_validation_alarms() {
    // The case: the baseline's PR-AUC is higher, so it is kept.
    let c = choose_primary(&figures(0.840, 9), &figures(0.879, 8));
    assert_eq!(c.primary, Primary::Logistic);
    assert!(
        c.reason.contains("0.879") && c.reason.contains("0.840"),
        "{}",
        c.reason
    );
    assert_eq!(
        choose_primary(&figures(0.9, 9), &figures(0.879, 9)).primary,
        Primary::Gbdt
    );
    // A tie in PR-AUC goes to the one that warns more failures in time,
    // then to the GBDT.
    assert_eq!(
        choose_primary(&figures(0.8, 7), &figures(0.8, 8)).primary,
        Primary::Logistic
    );
    assert_eq!(
        choose_primary(&figures(0.8, 8), &figures(0.8, 8)).primary,
        Primary::Gbdt
    );
    // Nothing to judge by: the GBDT, saying so.
    let none = choose_primary(&figures(0.0, 0), &figures(f64::NAN, 0));
    assert_eq!(none.primary, Primary::Gbdt);
    assert!(none.reason.contains("no failure"), "{}", none.reason);
}
