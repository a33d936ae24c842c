//! The suite's verdict as text and files: the stdout table, `report.md`
//! with its PNG plots, and `summary.json` (stable field names: CI and
//! dashboards read them).

use std::fmt::Write as _;
use std::path::Path;

use super::{Report, ratio};
use crate::{EvalError, Outcome, plots};

/// Writes `contents` to `path`, naming the file in the error.
fn write_file(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), EvalError> {
    std::fs::write(path, contents).map_err(|source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    })
}

impl Report {
    /// The stdout table.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{:<19} {:>8} {:>5} {:>6} {:>6} {:>6} {:>7} {:>9} {:>9} {:>7}",
            "scenario",
            "GPU-days",
            "fail",
            "det",
            "pages",
            "false",
            "warn",
            "FP/1kGPUd",
            "FW/1kGPUd",
            "wall s"
        );
        for s in &self.scenarios {
            let _ = writeln!(
                t,
                "{:<19} {:>8.0} {:>5} {:>6} {:>6} {:>6} {:>7} {:>9.2} {:>9.1} {:>7.1}",
                s.name,
                s.gpu_days,
                s.failures,
                s.detected,
                s.pages,
                s.false_pages,
                s.warnings,
                s.false_pages_per_1k_gpu_days,
                s.false_warnings_per_1k_gpu_days,
                s.wall_s
            );
        }
        let _ = writeln!(
            t,
            "\n{:<14} {:>5} {:>9} {:>12} {:>8} {:>8} {:>8}",
            "kind", "fail", "detected", "early >=1h", "lead p10", "p50", "p90"
        );
        let h = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}h"));
        for (k, s) in &self.kinds {
            let _ = writeln!(
                t,
                "{:<14} {:>5} {:>9} {:>12} {:>8} {:>8} {:>8}",
                k,
                s.failures,
                s.detected,
                format!("{}/{}", s.early_1h, s.early_eligible),
                h(s.lead_h_p10),
                h(s.lead_h_p50),
                h(s.lead_h_p90)
            );
        }
        let _ = writeln!(
            t,
            "\n{:<32} {:>10} {:>8}  verdict",
            "target", "value", "goal"
        );
        for g in &self.targets {
            let _ = writeln!(
                t,
                "{:<32} {:>10} {:>8}  {}",
                g.name,
                g.value.map_or("n/a".into(), |v| format!("{v:.3}")),
                g.goal,
                match g.pass {
                    Some(true) => "PASS",
                    Some(false) => "FAIL",
                    None => "not run",
                }
            );
        }
        let _ = writeln!(
            t,
            "\nsuite seed {}{}: {}",
            self.suite_seed,
            if self.reduced { " (reduced)" } else { "" },
            if self.pass { "PASS" } else { "FAIL" }
        );
        t
    }

    /// Writes `report.md`, its plots and `summary.json` under `dir`.
    pub fn write(&self, dir: &Path, outcomes: &[Outcome]) -> Result<(), EvalError> {
        let json = serde_json::to_string_pretty(self)?;
        write_file(&dir.join("summary.json"), json)?;
        let leads: Vec<f64> = outcomes
            .iter()
            .flat_map(|o| &o.score.failures)
            .filter_map(|f| f.lead_h)
            .map(|l| l.max(0.0))
            .collect();
        plots::lead_histogram(&dir.join("lead_time.png"), &leads, 48.0)?;
        let bars: Vec<(String, f64, f64)> = self
            .kinds
            .iter()
            .map(|(k, s)| {
                (
                    k.clone(),
                    ratio(s.detected, s.failures).unwrap_or(0.0),
                    ratio(s.early_1h, s.early_eligible).unwrap_or(0.0),
                )
            })
            .collect();
        recall_bars(&dir.join("recall.png"), &bars)?;
        let mut md = String::new();
        let _ = writeln!(
            md,
            "# Detection quality: scenario suite\n\nSuite seed {}{}; every scenario run through the \
             `backtest` pipeline with the given config. Verdict: **{}**.\n\n```\n{}```\n",
            self.suite_seed,
            if self.reduced { ", reduced sizes" } else { "" },
            if self.pass { "PASS" } else { "FAIL" },
            self.table()
        );
        let _ = writeln!(md, "## Scenarios\n");
        for o in outcomes {
            let _ = writeln!(
                md,
                "- `{}` ({} GPUs × {} h, seed {}): {}",
                o.run.name, o.run.config.gpus, o.run.config.hours, o.run.config.seed, o.run.about
            );
        }
        let _ = writeln!(
            md,
            "\n![lead time](lead_time.png)\n\n![recall per kind](recall.png)\n\n## Alerts matching no label, by benign cause\n"
        );
        for s in &self.scenarios {
            if !s.benign_alerts.is_empty() {
                let _ = writeln!(
                    md,
                    "- `{}`: {:?} (pages: {:?})",
                    s.name, s.benign_alerts, s.benign_pages
                );
            }
        }
        let _ = writeln!(md, "\n## False pages\n");
        for s in &self.scenarios {
            for k in &s.false_page_keys {
                let _ = writeln!(md, "- `{}`: {k}", s.name);
            }
        }
        let _ = writeln!(
            md,
            "\n## Stragglers\n\nDetection delays (min): {:?}; precision {}.\n\n## Newcomers vs incumbent twins\n\n| newcomer | incumbent | newcomer detected after onset (min) | incumbent (min) |\n|---|---|---|---|",
            self.straggler_detect_min,
            self.straggler_precision
                .map_or("n/a".into(), |p| format!("{p:.3}"))
        );
        for t in &self.twins {
            let m = |v: Option<f64>| v.map_or("never".into(), |x| format!("{x:.1}"));
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                t.newcomer,
                t.incumbent,
                m(t.newcomer_detect_min),
                m(t.incumbent_detect_min)
            );
        }
        write_file(&dir.join("report.md"), md)?;
        Ok(())
    }
}

/// Two bars per failure kind: detected by failure + 5 min (blue) and
/// alerted ≥ 1 h ahead among those with a visible precursor (red).
fn recall_bars(path: &Path, rows: &[(String, f64, f64)]) -> Result<(), EvalError> {
    plots::paired_bars(
        path,
        "Per kind: detected by failure + 5 min (blue), >= 1 h ahead (red)",
        "fraction of failures",
        rows,
    )
}
