use super::*;

const H: i64 = 3_600_000;

fn fate(failure_ms: Option<i64>, last_ms: i64) -> Fate {
    Fate {
        first_ms: 0,
        last_ms,
        host: 0,
        failure_ms,
        kind: failure_ms.map(|_| "hbm_ecc".to_string()),
        onset_ms: None,
    }
}

#[test]
fn outcomes_follow_the_horizon_and_censoring() {
    let fails = fate(Some(100 * H), 100 * H);
    assert_eq!(
        outcome(&fails, 90 * H, 24 * H),
        Outcome::Positive { lead_ms: 10 * H }
    );
    assert_eq!(
        outcome(&fails, 76 * H, 24 * H),
        Outcome::Positive { lead_ms: 24 * H }
    );
    assert_eq!(outcome(&fails, 75 * H, 24 * H), Outcome::Negative);
    assert_eq!(outcome(&fails, 100 * H, 24 * H), Outcome::Failed);
    let healthy = fate(None, 100 * H);
    assert_eq!(outcome(&healthy, 76 * H, 24 * H), Outcome::Negative);
    // Data ends 23 h later: it may yet fail within the horizon.
    assert_eq!(outcome(&healthy, 77 * H, 24 * H), Outcome::Censored);
}

#[test]
fn hashes_are_deterministic_and_uniform() {
    assert_eq!(unit_hash(1, 2, 3), unit_hash(1, 2, 3));
    assert_ne!(unit_hash(1, 2, 3), unit_hash(2, 2, 3));
    let n = 20_000;
    let kept = (0..n).filter(|i| unit_hash(7, 11, *i) < 0.1).count();
    assert!((1_700..2_300).contains(&kept), "{kept}");
}

#[test]
fn splits_keep_gpus_apart_and_training_before_the_cut() {
    let fates = Fates {
        start_ms: 0,
        end_ms: 100 * H,
        ..Fates::default()
    };
    let cfg = SetConfig::default();
    let mut seen = std::collections::HashMap::new();
    for g in 0..200 {
        let name = format!("GPU-{g}");
        for t in 0..100 {
            if let Some(s) = split_of(&cfg, &fates, &name, t * H) {
                // One split per GPU, whatever the time.
                assert_eq!(*seen.entry(name.clone()).or_insert(s), s);
                match s {
                    Split::Train => assert!(t * H + cfg.horizon_ms <= 50 * H),
                    _ => assert!(t * H >= 50 * H),
                }
            }
        }
    }
    let train = seen.values().filter(|s| **s == Split::Train).count();
    assert!((100..180).contains(&train), "{train} of 200 train");
}

#[test]
fn only_rows_inside_a_precursor_are_visible() {
    let mut f = fate(Some(100 * H), 100 * H);
    // No onset known: every row before the failure counts.
    assert!(Fates::visible(&f, 80 * H));
    f.onset_ms = Some(90 * H);
    assert!(!Fates::visible(&f, 89 * H));
    assert!(Fates::visible(&f, 90 * H));
    // A kind with no precursor is never visible.
    f.kind = Some("sudden_death".into());
    assert!(!Fates::visible(&f, 95 * H));
    // Healthy GPUs are.
    assert!(Fates::visible(&fate(None, 100 * H), 10 * H));
}
