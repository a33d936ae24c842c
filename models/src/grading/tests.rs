//! The grader's rules on hand-made score sequences: warm-up, flagging,
//! hysteresis, repeat suppression, scale invariance, validation.

use super::*;
use crate::rng::Xoshiro256PlusPlus;

fn grader() -> Grader {
    Grader::new(GraderConfig::default()).expect("defaults are valid")
}

/// Ordinary forest-like scores around `level` with relative noise `noise`.
fn ordinary(rng: &mut Xoshiro256PlusPlus, level: f64, noise: f64) -> f64 {
    level * (1.0 + noise * rng.next_gaussian())
}

#[test]
fn warming_up_says_so_and_grades_nothing() {
    let mut g = grader();
    for i in 0..GraderConfig::default().warmup {
        let v = g.process(if i == 50 { 100.0 } else { 1.0 });
        assert!(
            v.warming_up && !v.is_anomaly && v.grade == 0.0,
            "row {i}: {v:?}"
        );
    }
    assert!(!g.process(1.0).warming_up);
}

#[test]
fn an_event_is_flagged_once_and_its_repeats_are_suppressed() {
    let mut g = grader();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for _ in 0..2000 {
        g.process(ordinary(&mut rng, 1.0, 0.1));
    }
    // Four rows of the same high score: one flag, three repeats.
    let first = g.process(1.5);
    assert!(
        first.is_anomaly && first.grade >= 0.5 && first.in_event,
        "{first:?}"
    );
    for _ in 0..3 {
        let r = g.process(1.5);
        assert!(!r.is_anomaly && r.grade == 0.0, "{r:?}");
        assert!(r.in_event && r.event_grade == first.grade, "{r:?}");
    }
    // A clear rise inside the event is news.
    let rise = g.process(3.0);
    assert!(rise.is_anomaly && rise.grade > first.grade, "{rise:?}");
    // Back to ordinary: the event closes and a new one can open.
    let calm = g.process(1.0);
    assert!(!calm.in_event && calm.event_grade == 0.0, "{calm:?}");
    assert!(g.process(3.0).is_anomaly);
}

#[test]
fn hysteresis_keeps_an_event_open_between_release_and_lower() {
    let mut g = grader();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    for _ in 0..2000 {
        g.process(ordinary(&mut rng, 1.0, 0.1));
    }
    let (mean, dev) = (g.stats().mean(), g.stats().deviation(g.config()));
    let c = g.config().clone();
    assert!(g.process(mean + (c.lower + 0.5) * dev).is_anomaly);
    // Between release and lower: still the same event.
    let mid = g.process(mean + 0.5 * (c.release + c.lower) * dev);
    assert!(mid.in_event && !mid.is_anomaly, "{mid:?}");
    let low = g.process(mean + 0.5 * c.release * dev);
    assert!(!low.in_event, "{low:?}");
}

#[test]
fn the_same_departure_grades_the_same_at_any_score_scale() {
    // Two streams whose ordinary scores differ by a factor of three (a
    // smooth and a noisy series): the same relative departure gets the
    // same grade, which a fixed score threshold cannot give.
    let mut grades = Vec::new();
    for level in [1.0, 3.0] {
        let mut g = grader();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        for _ in 0..3000 {
            g.process(ordinary(&mut rng, level, 0.1));
        }
        grades.push(g.process(level * 1.8).grade);
    }
    assert!(grades[0] > 0.5, "{grades:?}");
    assert!((grades[0] - grades[1]).abs() < 0.05, "{grades:?}");
}

#[test]
fn ordinary_scores_are_rarely_flagged() {
    let mut g = grader();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let n = 100_000;
    let grades: Vec<f64> = (0..n)
        .map(|_| g.process(ordinary(&mut rng, 1.0, 0.1)).grade)
        .collect();
    // The lower threshold (2.5 deviations) lets the odd ordinary score
    // through at grade ~0.5; a grade that clears a usable threshold is rare.
    let flags = grades.iter().filter(|g| **g > 0.0).count();
    let high = grades.iter().filter(|g| **g >= 0.7).count();
    assert!(flags < n / 100, "{flags} flags in {n} ordinary scores");
    assert!(
        high < n / 10_000,
        "{high} flags at grade 0.7 in {n} ordinary scores"
    );
}

#[test]
fn scores_at_or_below_min_score_are_never_flagged() {
    let mut g = grader();
    for _ in 0..1000 {
        g.process(0.5);
    }
    assert!(!g.process(0.99).is_anomaly);
}

#[test]
fn validate_names_fields() {
    let field_of = |c: GraderConfig| match c.validate() {
        Err(CalibrationError::InvalidParameter { field, .. }) => Some(field),
        _ => None,
    };
    let release = GraderConfig {
        release: 5.0,
        ..Default::default()
    };
    assert_eq!(field_of(release), Some("release"));
    let decay = GraderConfig {
        score_decay: 0.0,
        ..Default::default()
    };
    assert_eq!(field_of(decay), Some("score_decay"));
    let known = GraderConfig {
        known_horizon: 100_001,
        ..Default::default()
    };
    assert_eq!(field_of(known), Some("known_horizon"));
    assert_eq!(field_of(GraderConfig::default()), None);
}

#[test]
fn snapshot_round_trip_continues_identically() {
    let mut a = grader();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for _ in 0..500 {
        a.process(ordinary(&mut rng, 1.0, 0.2));
    }
    let mut b: Grader =
        serde_json::from_str(&serde_json::to_string(&a).expect("encodes")).expect("decodes");
    assert!(b.is_consistent());
    for _ in 0..500 {
        let s = ordinary(&mut rng, 1.0, 0.3);
        assert_eq!(a.process(s), b.process(s));
    }
}
