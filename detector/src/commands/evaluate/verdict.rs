//! The champion / challenger verdict: the three figures of each model on
//! the same held-back window, the gate a challenger must pass, and the
//! JSON `forewarn promote` reads. Pure: the figures are computed by
//! `compare`.
//!
//! A challenger wins when all three hold:
//! 1. its precursor-row PR-AUC beats the champion's by more than
//!    `min_gain` (a tie keeps the champion: a swap must buy something);
//! 2. its share of failures alarmed ≥ 1 h ahead is at most
//!    `max_recall_loss` below the champion's;
//! 3. its alarms per 1,000 GPU-days at its operating point are at most
//!    `max_alarm_ratio` × the champion's (or at most 1 when the champion
//!    raised none): a better curve bought with more pages is no win.

use serde::{Deserialize, Serialize};

/// One model's figures on the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// What it is: an artifact path, or `in service (scores table)`.
    pub model: String,
    /// Its version as the service reports it.
    pub version: String,
    /// Precursor-row PR-AUC (every negative; positives at or after their
    /// failure's precursor, of failures that have one).
    pub pr_auc: f64,
    /// Failures with a row ≥ 1 h before them in the window, and how many
    /// of those were alarmed ≥ 1 h ahead.
    pub failures: usize,
    pub alarmed: usize,
    /// `alarmed / failures` (0 with no failure).
    pub alarmed_share: f64,
    /// Alarm episodes (a GPU's score rising to the operating point) per
    /// 1,000 GPU-days of the window.
    pub alarms_per_1000_gpu_days: f64,
    /// The operating point used.
    pub threshold: f64,
}

/// The gate's settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gate {
    pub min_gain: f64,
    pub max_recall_loss: f64,
    pub max_alarm_ratio: f64,
}

/// One check of the gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub pass: bool,
    pub detail: String,
}

/// The window both were scored on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub data: String,
    pub since: String,
    pub until: String,
    pub rows: u64,
    pub gpus: usize,
    pub gpu_days: f64,
    pub failures: usize,
    pub horizon_h: f64,
}

/// What `forewarn evaluate --challenger` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `challenger` or `champion`.
    pub winner: String,
    /// The artifact `forewarn promote` may copy (the challenger's path).
    pub challenger_path: String,
    /// FNV-1a of the challenger's bytes when evaluated: promote refuses a
    /// file changed since.
    pub challenger_hash: String,
    pub window: Window,
    pub champion: Figures,
    pub challenger: Figures,
    pub gate: Gate,
    pub checks: Vec<Check>,
}

impl Verdict {
    /// Whether the challenger won.
    pub fn promotes(&self) -> bool {
        self.winner == "challenger"
    }

    /// The failed checks, for an operator.
    pub fn reasons(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| !c.pass)
            .map(|c| format!("{}: {}", c.name, c.detail))
            .collect()
    }
}

/// Runs the gate.
pub fn decide(champion: &Figures, challenger: &Figures, gate: &Gate) -> Vec<Check> {
    let (a, b) = (champion, challenger);
    let gain = b.pr_auc - a.pr_auc;
    let allowed = if a.alarms_per_1000_gpu_days > 0.0 {
        a.alarms_per_1000_gpu_days * gate.max_alarm_ratio
    } else {
        1.0
    };
    vec![
        Check {
            name: "pr_auc".into(),
            pass: gain > gate.min_gain,
            detail: format!(
                "precursor-row PR-AUC {:.4} vs {:.4} (gain {gain:+.4}, needs > {})",
                b.pr_auc, a.pr_auc, gate.min_gain
            ),
        },
        Check {
            name: "alarmed_share".into(),
            pass: b.alarmed_share >= a.alarmed_share - gate.max_recall_loss,
            detail: format!(
                "failures alarmed ≥ 1 h ahead {}/{} ({:.3}) vs {}/{} ({:.3}); at most {} less",
                b.alarmed,
                b.failures,
                b.alarmed_share,
                a.alarmed,
                a.failures,
                a.alarmed_share,
                gate.max_recall_loss
            ),
        },
        Check {
            name: "alarm_rate".into(),
            pass: b.alarms_per_1000_gpu_days <= allowed,
            detail: format!(
                "{:.2} alarms per 1,000 GPU-days vs {:.2}; at most {allowed:.2}",
                b.alarms_per_1000_gpu_days, a.alarms_per_1000_gpu_days
            ),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(pr_auc: f64, alarmed: usize, alarms: f64) -> Figures {
        Figures {
            model: "m".into(),
            version: "v".into(),
            pr_auc,
            failures: 10,
            alarmed,
            alarmed_share: alarmed as f64 / 10.0,
            alarms_per_1000_gpu_days: alarms,
            threshold: 0.5,
        }
    }

    const GATE: Gate = Gate {
        min_gain: 0.0,
        max_recall_loss: 0.05,
        max_alarm_ratio: 1.5,
    };

    fn passes(champ: &Figures, chal: &Figures) -> Vec<bool> {
        decide(champ, chal, &GATE).iter().map(|c| c.pass).collect()
    }

    #[test]
    fn a_better_challenger_passes_every_check() {
        assert_eq!(
            passes(&fig(0.3, 7, 20.0), &fig(0.5, 7, 25.0)),
            [true, true, true]
        );
    }

    #[test]
    fn a_tie_more_misses_or_more_pages_keep_the_champion() {
        let champ = fig(0.3, 7, 20.0);
        assert!(!passes(&champ, &fig(0.3, 7, 20.0))[0], "tie");
        assert!(!passes(&champ, &fig(0.5, 6, 20.0))[1], "recall");
        assert!(!passes(&champ, &fig(0.5, 7, 31.0))[2], "pages");
        // A silent champion: the challenger may raise about one alarm per
        // 1,000 GPU-days, no more.
        let silent = fig(0.1, 0, 0.0);
        assert!(passes(&silent, &fig(0.5, 7, 0.9))[2]);
        assert!(!passes(&silent, &fig(0.5, 7, 3.0))[2]);
    }
}
