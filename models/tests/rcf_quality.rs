//! Detection quality of the forest + calibration on seeded synthetic streams
//! with ground truth: level shift, spike, variance change, broken correlation
//! and slow drift. Asserts detection within a bounded delay, a clean flag
//! rate below a ceiling, and attribution where it is well defined.

use models::grading::GraderConfig;
use models::rcf::{Direction, Forest, ThresholdedForest, Verdict};
use models::rng::Xoshiro256PlusPlus;

const N: usize = 6000;
const ONSET: usize = 4000;
/// Flags are counted on clean data only after both warm-ups.
const CLEAN_FROM: usize = 500;
/// Ceiling of the fraction of clean rows flagged at any grade (events, not
/// rows: repeats of an event are not flagged). The grader's lower threshold
/// (2.5 deviations) is deliberately permissive: a consumer thresholds the
/// grade, and at the stream corpus's global threshold (grade 0.7, see
/// docs/performance.md) far fewer clean rows pass.
/// Measured on seeds 10–15: 0.0133 with each metric's change beside it
/// (the default), 0.0051 without; the change's own tail opens more events
/// at the permissive threshold, while at grade 0.7 fewer clean rows pass
/// (0.0003 against 0.0008).
const MAX_CLEAN_FLAG_RATE: f64 = 0.02;
/// Ceiling of the fraction of clean rows flagged at grade 0.7 or more.
const MAX_CLEAN_RATE_AT_0_7: f64 = 0.001;

fn detector(seed: u64) -> ThresholdedForest {
    let calib = GraderConfig::default();
    let forest = Forest::builder()
        .input_dimensions(calib.forest_dimensions(2))
        .shingle_size(4)
        .seed(seed)
        .build()
        .expect("valid forest");
    ThresholdedForest::new(forest, calib).expect("valid calibration")
}

/// Two metrics: a daily-like cycle plus noise.
fn base(rng: &mut Xoshiro256PlusPlus, t: usize) -> [f64; 2] {
    let cycle = (t as f64 * std::f64::consts::TAU / 200.0).sin();
    [
        50.0 + 10.0 * cycle + rng.next_gaussian(),
        70.0 + 5.0 * cycle + rng.next_gaussian(),
    ]
}

struct Run {
    verdicts: Vec<Verdict>,
}

impl Run {
    fn new(seed: u64, mut row: impl FnMut(&mut Xoshiro256PlusPlus, usize) -> [f64; 2]) -> Self {
        let mut det = detector(seed);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xABCD);
        let verdicts = (0..N)
            .map(|t| det.process(&row(&mut rng, t)).expect("two values"))
            .collect();
        Self { verdicts }
    }

    fn clean_flags(&self) -> (usize, usize) {
        self.clean_flags_at(0.0)
    }

    /// Clean rows flagged with a grade above `min_grade`, and clean rows.
    fn clean_flags_at(&self, min_grade: f64) -> (usize, usize) {
        let clean = &self.verdicts[CLEAN_FROM..ONSET];
        let n = clean
            .iter()
            .filter(|v| v.is_anomaly && v.grade >= min_grade)
            .count();
        (n, clean.len())
    }

    /// Rows from the onset to the first flag.
    fn delay(&self) -> Option<usize> {
        self.verdicts[ONSET..].iter().position(|v| v.is_anomaly)
    }

    fn assert_detected_within(&self, name: &str, max_delay: usize) -> &Verdict {
        let d = self
            .delay()
            .unwrap_or_else(|| panic!("{name}: never flagged"));
        let (f, n) = self.clean_flags();
        println!("{name}: delay {d}, clean flags {f}/{n}");
        assert!(d <= max_delay, "{name}: flagged after {d} rows");
        &self.verdicts[ONSET + d]
    }
}

#[test]
fn level_shift_is_flagged() {
    let run = Run::new(1, |rng, t| {
        let mut r = base(rng, t);
        if t >= ONSET {
            r[0] += 8.0;
        }
        r
    });
    run.assert_detected_within("level shift", 4);
}

#[test]
fn spike_is_flagged_and_attributed() {
    let run = Run::new(2, |rng, t| {
        let mut r = base(rng, t);
        if t == ONSET {
            r[1] += 10.0;
        }
        r
    });
    let v = run.assert_detected_within("spike", 0);
    let why = v.explanation().expect("a flagged point has a reason");
    assert_eq!((why.metric, why.direction), (1, Direction::High), "{v:?}");
    assert!(v.grade > 0.0 && v.grade <= 1.0);
}

#[test]
fn variance_change_is_flagged() {
    let run = Run::new(3, |rng, t| {
        let mut r = base(rng, t);
        if t >= ONSET {
            r[0] += 5.0 * rng.next_gaussian();
        }
        r
    });
    run.assert_detected_within("variance change", 30);
}

#[test]
fn broken_correlation_is_flagged_and_attributed() {
    // y tracks x closely; at the onset y drops below where x says it should be,
    // while staying inside its own usual range.
    let run = Run::new(4, |rng, t| {
        let x = 50.0
            + 10.0 * (t as f64 * std::f64::consts::TAU / 200.0).sin()
            + 0.3 * rng.next_gaussian();
        let mut y = x + 0.3 * rng.next_gaussian();
        if t >= ONSET {
            y -= 4.0;
        }
        [x, y]
    });
    let v = run.assert_detected_within("broken correlation", 4);
    let why = v.explanation().expect("a flagged point has a reason");
    assert_eq!((why.metric, why.direction), (1, Direction::Low), "{v:?}");
}

#[test]
fn slow_drift_is_flagged() {
    // 0.02 sigma per row: 4 sigma after 200 rows.
    let run = Run::new(5, |rng, t| {
        let mut r = base(rng, t);
        if t >= ONSET {
            r[0] += 0.02 * (t - ONSET) as f64;
        }
        r
    });
    run.assert_detected_within("slow drift", 300);
}

#[test]
fn clean_flag_rate_is_low() {
    let (mut flags, mut high, mut total) = (0, 0, 0);
    for seed in 10..16 {
        let run = Run::new(seed, base);
        let (f, n) = run.clean_flags();
        flags += f;
        high += run.clean_flags_at(0.7).0;
        total += n;
    }
    let rate = flags as f64 / total as f64;
    let high = high as f64 / total as f64;
    println!("clean flag rate {rate:.4} (ceiling {MAX_CLEAN_FLAG_RATE}), at grade 0.7 {high:.4}");
    assert!(rate <= MAX_CLEAN_FLAG_RATE, "clean flag rate {rate}");
    assert!(
        high <= MAX_CLEAN_RATE_AT_0_7,
        "clean flag rate at grade 0.7: {high}"
    );
}

/// Rows from `from` on that the grader (`recurrence` as given: its
/// default, or 0 for off) flags in one metric's stream.
fn single_stream_flags(values: &[f64], recurrence: f64, from: usize) -> Vec<usize> {
    let calib = GraderConfig {
        recurrence,
        ..GraderConfig::default()
    };
    let forest = Forest::builder()
        .input_dimensions(calib.forest_dimensions(1))
        .shingle_size(4)
        .seed(5)
        .build()
        .expect("valid forest");
    let mut t = ThresholdedForest::new(forest, calib).expect("valid calibration");
    values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| {
            let verdict = t.process(&[*v]).expect("one metric");
            (i >= from && verdict.is_anomaly).then_some(i)
        })
        .collect()
}

/// A ramp that resets every 60–90 rows (a counter read and cleared, a
/// queue drained): each reset is normal. Without the memory of recurring
/// shapes the grade flags reset after reset; with it (the default) they
/// stop once seen, and a drop twice as deep as any reset is still news.
#[test]
fn recurring_resets_are_not_flagged_but_a_new_drop_is() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let (mut phase, mut period) = (0.0f64, 75.0);
    let values: Vec<f64> = (0..N)
        .map(|t| {
            phase += 1.0 / period;
            if phase >= 1.0 {
                phase = 0.0;
                period = 60.0 + 30.0 * rng.next_f64();
            }
            let event = if (ONSET..ONSET + 30).contains(&t) {
                -1.0
            } else {
                0.0
            };
            10.0 + phase + event + 0.02 * rng.next_gaussian()
        })
        .collect();
    let off = single_stream_flags(&values, 0.0, CLEAN_FROM);
    let on = single_stream_flags(&values, GraderConfig::default().recurrence, CLEAN_FROM);
    let clean = |f: &[usize]| f.iter().filter(|&&i| i < ONSET).count();
    eprintln!(
        "flags before the event: off {} on {}",
        clean(&off),
        clean(&on)
    );
    assert!(
        clean(&off) >= 10,
        "resets should read as new without it: {off:?}"
    );
    assert!(
        clean(&on) * 4 <= clean(&off),
        "resets still flagged: {} of {}",
        clean(&on),
        clean(&off)
    );
    assert!(
        on.iter().any(|&i| (ONSET..ONSET + 8).contains(&i)),
        "the deep drop was not flagged: {on:?}"
    );
}
