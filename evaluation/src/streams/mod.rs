//! The stream benchmark: a labelled corpus of our own ([`corpus`]), the
//! detectors run over it ([`detect`]) and window scoring with one global
//! threshold per profile ([`scoring`]). It answers one question: does the
//! anomaly grade mean the same on every stream? A grade that does can be
//! thresholded once for all streams; a raw score, even min-max scaled per
//! stream with hindsight, cannot.
//!
//! `cargo run -p evaluation --bin streams -- --out DIR` runs it (see the
//! binary for its flags); docs/performance.md has the numbers.

pub mod companions;
pub mod corpus;
pub mod detect;
pub mod eighth;
pub mod fifth;
pub mod fourth;
pub mod fresh;
pub mod scoring;
pub mod seventh;
pub mod sixth;
pub mod third;
pub mod unseen;

use serde::Serialize;

use corpus::Stream;
use scoring::{PROFILES, Profile, Tally, Windows};

/// One stream run: its windows and every detector's output.
pub struct Scored {
    pub stream: Stream,
    pub windows: Windows,
    pub outputs: detect::Outputs,
}

/// Thresholds swept: 0 to 1 in steps of 0.005 (every output is in [0, 1]).
pub fn thresholds() -> Vec<f64> {
    (1..=200).map(|i| f64::from(i) * 0.005).collect()
}

/// The summed tally of `output` over `runs` at `threshold`.
pub fn total<'a>(runs: impl Iterator<Item = (&'a [f64], &'a Windows)>, threshold: f64) -> Tally {
    let mut t = Tally::default();
    for (out, w) in runs {
        t.add(&scoring::tally(out, w, threshold));
    }
    t
}

/// Windows in all of `runs`.
pub fn window_count<'a>(runs: impl Iterator<Item = &'a Windows>) -> usize {
    runs.map(|w| w.spans.len()).sum()
}

/// The best threshold for `p` over `outputs` (one per stream, paired with
/// `windows`) and its normalised score.
pub fn best_threshold(outputs: &[&[f64]], windows: &[&Windows], p: &Profile) -> (f64, f64) {
    let n = window_count(windows.iter().copied());
    let mut best = (1.0, f64::NEG_INFINITY);
    for th in thresholds() {
        let t = total(outputs.iter().copied().zip(windows.iter().copied()), th);
        let s = scoring::normalised(&t, n, p);
        if s > best.1 {
            best = (th, s);
        }
    }
    best
}

/// One detector's result under one profile.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    pub detector: String,
    pub profile: &'static str,
    /// Threshold chosen on the tuning seeds.
    pub threshold: f64,
    pub tune_score: f64,
    /// Held-out seeds at the tuning threshold.
    pub holdout_score: f64,
    /// Held-out seeds at their own best threshold.
    pub holdout_best: f64,
    pub holdout_detected: usize,
    pub holdout_windows: usize,
    pub holdout_false_positives: usize,
}

/// One detector's global threshold under one profile, chosen on the
/// tuning seeds.
#[derive(Debug, Clone)]
pub struct Tuned {
    pub detector: &'static str,
    pub profile: &'static Profile,
    pub threshold: f64,
    pub tune_score: f64,
}

/// Every detector's best threshold per profile on `tune`: chosen once, then
/// scored on any number of held-out sets ([`compare`]).
pub fn tune_thresholds(tune: &[Scored]) -> Vec<Tuned> {
    let tw: Vec<&Windows> = tune.iter().map(|r| &r.windows).collect();
    let mut out = Vec::new();
    for name in detect::DETECTORS {
        let to: Vec<&[f64]> = tune.iter().map(|r| r.outputs.get(name)).collect();
        for p in &PROFILES {
            let (threshold, tune_score) = best_threshold(&to, &tw, p);
            out.push(Tuned {
                detector: name,
                profile: p,
                threshold,
                tune_score,
            });
        }
    }
    out
}

/// Scores `holdout` at the thresholds of `tuned` (and at its own best).
pub fn compare(tuned: &[Tuned], holdout: &[Scored]) -> Vec<Line> {
    let hw: Vec<&Windows> = holdout.iter().map(|r| &r.windows).collect();
    let hn = window_count(hw.iter().copied());
    tuned
        .iter()
        .map(|t| {
            let p = t.profile;
            let ho: Vec<&[f64]> = holdout.iter().map(|r| r.outputs.get(t.detector)).collect();
            let tally = total(ho.iter().copied().zip(hw.iter().copied()), t.threshold);
            let (_, holdout_best) = best_threshold(&ho, &hw, p);
            Line {
                detector: t.detector.to_string(),
                profile: p.name,
                threshold: t.threshold,
                tune_score: t.tune_score,
                holdout_score: scoring::normalised(&tally, hn, p),
                holdout_best,
                holdout_detected: tally.detected,
                holdout_windows: hn,
                holdout_false_positives: tally.fp_count,
            }
        })
        .collect()
}

/// Per family on `runs`: windows detected, windows, false positives of
/// `detector` at `threshold`.
pub fn per_family(runs: &[Scored], detector: &str, threshold: f64) -> Vec<(String, Tally, usize)> {
    let mut families: Vec<&str> = runs.iter().map(|r| r.stream.family).collect();
    families.dedup();
    families.sort_unstable();
    families.dedup();
    families
        .into_iter()
        .map(|f| {
            let sel = runs.iter().filter(|r| r.stream.family == f);
            let n = window_count(sel.clone().map(|r| &r.windows));
            let t = total(
                sel.map(|r| (r.outputs.get(detector), &r.windows)),
                threshold,
            );
            (f.to_string(), t, n)
        })
        .collect()
}
