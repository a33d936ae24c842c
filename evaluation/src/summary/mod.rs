//! The suite's verdict: scenario scores → the acceptance targets
//! (pass / fail each), a table for stdout, `report.md` with PNG plots and
//! `summary.json` for CI (`report` writes them). Field names in the JSON
//! are stable: CI and dashboards read them.
//!
//! A target whose scenarios were not run has no value and neither passes
//! nor fails (`pass: null`); the suite passes when no target fails.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Outcome;
use crate::score::FailureOutcome;

mod report;

/// One acceptance target.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    pub name: &'static str,
    pub what: &'static str,
    pub value: Option<f64>,
    /// `>= x` or `<= x`.
    pub goal: String,
    pub pass: Option<bool>,
}

fn at_least(name: &'static str, what: &'static str, value: Option<f64>, goal: f64) -> Target {
    Target {
        name,
        what,
        value,
        goal: format!(">= {goal}"),
        pass: value.map(|v| v >= goal),
    }
}

fn at_most(name: &'static str, what: &'static str, value: Option<f64>, goal: f64) -> Target {
    Target {
        name,
        what,
        value,
        goal: format!("<= {goal}"),
        pass: value.map(|v| v <= goal),
    }
}

/// Per failure kind, over the suite.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KindStats {
    pub failures: u32,
    pub detected: u32,
    pub early_eligible: u32,
    pub early_1h: u32,
    pub lead_h_p10: Option<f64>,
    pub lead_h_p50: Option<f64>,
    pub lead_h_p90: Option<f64>,
}

/// Per scenario.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioRow {
    pub name: &'static str,
    pub seed: u64,
    pub gpus: usize,
    pub hours: f64,
    pub gpu_days: f64,
    pub samples: u64,
    pub undecodable: u64,
    pub rejected: u64,
    pub failures: u32,
    pub detected: u32,
    pub pages: u32,
    pub warnings: u32,
    pub false_pages: u32,
    pub false_warnings: u32,
    pub false_pages_per_1k_gpu_days: f64,
    pub false_warnings_per_1k_gpu_days: f64,
    pub benign_alerts: BTreeMap<String, u32>,
    pub benign_pages: BTreeMap<String, u32>,
    pub incidents: u32,
    pub pages_per_incident: Option<f64>,
    pub false_page_keys: Vec<String>,
    pub wall_s: f64,
}

/// A newcomer and its incumbent twin.
#[derive(Debug, Clone, Serialize)]
pub struct TwinRow {
    pub newcomer: String,
    pub incumbent: String,
    pub newcomer_detect_min: Option<f64>,
    pub incumbent_detect_min: Option<f64>,
}

/// The whole verdict (`summary.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub suite_seed: u64,
    pub reduced: bool,
    pub pass: bool,
    pub targets: Vec<Target>,
    pub scenarios: Vec<ScenarioRow>,
    pub kinds: BTreeMap<String, KindStats>,
    pub straggler_detect_min: Vec<f64>,
    pub straggler_precision: Option<f64>,
    pub twins: Vec<TwinRow>,
}

fn quantile(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    Some(s[i])
}

pub(crate) fn ratio(n: u32, d: u32) -> Option<f64> {
    (d > 0).then(|| f64::from(n) / f64::from(d))
}

/// Scenarios whose pages must be zero.
const NO_PAGE_SCENARIOS: [&str; 3] = ["app_xid_storm", "driver_reload_wave", "ambient_change"];
/// Benign causes that must never page, in any scenario.
const NO_PAGE_CAUSES: [&str; 3] = ["app_xid", "driver_reload", "job_transition"];

impl Report {
    pub fn build(seed: u64, reduced: bool, outcomes: &[Outcome]) -> Report {
        let all: Vec<&FailureOutcome> = outcomes.iter().flat_map(|o| &o.score.failures).collect();
        let mut kinds: BTreeMap<String, KindStats> = BTreeMap::new();
        let mut leads: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for f in &all {
            let k = kinds.entry(f.kind.to_string()).or_default();
            k.failures += 1;
            k.detected += u32::from(f.detected);
            k.early_eligible += u32::from(f.early_eligible);
            k.early_1h += u32::from(f.early_eligible && f.lead_h.is_some_and(|l| l >= 1.0));
            if let Some(l) = f.lead_h {
                leads.entry(f.kind.to_string()).or_default().push(l);
            }
        }
        for (k, v) in &leads {
            if let Some(s) = kinds.get_mut(k) {
                s.lead_h_p10 = quantile(v, 0.1);
                s.lead_h_p50 = quantile(v, 0.5);
                s.lead_h_p90 = quantile(v, 0.9);
            }
        }
        let scenarios: Vec<ScenarioRow> = outcomes.iter().map(row).collect();

        // Targets.
        let budget: Vec<&ScenarioRow> = scenarios
            .iter()
            .filter(|s| s.name == "quiet" || s.name == "mixed_month")
            .collect();
        let budget_days: f64 = budget.iter().map(|s| s.gpu_days).sum();
        let budget_pages: u32 = budget.iter().map(|s| s.false_pages).sum();
        let false_rate =
            (!budget.is_empty()).then(|| 1000.0 * f64::from(budget_pages) / budget_days.max(1e-9));
        let budget_warnings: u32 = budget.iter().map(|s| s.false_warnings).sum();
        let false_warning_rate = (!budget.is_empty())
            .then(|| 1000.0 * f64::from(budget_warnings) / budget_days.max(1e-9));
        let eligible: Vec<&&FailureOutcome> = all.iter().filter(|f| f.early_eligible).collect();
        let early = ratio(
            eligible
                .iter()
                .filter(|f| f.lead_h.is_some_and(|l| l >= 1.0))
                .count() as u32,
            eligible.len() as u32,
        );
        let hard: Vec<&&FailureOutcome> = all.iter().filter(|f| f.kind != "straggler").collect();
        let by_5m = ratio(
            hard.iter().filter(|f| f.detected).count() as u32,
            hard.len() as u32,
        );
        let hbm: Vec<f64> = all
            .iter()
            .filter(|f| f.kind == "hbm_ecc" && f.early_eligible)
            .map(|f| f.lead_h.unwrap_or(0.0).max(0.0))
            .collect();
        let stragglers: Vec<&&FailureOutcome> =
            all.iter().filter(|f| f.kind == "straggler").collect();
        let straggler_detect_min: Vec<f64> = stragglers
            .iter()
            .map(|f| f.detect_after_min.unwrap_or(f64::INFINITY))
            .collect();
        let within_15 = ratio(
            straggler_detect_min.iter().filter(|m| **m <= 15.0).count() as u32,
            stragglers.len() as u32,
        );
        let (sa, st) = outcomes.iter().fold((0, 0), |(a, t), o| {
            (
                a + o.score.straggler_alerts,
                t + o.score.straggler_alerts_true,
            )
        });
        let straggler_precision = ratio(st, sa);
        let incidents: Vec<_> = outcomes.iter().flat_map(|o| &o.score.incidents).collect();
        let one_page = (!incidents.is_empty()).then(|| {
            incidents
                .iter()
                .filter(|i| i.pages == 1 && i.rack_scope_pages == 1)
                .count() as f64
                / incidents.len() as f64
        });
        let benign_pages: u32 = scenarios
            .iter()
            .map(|s| {
                let causes: u32 = NO_PAGE_CAUSES
                    .iter()
                    .filter_map(|c| s.benign_pages.get(*c))
                    .sum();
                if NO_PAGE_SCENARIOS.contains(&s.name) {
                    s.pages.max(causes)
                } else {
                    causes
                }
            })
            .sum();
        let twins = twins(outcomes);
        // Per pair: newcomer delay − incumbent delay (a newcomer never
        // alerted: +inf). The physics of each GPU is its own random draw,
        // so single pairs scatter both ways: the median pair is judged.
        let mut gaps: Vec<f64> = twins
            .iter()
            .map(|t| match (t.newcomer_detect_min, t.incumbent_detect_min) {
                (Some(n), Some(i)) => n - i,
                (None, _) => f64::INFINITY,
                (Some(_), None) => f64::NEG_INFINITY,
            })
            .collect();
        gaps.sort_by(f64::total_cmp);
        let twin_gap = quantile(&gaps, 0.5);
        let targets = vec![
            at_most(
                "false_pages_per_1k_gpu_days",
                "pages matching no failure or incident, quiet fleet + mixed month",
                false_rate,
                1.0,
            ),
            at_most(
                "false_warnings_per_1k_gpu_days",
                "warnings matching no failure or incident, quiet fleet + mixed month",
                false_warning_rate,
                10.0,
            ),
            at_least(
                "early_warning_1h",
                "failures with a visible precursor alerted >= 1 h before",
                early,
                0.9,
            ),
            at_least(
                "detected_by_failure_plus_5m",
                "failures alerted no later than 5 min after they happen",
                by_5m,
                0.95,
            ),
            at_least(
                "hbm_median_lead_h",
                "median lead time of HBM / ECC degradation (hours)",
                quantile(&hbm, 0.5),
                6.0,
            ),
            at_least(
                "straggler_within_15m",
                "stragglers flagged within 15 min of onset",
                within_15,
                0.9,
            ),
            at_least(
                "straggler_precision",
                "straggler alerts on a labelled straggler",
                straggler_precision,
                0.9,
            ),
            at_least(
                "rack_incident_one_page",
                "rack cooling incidents giving exactly one page, rack scope",
                one_page,
                1.0,
            ),
            at_most(
                "benign_pages",
                "pages from app-XID storms, driver reloads, ambient change, idle <-> training",
                (!scenarios.is_empty()).then_some(f64::from(benign_pages)),
                0.0,
            ),
            at_most(
                "newcomer_delay_vs_incumbent_min",
                "median over pairs of newcomer detection delay minus its incumbent twin's (minutes)",
                twin_gap,
                15.0,
            ),
        ];
        let pass = targets.iter().all(|t| t.pass != Some(false));
        Report {
            suite_seed: seed,
            reduced,
            pass,
            targets,
            scenarios,
            kinds,
            straggler_detect_min,
            straggler_precision,
            twins,
        }
    }
}

fn row(o: &Outcome) -> ScenarioRow {
    let s = &o.score;
    let per_k = |n: u32| 1000.0 * f64::from(n) / o.truth.gpu_days.max(1e-9);
    ScenarioRow {
        name: o.run.name,
        seed: o.run.config.seed,
        gpus: o.run.config.gpus,
        hours: o.run.config.hours,
        gpu_days: o.truth.gpu_days,
        samples: o.samples,
        undecodable: o.undecodable,
        rejected: o.rejected,
        failures: s.failures.len() as u32,
        detected: s.failures.iter().filter(|f| f.detected).count() as u32,
        pages: s.pages,
        warnings: s.warnings,
        false_pages: s.false_pages,
        false_warnings: s.false_warnings,
        false_pages_per_1k_gpu_days: per_k(s.false_pages),
        false_warnings_per_1k_gpu_days: per_k(s.false_warnings),
        benign_alerts: s.benign_alerts.clone(),
        benign_pages: s.benign_pages.clone(),
        incidents: s.incidents.len() as u32,
        pages_per_incident: (!s.incidents.is_empty()).then(|| {
            f64::from(s.incidents.iter().map(|i| i.pages).sum::<u32>()) / s.incidents.len() as f64
        }),
        false_page_keys: s.false_page_keys.clone(),
        wall_s: o.wall_s,
    }
}

/// Newcomers and the incumbent that degrades on the same clock on the same
/// host (the `replacement` scenario's pairs).
fn twins(outcomes: &[Outcome]) -> Vec<TwinRow> {
    let mut out = Vec::new();
    for o in outcomes {
        for n in o.score.failures.iter().filter(|f| f.newcomer) {
            let host = o
                .truth
                .labels
                .iter()
                .find(|l| l.gpu.as_deref() == Some(n.gpu.as_str()))
                .and_then(|l| l.host.clone());
            let twin = o.score.failures.iter().find(|f| {
                !f.newcomer
                    && f.kind == n.kind
                    && f.onset_ms == n.onset_ms
                    && f.failure_ms == n.failure_ms
                    && o.truth
                        .labels
                        .iter()
                        .any(|l| l.gpu.as_deref() == Some(f.gpu.as_str()) && l.host == host)
            });
            if let Some(t) = twin {
                out.push(TwinRow {
                    newcomer: n.gpu.clone(),
                    incumbent: t.gpu.clone(),
                    newcomer_detect_min: n.detect_after_min,
                    incumbent_detect_min: t.detect_after_min,
                });
            }
        }
    }
    out
}
