//! Training's sampling and operating point: the pieces of `forewarn train`
//! between "example sets built" and "artifact written" that decide what the
//! model learns from and where it alarms. Class-balancing weights for the
//! booster, a class-balanced subsample for the baseline (linfa takes no
//! weights), per-failure maxima and the operating point on the calibration
//! split.
//!
//! The example sets are built by `datasets` (which `models` does not use);
//! [`Examples`] borrows their columns, so the logic here stays pure
//! computation on slices.

use std::collections::HashMap;

use super::common::Primary;
use super::platt::Platt;
use super::{budget, metrics};

pub use super::examples::{Examples, ShapeError};

/// Class-balancing weights: positives weigh as much as all negatives.
pub fn balanced_weights(set: &Examples<'_>) -> Vec<f32> {
    let (mut wp, mut wn) = (0.0f64, 0.0f64);
    for (y, w) in set.y.iter().zip(set.weight) {
        if *y == 1 {
            wp += f64::from(*w);
        } else {
            wn += f64::from(*w);
        }
    }
    let k = if wp > 0.0 { (wn / wp) as f32 } else { 1.0 };
    set.y
        .iter()
        .zip(set.weight)
        .map(|(y, w)| if *y == 1 { w * k } else { *w })
        .collect()
}

/// A class-balanced subsample for the baseline (linfa takes no weights):
/// every positive and up to `ratio` × as many negatives. `draw(i)` is row
/// `i`'s uniform number in [0, 1); the caller seeds it, so the same seed
/// keeps the same rows.
pub fn balanced_sample(
    set: &Examples<'_>,
    ratio: usize,
    draw: impl Fn(usize) -> f64,
) -> (Vec<f32>, Vec<u8>) {
    let pos = set.positives().max(1);
    let neg = set.len() - set.positives();
    let keep = ((ratio * pos) as f64 / neg.max(1) as f64).min(1.0);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in 0..set.len() {
        if set.y[i] == 1 || draw(i) < keep {
            x.extend_from_slice(set.row(i));
            y.push(set.y[i]);
        }
    }
    (x, y)
}

/// A scorer's output on every row of a set.
pub fn score(set: &Examples<'_>, f: impl Fn(&[f32]) -> f64) -> Vec<f64> {
    (0..set.len()).map(|i| f(set.row(i))).collect()
}

/// Per failing GPU in `set` whose failure has a precursor, the highest
/// probability at least 1 h ahead (rows where the precursor shows).
pub fn event_maxima(set: &Examples<'_>, p: &[f64]) -> Vec<f64> {
    let mut best: HashMap<u32, f64> = HashMap::new();
    for (i, pi) in p.iter().enumerate().take(set.len()) {
        if set.y[i] == 1 && set.lead_h[i] >= 1.0 && set.visible[i] {
            let e = best.entry(set.gpu[i]).or_insert(0.0);
            *e = e.max(*pi);
        }
    }
    best.into_values().collect()
}

/// The operating point on the calibration split: the lower of the
/// best-F1 threshold and the one that alarms on 90% of its failures at
/// least an hour ahead (floored at 1e-4, so the model alarms on something
/// above noise) — raised, where that warns more often, to the lowest one
/// whose false warnings stay within `budget` per 1,000 GPU-days
/// ([`budget::budget_threshold`]). Returns the threshold and whether the
/// budget set it.
pub fn operating_point(
    ca: &Examples<'_>,
    logits: &[f64],
    platt: &Platt,
    budget: f64,
) -> (f64, bool) {
    let p: Vec<f64> = logits.iter().map(|s| platt.apply(*s)).collect();
    let curve = metrics::pr_curve(&p, ca.y, ca.weight);
    let f1 = metrics::best_f1(&curve).map_or(0.5, |p| p.threshold);
    let mut maxima = event_maxima(ca, &p);
    maxima.sort_by(f64::total_cmp);
    let recall90 = maxima.get(maxima.len() / 10).copied().unwrap_or(f1);
    let by_recall = recall90.min(f1).max(1e-4);
    let by_budget = budget::budget_threshold(ca, &p, budget);
    if by_budget > by_recall {
        (by_budget, true)
    } else {
        (by_recall, false)
    }
}

/// One model's validation figures at its operating point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Validation {
    /// Weighted average precision (PR-AUC).
    pub pr_auc: f64,
    pub brier: f64,
    /// The PR curve's point at the threshold (zeros when none reaches it).
    pub at: metrics::PrPoint,
    /// Failures with a precursor whose best probability ≥ 1 h ahead
    /// reaches the threshold.
    pub alarmed: usize,
    /// Failures with a precursor.
    pub failures: usize,
    /// Warnings on GPUs that do not fail, per 1,000 GPU-days.
    pub false_warnings: f64,
}

/// Validation figures of probabilities `p` on `va` at `threshold`.
pub fn validate(va: &Examples<'_>, p: &[f64], threshold: f64) -> Validation {
    let curve = metrics::pr_curve(p, va.y, va.weight);
    let at = curve
        .iter()
        .rev()
        .find(|c| c.threshold >= threshold)
        .copied()
        .unwrap_or(metrics::PrPoint {
            threshold,
            precision: 0.0,
            recall: 0.0,
        });
    let ev = event_maxima(va, p);
    Validation {
        pr_auc: metrics::average_precision(&curve),
        brier: metrics::brier(p, va.y, va.weight),
        at,
        alarmed: ev.iter().filter(|m| **m >= threshold).count(),
        failures: ev.len(),
        false_warnings: budget::false_warning_rate(va, p, threshold),
    }
}

/// Which model alarms, and why, in one line for `train`'s output.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub primary: Primary,
    pub reason: String,
}

/// Keeps the better model on the validation split: the higher PR-AUC, then
/// the more failures alarmed ≥ 1 h ahead. The GBDT on a tie, and when the
/// split has no positive row to judge by.
pub fn choose_primary(gbdt: &Validation, logistic: &Validation) -> Choice {
    let judged = |v: &Validation| v.pr_auc.is_finite() && v.pr_auc > 0.0;
    if !judged(gbdt) && !judged(logistic) {
        return Choice {
            primary: Primary::Gbdt,
            reason: "the validation split has no failure to compare on: keeping the GBDT".into(),
        };
    }
    let key = |v: &Validation| (v.pr_auc, v.alarmed);
    let logistic_wins = match key(logistic).0.total_cmp(&key(gbdt).0) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => logistic.alarmed > gbdt.alarmed,
    };
    let (primary, win, lose, loser) = if logistic_wins {
        (Primary::Logistic, logistic, gbdt, "the GBDT")
    } else {
        (Primary::Gbdt, gbdt, logistic, "the logistic baseline")
    };
    Choice {
        primary,
        reason: format!(
            "validation PR-AUC {:.3} against {loser}'s {:.3}, {}/{} failures alarmed ≥ 1 h against {}/{}",
            win.pr_auc, lose.pr_auc, win.alarmed, win.failures, lose.alarmed, lose.failures
        ),
    }
}

#[cfg(test)]
#[path = "sampling_tests.rs"]
mod tests;
