//! Weighted classification metrics for reports: precision-recall curve,
//! average precision (PR-AUC), the best-F1 operating point, Brier score.
//! Weights undo negative subsampling, so the figures are those of the full
//! data.

/// One point of a precision-recall curve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrPoint {
    pub threshold: f64,
    pub precision: f64,
    pub recall: f64,
}

/// The PR curve, from the highest threshold down (one point per distinct
/// score).
pub fn pr_curve(score: &[f64], y: &[u8], w: &[f32]) -> Vec<PrPoint> {
    let mut idx: Vec<usize> = (0..score.len()).collect();
    idx.sort_by(|a, b| score[*b].total_cmp(&score[*a]));
    let pos: f64 = y
        .iter()
        .zip(w)
        .filter(|(y, _)| **y == 1)
        .map(|(_, w)| f64::from(*w))
        .sum();
    let (mut tp, mut fp) = (0.0, 0.0);
    let mut out = Vec::new();
    for (k, &i) in idx.iter().enumerate() {
        if y[i] == 1 {
            tp += f64::from(w[i]);
        } else {
            fp += f64::from(w[i]);
        }
        let last = k + 1 == idx.len() || score[idx[k + 1]] != score[i];
        if last && tp + fp > 0.0 {
            out.push(PrPoint {
                threshold: score[i],
                precision: tp / (tp + fp),
                recall: if pos > 0.0 { tp / pos } else { 0.0 },
            });
        }
    }
    out
}

/// Average precision: Σ (Rₖ − Rₖ₋₁) Pₖ over the curve.
pub fn average_precision(curve: &[PrPoint]) -> f64 {
    let mut prev = 0.0;
    let mut ap = 0.0;
    for p in curve {
        ap += (p.recall - prev) * p.precision;
        prev = p.recall;
    }
    ap
}

/// The point of highest F1.
pub fn best_f1(curve: &[PrPoint]) -> Option<PrPoint> {
    let f1 = |p: &PrPoint| {
        if p.precision + p.recall > 0.0 {
            2.0 * p.precision * p.recall / (p.precision + p.recall)
        } else {
            0.0
        }
    };
    curve.iter().copied().max_by(|a, b| f1(a).total_cmp(&f1(b)))
}

/// Weighted Brier score of probabilities.
pub fn brier(p: &[f64], y: &[u8], w: &[f32]) -> f64 {
    let (mut s, mut n) = (0.0, 0.0);
    for ((p, y), w) in p.iter().zip(y).zip(w) {
        let d = p - f64::from(*y);
        s += f64::from(*w) * d * d;
        n += f64::from(*w);
    }
    if n > 0.0 { s / n } else { f64::NAN }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_ranking_has_ap_one_and_random_has_prevalence() {
        let s = [0.9, 0.8, 0.2, 0.1];
        let y = [1, 1, 0, 0];
        let w = [1.0; 4];
        assert!((average_precision(&pr_curve(&s, &y, &w)) - 1.0).abs() < 1e-12);
        // All tied: precision is the prevalence.
        let s = [0.5; 4];
        let y = [1, 0, 0, 0];
        assert!((average_precision(&pr_curve(&s, &y, &w)) - 0.25).abs() < 1e-12);
        // Weights count as repeated rows.
        let s = [0.9, 0.1];
        let y = [0, 1];
        let w = [3.0, 1.0];
        let c = pr_curve(&s, &y, &w);
        assert!((c[1].precision - 0.25).abs() < 1e-12);
    }
}
