//! Stuck values: a metric that repeats its last value far longer than it
//! ever did before is a frozen sensor or a hung collector, however ordinary
//! the value.
//!
//! Why: a random cut forest isolates points that lie apart from the rest. A
//! sensor that freezes mid-stream reports a value the stream has had many
//! times, so every frozen row lands inside the data and scores as ordinary;
//! only the run is new. This counts each metric's run of exactly equal raw
//! values (missing values neither extend nor end a run) and remembers the
//! longest run that has ended. A run is stuck once it reaches both
//! `stuck_run` rows and `stuck_factor` times that longest run: a noisy
//! metric that never repeated is stuck after `stuck_run` equal rows, a
//! whole-number metric that sat for 40 rows before after `stuck_factor`
//! × 40. A metric that has ended fewer than 16 runs has no habit to compare
//! with and is never stuck (a constant is that stream's nature; a setting
//! that changed twice and then held is not a frozen sensor).
//!
//! The row a run becomes stuck on is flagged at grade 1, opening an event
//! or rising in the open one (an event already open may have another
//! cause; held quiet instead, a stall inside a long noisy event went
//! unseen: third stream set, `bursty`, 49.9 → 46.8); the rows after it,
//! while the value holds, are that event (not flagged again); the first
//! new value ends it. Part of the thresholded grader (`grading/`);
//! `rcf::ThresholdedForest` applies it to a single stream (`forewarn
//! score`), after the other rules; the pipeline's shard forest leaves it
//! off (its inputs are features of many GPUs).

use serde::{Deserialize, Serialize};

use super::config::GraderConfig;
use super::grade::Grade;

/// Runs a metric must have ended before its runs are judged: with fewer,
/// its longest says little about its habit (a setting that changed twice
/// and then held is not a frozen sensor).
pub const MIN_ENDED_RUNS: u64 = 16;

/// One metric's run of equal values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Run {
    /// The value repeated (`None` before the first finite value).
    value: Option<f64>,
    /// Rows it has held, the first included.
    rows: u64,
    /// Longest run that has ended (0 while the metric has never changed).
    longest: u64,
    /// Runs that have ended.
    #[serde(default)]
    ended: u64,
}

/// What one row's runs say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stuck {
    /// The first metric whose run became stuck on this row.
    pub opened: Option<usize>,
    /// Some metric's run was already stuck before this row and still holds.
    pub held: bool,
}

/// Every metric's run (one stream's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StuckRuns {
    runs: Vec<Run>,
}

impl StuckRuns {
    /// Advances the runs by one raw `row` (one value per metric).
    pub fn push(&mut self, row: &[f64], config: &GraderConfig) -> Stuck {
        if config.stuck_run == 0 {
            return Stuck::default();
        }
        if self.runs.len() != row.len() {
            self.runs = vec![Run::default(); row.len()];
        }
        let mut out = Stuck::default();
        for (m, (run, &x)) in self.runs.iter_mut().zip(row).enumerate() {
            if !x.is_finite() {
                continue;
            }
            if run.value == Some(x) {
                run.rows += 1;
            } else {
                if run.value.is_some() {
                    run.longest = run.longest.max(run.rows);
                    run.ended = run.ended.saturating_add(1);
                }
                run.value = Some(x);
                run.rows = 1;
                continue;
            }
            let Some(limit) = limit(run, config) else {
                continue;
            };
            if run.rows == limit {
                out.opened = out.opened.or(Some(m));
            } else if run.rows > limit {
                out.held = true;
            }
        }
        out
    }

    /// `g` with the stuck runs of its row taken in: a run that became stuck
    /// is flagged at grade 1, opening an event or rising in the open one
    /// (which may have other causes: a frozen sensor is news of its own),
    /// and one still stuck holds the event open.
    pub fn apply(g: Grade, stuck: Stuck) -> Grade {
        if g.warming_up {
            return g;
        }
        if stuck.opened.is_some() {
            return Grade {
                grade: 1.0,
                is_anomaly: true,
                event_grade: 1.0,
                in_event: true,
                ..g
            };
        }
        if stuck.held {
            return Grade {
                event_grade: 1.0,
                in_event: true,
                ..g
            };
        }
        g
    }

    /// Finite values and runs that fit (snapshot restore).
    pub fn is_consistent(&self, metrics: usize) -> bool {
        (self.runs.is_empty() || self.runs.len() == metrics)
            && self
                .runs
                .iter()
                .all(|r| r.value.is_none_or(f64::is_finite) && (r.value.is_some() || r.rows == 0))
    }

    pub fn heap_bytes(&self) -> usize {
        self.runs.capacity() * std::mem::size_of::<Run>()
    }
}

/// The run length at which `run`'s metric is stuck (`None` until it has
/// ended [`MIN_ENDED_RUNS`] runs).
fn limit(run: &Run, config: &GraderConfig) -> Option<u64> {
    if run.ended < MIN_ENDED_RUNS {
        return None;
    }
    let scaled = (config.stuck_factor * run.longest as f64).ceil() as u64;
    Some(u64::from(config.stuck_run).max(scaled))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushes `values` of one metric; returns the rows (indices into
    /// `values`) a run became stuck on and how many rows held one.
    fn feed(runs: &mut StuckRuns, values: &[f64], config: &GraderConfig) -> (Vec<usize>, usize) {
        let (mut opened, mut held) = (Vec::new(), 0);
        for (t, &x) in values.iter().enumerate() {
            let s = runs.push(&[x], config);
            if s.opened.is_some() {
                opened.push(t);
            }
            held += usize::from(s.held);
        }
        (opened, held)
    }

    #[test]
    fn a_value_that_never_repeated_is_stuck_after_stuck_run_rows() {
        let config = GraderConfig::default();
        let mut values: Vec<f64> = (0..100).map(|t| f64::from(t) * 0.37).collect();
        values.extend([5.0; 20]);
        values.push(1.0);
        let mut runs = StuckRuns::default();
        let (opened, held) = feed(&mut runs, &values, &config);
        // The run starts at row 100; its eighth row is 107.
        assert_eq!(opened, [107]);
        assert_eq!(held, 12);
        // The new value ended it, and 20 rows are now the longest run.
        assert!(runs.push(&[1.0], &config).opened.is_none());
        assert_eq!(runs.runs[0].longest, 20);
    }

    #[test]
    fn runs_are_judged_against_the_metrics_own_longest() {
        let config = GraderConfig::default();
        // Whole numbers that sit for up to 10 rows: 19 equal rows are
        // ordinary.
        let mut values = Vec::new();
        for k in 0..50 {
            values.extend(std::iter::repeat_n(f64::from(k % 3), 1 + k as usize % 10));
        }
        let base = values.len();
        values.extend([7.0; 19]);
        values.push(8.0);
        values.extend([9.0; 40]);
        let mut runs = StuckRuns::default();
        let (opened, _) = feed(&mut runs, &values, &config);
        // 19 rows of 7 stay under 2 × 10 and become the longest run, so 9
        // is stuck on its 38th row.
        assert_eq!(opened, [base + 20 + 37]);
    }

    #[test]
    fn a_metric_that_never_changed_is_never_stuck_and_gaps_do_not_break_runs() {
        let config = GraderConfig::default();
        let mut runs = StuckRuns::default();
        let (opened, held) = feed(&mut runs, &[1.0; 500], &config);
        assert!(opened.is_empty() && held == 0);
        // A setting that ended 15 runs of 10 rows, then held far longer: not
        // judged; after 16 runs a hold of twice the longest is stuck.
        let setting = |changes: u32, hold: usize| -> Vec<f64> {
            let mut v = Vec::new();
            for k in 0..=changes {
                v.extend(std::iter::repeat_n(f64::from(k), 10));
            }
            v.truncate(10 * changes as usize);
            v.extend(std::iter::repeat_n(99.0, hold));
            v
        };
        let mut runs = StuckRuns::default();
        assert_eq!(feed(&mut runs, &setting(15, 500), &config), (Vec::new(), 0));
        let mut runs = StuckRuns::default();
        assert_eq!(feed(&mut runs, &setting(16, 30), &config).0, [160 + 19]);
        // Missing values neither extend nor end a run.
        let mut runs = StuckRuns::default();
        let mut values: Vec<f64> = (0..20).map(f64::from).collect();
        values.extend([3.5, f64::NAN, 3.5, f64::NAN, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5]);
        let (opened, _) = feed(&mut runs, &values, &config);
        assert_eq!(opened, [values.len() - 1]);
        assert!(runs.is_consistent(1) && !runs.is_consistent(2));
    }

    #[test]
    fn off_changes_nothing_and_several_metrics_run_apart() {
        let off = GraderConfig {
            stuck_run: 0,
            ..GraderConfig::default()
        };
        let mut runs = StuckRuns::default();
        let values: Vec<f64> = (0..10).map(f64::from).chain([2.0; 40]).collect();
        assert_eq!(feed(&mut runs, &values, &off), (Vec::new(), 0));
        let config = GraderConfig::default();
        let mut runs = StuckRuns::default();
        let mut first = None;
        for t in 0..40 {
            // Metric 0 keeps moving; metric 1 freezes at row 20.
            let row = [f64::from(t), f64::from(t.min(20))];
            if let Some(m) = runs.push(&row, &config).opened {
                first = first.or(Some((t, m)));
            }
        }
        assert_eq!(first, Some((27, 1)));
    }

    #[test]
    fn a_stuck_run_is_flagged_once_and_holds_the_event() {
        let calm = Grade {
            grade: 0.0,
            is_anomaly: false,
            event_grade: 0.0,
            in_event: false,
            threshold: 1.0,
            warming_up: false,
        };
        let opened = Stuck {
            opened: Some(0),
            held: false,
        };
        let held = Stuck {
            opened: None,
            held: true,
        };
        let g = StuckRuns::apply(calm, opened);
        assert!(g.is_anomaly && g.grade == 1.0 && g.in_event);
        let g = StuckRuns::apply(calm, held);
        assert!(!g.is_anomaly && g.grade == 0.0 && g.in_event && g.event_grade == 1.0);
        // Inside an open event a run becoming stuck is news too.
        let open = Grade {
            in_event: true,
            event_grade: 0.6,
            ..calm
        };
        let g = StuckRuns::apply(open, opened);
        assert!(g.is_anomaly && g.grade == 1.0 && g.in_event && g.event_grade == 1.0);
        assert_eq!(StuckRuns::apply(calm, Stuck::default()), calm);
        assert_eq!(
            StuckRuns::apply(Grade::WARMING_UP, opened),
            Grade::WARMING_UP
        );
    }
}
