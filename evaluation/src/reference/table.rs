//! Per-kind figures of scored failures, the same for the reference and
//! for forewarn (read back from `forewarn evaluate`'s
//! `outcomes-<scenario>.json`), so the two sit side by side: failures,
//! precursor failures (eligible for the ≥ 1 h target), detected, alerted
//! ≥ 1 h ahead, and the median lead.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ReferenceError;
use crate::score::FailureOutcome;

/// What the table needs of one scored failure.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct View {
    pub kind: String,
    pub gpu: String,
    pub lead_h: Option<f64>,
    pub detected: bool,
    pub early_eligible: bool,
}

impl From<&FailureOutcome> for View {
    fn from(f: &FailureOutcome) -> View {
        View {
            kind: f.kind.to_string(),
            gpu: f.gpu.clone(),
            lead_h: f.lead_h,
            detected: f.detected,
            early_eligible: f.early_eligible,
        }
    }
}

/// Reads forewarn's scored failures (`outcomes-<scenario>.json`: a pair of
/// failures and incidents).
pub fn read_outcomes(path: &Path) -> Result<Vec<View>, ReferenceError> {
    let bad = |message: String| ReferenceError::Read {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let (failures, _incidents): (Vec<View>, serde_json::Value) =
        serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    Ok(failures)
}

/// One group's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub key: String,
    pub failures: u32,
    /// With a precursor visible ≥ 2 h before the failure (the ≥ 1 h
    /// target's denominator).
    pub eligible: u32,
    /// Alerted by failure + 5 min.
    pub detected: u32,
    /// Eligible and alerted ≥ 1 h ahead.
    pub early_1h: u32,
    /// Median lead over the eligible failures, a missed one (or one alerted
    /// after it failed) counting 0 h, as the HBM lead target counts.
    pub median_lead_h: Option<f64>,
    /// Median lead over the failures alerted before they failed.
    pub median_alerted_lead_h: Option<f64>,
}

impl Row {
    /// Share of eligible failures alerted ≥ 1 h ahead.
    pub fn early_share(&self) -> Option<f64> {
        (self.eligible > 0).then(|| f64::from(self.early_1h) / f64::from(self.eligible))
    }
}

/// The median as `forewarn evaluate`'s summary takes it (the value at rank
/// `round((n − 1) / 2)`, the upper of two middle values), so the figures
/// here match its `hbm_median_lead_h`.
fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[((v.len() - 1) as f64 * 0.5).round() as usize])
}

fn row(key: String, views: &[&View]) -> Row {
    let eligible: Vec<&&View> = views.iter().filter(|v| v.early_eligible).collect();
    Row {
        key,
        failures: views.len() as u32,
        eligible: eligible.len() as u32,
        detected: views.iter().filter(|v| v.detected).count() as u32,
        early_1h: eligible
            .iter()
            .filter(|v| v.lead_h.is_some_and(|l| l >= 1.0))
            .count() as u32,
        median_lead_h: median(
            eligible
                .iter()
                .map(|v| v.lead_h.unwrap_or(0.0).max(0.0))
                .collect(),
        ),
        median_alerted_lead_h: median(
            views
                .iter()
                .filter_map(|v| v.lead_h.filter(|l| *l > 0.0))
                .collect(),
        ),
    }
}

/// One row per value of `key` (views without one are left out), then a
/// row `all precursors` over every eligible failure.
pub fn rows(views: &[View], key: impl Fn(&View) -> Option<String>) -> Vec<Row> {
    let mut groups: BTreeMap<String, Vec<&View>> = BTreeMap::new();
    for v in views {
        if let Some(k) = key(v) {
            groups.entry(k).or_default().push(v);
        }
    }
    let mut out: Vec<Row> = groups.into_iter().map(|(k, v)| row(k, &v)).collect();
    let eligible: Vec<&View> = views.iter().filter(|v| v.early_eligible).collect();
    out.push(row("all precursors".into(), &eligible));
    out
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |x| format!("{x:.digits$}"))
}

/// A Markdown table of `rows` from one or more detectors, side by side
/// per key: `(detector name, its rows)`.
pub fn markdown(by_detector: &[(&str, &[Row])]) -> String {
    let mut s = String::from(
        "| group | detector | failures | precursor (eligible) | detected | ≥ 1 h ahead | share ≥ 1 h | median lead h (eligible, miss = 0) | median lead h (alerted) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut keys: Vec<&str> = Vec::new();
    for (_, rows) in by_detector {
        for r in *rows {
            if !keys.contains(&r.key.as_str()) {
                keys.push(&r.key);
            }
        }
    }
    for k in keys {
        for (name, rows) in by_detector {
            if let Some(r) = rows.iter().find(|r| r.key == k) {
                s.push_str(&format!(
                    "| {k} | {name} | {} | {} | {} | {} | {} | {} | {} |\n",
                    r.failures,
                    r.eligible,
                    r.detected,
                    r.early_1h,
                    r.early_share()
                        .map_or_else(|| "–".into(), |x| format!("{:.0} %", 100.0 * x)),
                    cell(r.median_lead_h, 1),
                    cell(r.median_alerted_lead_h, 1),
                ));
            }
        }
    }
    s
}

/// forewarn judged against the reference on one run: the lead
/// target (median lead ≥ 90 % of the reference's) and the ≥ 1 h target
/// counted over what the data shows — the precursor failures the
/// hindsight reference itself alerts ≥ 1 h ahead (a precursor that starts
/// 2 h out and stays below the healthy GPUs' backgrounds until its last
/// hour is visible to no causal detector).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Versus {
    /// Eligible failures the reference alerts ≥ 1 h ahead.
    pub visible: u32,
    /// Of those, alerted ≥ 1 h ahead by forewarn.
    pub forewarn_1h: u32,
    /// Median leads over every eligible failure (miss = 0 h).
    pub reference_median_h: Option<f64>,
    pub forewarn_median_h: Option<f64>,
}

impl Versus {
    pub fn new(reference: &[View], forewarn: &[View]) -> Versus {
        let early = |v: Option<&View>| v.and_then(|v| v.lead_h).is_some_and(|l| l >= 1.0);
        let visible: Vec<&View> = reference
            .iter()
            .filter(|r| r.early_eligible && early(Some(r)))
            .collect();
        let forewarn_1h = visible
            .iter()
            .filter(|r| early(forewarn.iter().find(|f| f.gpu == r.gpu)))
            .count() as u32;
        let median_of = |views: &[View]| {
            median(
                views
                    .iter()
                    .filter(|v| v.early_eligible)
                    .map(|v| v.lead_h.unwrap_or(0.0).max(0.0))
                    .collect(),
            )
        };
        Versus {
            visible: visible.len() as u32,
            forewarn_1h,
            reference_median_h: median_of(reference),
            forewarn_median_h: median_of(forewarn),
        }
    }

    /// forewarn's share of the visible precursor failures alerted ≥ 1 h
    /// ahead.
    pub fn share_1h(&self) -> Option<f64> {
        (self.visible > 0).then(|| f64::from(self.forewarn_1h) / f64::from(self.visible))
    }

    /// forewarn's median lead over the reference's.
    pub fn lead_ratio(&self) -> Option<f64> {
        match (self.forewarn_median_h, self.reference_median_h) {
            (Some(f), Some(r)) if r > 0.0 => Some(f / r),
            _ => None,
        }
    }
}
