//! Window scoring of detections on labelled streams, in the spirit of the
//! usual streaming-anomaly benchmarks: a window around each event, a reward
//! for the first detection in it that is larger the earlier it comes, a
//! charge for each detection outside every window, a charge for each missed
//! window; three cost profiles; one global threshold per profile.
//!
//! Part of the stream benchmark (`streams/`). The rules, all ours:
//!
//! - A stream of `n` rows with `k` events gets windows `0.1 n / k` rows wide,
//!   centred on each event (clipped to the stream; overlapping windows are
//!   merged). Rows of the first 15 % (the probation) are not scored.
//! - A detection is a row whose output reaches the threshold. The first one
//!   in a window earns `a_tp * σ(y)`, with `y = (t - end) / width` in
//!   [-1, 0) and `σ(y) = 2 / (1 + e^{5y}) - 1` (about 1 at the window's start,
//!   0 at its end); later detections in the same window count nothing.
//! - A detection outside every window costs `a_fp * σ(y)` (negative) with `y`
//!   measured from the end of the previous window (one window after it the
//!   charge is close to its full weight), or `a_fp` when no window precedes.
//! - A window without a detection costs `a_fn`.
//! - The total is normalised: 0 for a detector that never fires, 100 for
//!   one that fires at the first row of every window and nowhere else.

/// Costs of one profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    pub a_tp: f64,
    pub a_fp: f64,
    pub a_fn: f64,
}

/// Standard, low false positives, low false negatives.
pub const PROFILES: [Profile; 3] = [
    Profile {
        name: "standard",
        a_tp: 1.0,
        a_fp: 0.11,
        a_fn: 1.0,
    },
    Profile {
        name: "low_fp",
        a_tp: 1.0,
        a_fp: 0.22,
        a_fn: 1.0,
    },
    Profile {
        name: "low_fn",
        a_tp: 1.0,
        a_fp: 0.11,
        a_fn: 2.0,
    },
];

/// Share of the stream before scoring starts.
const PROBATION: f64 = 0.15;

fn sigma(y: f64) -> f64 {
    2.0 / (1.0 + (5.0 * y).exp()) - 1.0
}

/// One stream's windows `[start, end)` and its probation end.
#[derive(Debug, Clone)]
pub struct Windows {
    pub probation: usize,
    pub spans: Vec<(usize, usize)>,
}

impl Windows {
    pub fn of(len: usize, events: &[usize]) -> Self {
        let mut spans: Vec<(usize, usize)> = Vec::new();
        if !events.is_empty() {
            let width = ((0.1 * len as f64) / events.len() as f64).max(2.0) as usize;
            for &e in events {
                let start = e.saturating_sub(width / 2);
                let end = (e + width - width / 2).min(len);
                match spans.last_mut() {
                    Some(last) if start <= last.1 => last.1 = last.1.max(end),
                    _ => spans.push((start, end)),
                }
            }
        }
        Windows {
            probation: (PROBATION * len as f64) as usize,
            spans,
        }
    }
}

/// Raw score parts of one stream at one threshold.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    /// Sum of the rewards of detected windows (before `a_tp`).
    pub tp: f64,
    /// Sum of the charges of false positives (before `a_fp`, positive).
    pub fp: f64,
    pub fp_count: usize,
    pub detected: usize,
    pub missed: usize,
}

impl Tally {
    pub fn add(&mut self, o: &Tally) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fp_count += o.fp_count;
        self.detected += o.detected;
        self.missed += o.missed;
    }

    /// Raw score under `p`.
    pub fn raw(&self, p: &Profile) -> f64 {
        p.a_tp * self.tp - p.a_fp * self.fp - p.a_fn * self.missed as f64
    }
}

/// Scores `output` (one value per row) at `threshold` against `w`.
pub fn tally(output: &[f64], w: &Windows, threshold: f64) -> Tally {
    let mut t = Tally::default();
    let mut hit = vec![false; w.spans.len()];
    let mut wi = 0; // first window not yet ended
    for (row, &v) in output.iter().enumerate().skip(w.probation) {
        if v.is_nan() || v < threshold {
            continue;
        }
        while wi < w.spans.len() && w.spans[wi].1 <= row {
            wi += 1;
        }
        match w.spans.get(wi) {
            Some(&(start, end)) if row >= start => {
                if !hit[wi] {
                    hit[wi] = true;
                    let width = (end - start) as f64;
                    t.tp += sigma((row as f64 - end as f64) / width);
                }
            }
            _ => {
                t.fp_count += 1;
                t.fp += match wi.checked_sub(1).and_then(|p| w.spans.get(p)) {
                    Some(&(start, end)) => {
                        let width = (end - start) as f64;
                        -sigma((row as f64 - end as f64 + 1.0) / width)
                    }
                    None => 1.0,
                };
            }
        }
    }
    t.detected = hit.iter().filter(|h| **h).count();
    t.missed = hit.len() - t.detected;
    t
}

/// Normalised score of `total` over streams with `windows` windows in all.
pub fn normalised(total: &Tally, windows: usize, p: &Profile) -> f64 {
    let null = -p.a_fn * windows as f64;
    let perfect = p.a_tp * sigma(-1.0) * windows as f64;
    if perfect <= null {
        return 0.0;
    }
    100.0 * (total.raw(p) - null) / (perfect - null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_detection_earns_more_and_misses_cost() {
        let w = Windows::of(1000, &[500]);
        assert_eq!(w.spans, vec![(450, 550)]);
        let mut early = vec![0.0; 1000];
        early[460] = 1.0;
        let mut late = vec![0.0; 1000];
        late[540] = 1.0;
        let (e, l) = (tally(&early, &w, 0.5), tally(&late, &w, 0.5));
        assert!(e.tp > l.tp && l.tp > 0.0, "{e:?} {l:?}");
        let none = tally(&[0.0; 1000], &w, 0.5);
        assert_eq!(none.missed, 1);
        let p = PROFILES[0];
        assert!((normalised(&none, 1, &p)).abs() < 1e-9);
        let mut best = vec![0.0; 1000];
        best[450] = 1.0;
        assert!((normalised(&tally(&best, &w, 0.5), 1, &p) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn false_positives_cost_more_far_from_a_window() {
        let w = Windows::of(1000, &[500]);
        let mut near = vec![0.0; 1000];
        near[551] = 1.0;
        let mut far = vec![0.0; 1000];
        far[900] = 1.0;
        let mut before = vec![0.0; 1000];
        before[300] = 1.0;
        let (n, f, b) = (
            tally(&near, &w, 0.5),
            tally(&far, &w, 0.5),
            tally(&before, &w, 0.5),
        );
        assert!(
            n.fp < f.fp && f.fp <= b.fp && b.fp == 1.0,
            "{n:?} {f:?} {b:?}"
        );
        // Probation rows are not scored.
        let mut early = vec![0.0; 1000];
        early[10] = 1.0;
        assert_eq!(tally(&early, &w, 0.5).fp_count, 0);
    }
}
