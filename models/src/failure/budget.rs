//! The failure model's warning budget: how often its alarm would warn on
//! GPUs that do not fail, and the lowest operating point that keeps that
//! within a budget (false warnings per 1,000 GPU-days, like the alert
//! summary's own target). Part of `forewarn train`'s operating-point
//! choice ([`super::sampling::operating_point`]): recall picks a
//! threshold, the budget may raise it.
//!
//! A warning is counted once per GPU and [`WINDOW_MS`] of event time in
//! which any of its rows reaches the threshold — the alert lifecycle
//! raises one `failure_predicted` warning for a spell above the operating
//! point, not one per row. Fixed windows keep the count monotone in the
//! threshold, so the budget's threshold is exact on the split.
//! A GPU "does not fail" when none of its rows in the split is positive.

use std::collections::{HashMap, HashSet};

use super::examples::Examples;

/// One counted warning per GPU per this much event time.
pub const WINDOW_MS: i64 = 6 * 3_600_000;

const DAY_MS: f64 = 86_400_000.0;

/// Per GPU-window of the GPUs that do not fail, the highest probability,
/// and the GPU-days the set covers (every GPU's first to last row).
fn window_maxima(set: &Examples<'_>, p: &[f64]) -> (Vec<f64>, f64) {
    let failing: HashSet<u32> = (0..set.len())
        .filter(|&i| set.y[i] == 1)
        .map(|i| set.gpu[i])
        .collect();
    let mut span: HashMap<u32, (i64, i64)> = HashMap::new();
    let mut best: HashMap<(u32, i64), f64> = HashMap::new();
    for (i, pi) in p.iter().enumerate().take(set.len()) {
        let (g, t) = (set.gpu[i], set.ts_ms[i]);
        let s = span.entry(g).or_insert((t, t));
        s.0 = s.0.min(t);
        s.1 = s.1.max(t);
        if !failing.contains(&g) && pi.is_finite() {
            let e = best.entry((g, t.div_euclid(WINDOW_MS))).or_insert(0.0);
            *e = e.max(*pi);
        }
    }
    let days = span.values().map(|(a, b)| (b - a) as f64 / DAY_MS).sum();
    (best.into_values().collect(), days)
}

/// False warnings per 1,000 GPU-days that probabilities `p` on `set` give
/// at `threshold` (0 on a set that spans no time).
pub fn false_warning_rate(set: &Examples<'_>, p: &[f64], threshold: f64) -> f64 {
    let (maxima, days) = window_maxima(set, p);
    if days <= 0.0 {
        return 0.0;
    }
    let n = maxima.iter().filter(|m| **m >= threshold).count();
    n as f64 * 1000.0 / days
}

/// The lowest threshold at which `p` on `set` warns on GPUs that do not
/// fail at most `budget` times per 1,000 GPU-days (0 when even the lowest
/// does).
pub fn budget_threshold(set: &Examples<'_>, p: &[f64], budget: f64) -> f64 {
    let (mut maxima, days) = window_maxima(set, p);
    let allowed = (budget.max(0.0) * days / 1000.0).floor() as usize;
    if allowed >= maxima.len() {
        return 0.0;
    }
    maxima.sort_by(|a, b| b.total_cmp(a));
    // Above the (allowed + 1)-th highest window: at most `allowed` reach it.
    next_up(maxima[allowed])
}

/// The smallest f64 above `x` (for finite, non-negative `x`).
fn next_up(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f64::from_bits(1);
    }
    f64::from_bits(x.to_bits() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    /// Two days of rows every hour on GPUs 0..n (GPU 0 fails).
    struct Set {
        x: Vec<f32>,
        y: Vec<u8>,
        ones: Vec<f32>,
        nan: Vec<f32>,
        visible: Vec<bool>,
        gpu: Vec<u32>,
        ts: Vec<i64>,
    }

    impl Set {
        fn new(n: u32) -> Set {
            let (mut y, mut gpu, mut ts) = (Vec::new(), Vec::new(), Vec::new());
            for g in 0..n {
                for h in 0..=48 {
                    y.push(u8::from(g == 0 && h > 40));
                    gpu.push(g);
                    ts.push(h * H);
                }
            }
            let rows = y.len();
            Set {
                x: vec![0.0; rows],
                y,
                ones: vec![1.0; rows],
                nan: vec![f32::NAN; rows],
                visible: vec![true; rows],
                gpu,
                ts,
            }
        }

        fn view(&self) -> Examples<'_> {
            Examples {
                width: 1,
                x: &self.x,
                y: &self.y,
                weight: &self.ones,
                lead_h: &self.nan,
                visible: &self.visible,
                gpu: &self.gpu,
                ts_ms: &self.ts,
            }
        }
    }

    #[test]
    fn counts_one_warning_per_gpu_window_and_only_on_gpus_that_do_not_fail() {
        let s = Set::new(10);
        let e = s.view();
        let mut p = vec![0.01; s.y.len()];
        // The failing GPU 0 is high throughout: not a false warning.
        p.iter_mut().take(49).for_each(|x| *x = 0.9);
        // GPU 1: three hours high within one window, then one in another.
        for h in [1usize, 2, 3, 30] {
            p[49 + h] = 0.5;
        }
        // GPU 2: one row at 0.3.
        p[2 * 49 + 10] = 0.3;
        // 10 GPUs × 2 days = 20 GPU-days.
        assert!((false_warning_rate(&e, &p, 0.4) - 2.0 * 1000.0 / 20.0).abs() < 1e-9);
        assert!((false_warning_rate(&e, &p, 0.2) - 3.0 * 1000.0 / 20.0).abs() < 1e-9);
        // A budget of 100 per 1,000 GPU-days allows 2 of the 3 windows.
        let t = budget_threshold(&e, &p, 100.0);
        assert!(t > 0.3 && t <= 0.5, "{t}");
        assert!(false_warning_rate(&e, &p, t) <= 100.0);
        // A budget of 0 sits just above the highest healthy window.
        let t0 = budget_threshold(&e, &p, 0.0);
        assert!(t0 > 0.5 && t0 < 0.5 + 1e-12, "{t0}");
        assert_eq!(false_warning_rate(&e, &p, t0), 0.0);
        // A budget wider than every window constrains nothing.
        assert_eq!(budget_threshold(&e, &p, 1e6), 0.0);
    }
}
