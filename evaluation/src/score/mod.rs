//! Scenario scoring: one scenario's alert events against its ground truth
//! (labels, benign events, newcomers) → [`ScenarioScore`]. Pure functions
//! of their inputs, so the rules below are unit-tested without a pipeline.
//!
//! - An alert is a firing event; `critical` is a page, `warning` a warning
//!   (`info` is recorded only).
//! - An alert matches a label when it covers the labelled GPU (a GPU alert
//!   on it, a host / rack / cluster alert over it; an incident: any alert in
//!   its rack) within `[onset − 10 min, failure (or end) + 1 h]`.
//! - A failure is detected by its first matching alert at or before
//!   failure + 5 min; its lead time is failure − that alert. It counts
//!   for the ≥ 1 h target when it has a precursor (not sudden death) and
//!   the precursor is visible ≥ 1 h after the pipeline's 1 h warm-up.
//! - An alert matching no label is false; it is put down to the first
//!   benign event that explains it (same host / job, within 30 min after)
//!   or counted as unexplained.
//! - A straggler is flagged by a `straggler` alert on its GPU between onset
//!   and end + 30 min, timed from the later of onset and the end of the
//!   pipeline's 1 h warm-up, less the time its job spent paused
//!   (checkpoint dips, restarts after an application XID); straggler
//!   precision is flagged-true / all `straggler` alerts.

use std::collections::{BTreeMap, HashMap};

use alerts::{AlertEvent, Scope, Severity, Status};
use datasets::simulator::{FailureKind, FailureLabel, SimEvent, SimEventKind, Simulator};
use serde::Serialize;

const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

/// What the simulator knew about one run.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    pub start_ms: i64,
    /// Event time the pipeline learns before degradation rules count
    /// (the pipeline's warm-up, given by the caller that runs it).
    pub warm_up_ms: i64,
    pub gpu_days: f64,
    pub labels: Vec<FailureLabel>,
    pub events: Vec<SimEvent>,
    /// Job name → its hosts.
    pub job_hosts: HashMap<String, Vec<String>>,
    /// `(onset, +°C)` of a fleet-wide ambient change.
    pub ambient: Option<(i64, f64)>,
    /// GPUs that joined mid-run: uuid → join time.
    pub newcomers: HashMap<String, i64>,
}

/// One labelled failure's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct FailureOutcome {
    pub kind: &'static str,
    pub gpu: String,
    pub onset_ms: i64,
    pub failure_ms: Option<i64>,
    /// Hours from the first alert to the failure (negative: after it).
    pub lead_h: Option<f64>,
    /// First matching alert at or before failure + 5 min (straggler: the
    /// first `straggler` alert within its window).
    pub detected: bool,
    /// Counts for the ≥ 1 h-ahead target.
    pub early_eligible: bool,
    /// Minutes from onset to the first alert (stragglers, newcomer twins).
    pub detect_after_min: Option<f64>,
    pub newcomer: bool,
    pub pages: u32,
}

/// One incident's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentOutcome {
    pub rack: String,
    pub onset_ms: i64,
    pub pages: u32,
    pub rack_scope_pages: u32,
    pub alerts: u32,
}

/// Everything scored on one scenario.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScenarioScore {
    pub pages: u32,
    pub warnings: u32,
    pub infos: u32,
    pub false_pages: u32,
    pub false_warnings: u32,
    /// Unmatched alerts (any severity) by the benign event behind them.
    pub benign_alerts: BTreeMap<String, u32>,
    /// Unmatched pages by the benign event behind them.
    pub benign_pages: BTreeMap<String, u32>,
    pub failures: Vec<FailureOutcome>,
    pub incidents: Vec<IncidentOutcome>,
    pub straggler_alerts: u32,
    pub straggler_alerts_true: u32,
    /// The unmatched pages themselves (kind, scope, ts, dedup key), for a
    /// human to read.
    pub false_page_keys: Vec<String>,
}

impl Truth {
    /// The ground truth of a simulator's run, taken before the run starts;
    /// `warm_up_ms` is the pipeline's warm-up.
    pub fn of(sim: &Simulator, warm_up_ms: i64) -> Truth {
        let cfg = sim.config();
        let mut job_hosts: HashMap<String, Vec<String>> = HashMap::new();
        for e in sim.events() {
            if let SimEventKind::JobStart { job, hosts, .. } = &e.kind {
                job_hosts
                    .entry(job.to_string())
                    .or_default()
                    .extend(hosts.iter().map(|h| h.to_string()));
            }
        }
        Truth {
            start_ms: cfg.start_ms,
            warm_up_ms,
            gpu_days: cfg.gpus as f64 * (cfg.end_ms() - cfg.start_ms) as f64 / 86_400_000.0,
            labels: sim.labels().to_vec(),
            events: sim.events().to_vec(),
            job_hosts,
            ambient: datasets::simulator::ambient_change(cfg),
            newcomers: sim
                .gpus()
                .iter()
                .filter_map(|g| g.active_from_ms.map(|t| (g.uuid.to_string(), t)))
                .collect(),
        }
    }
}

/// Whether alert `a` is about label `l`'s GPU (or incident). A wider alert
/// raised by correlation names its members (`member` reasons: the GPUs of
/// a host alert, the hosts of a rack alert, the racks of a cluster alert):
/// it covers a GPU's failure only when it names that GPU, its host or its
/// rack — a rack alert over two other hosts says nothing about this GPU.
fn covers(a: &AlertEvent, l: &FailureLabel) -> bool {
    let get = |k: &str| a.labels.get(k).map(String::as_str);
    if l.kind.is_incident() {
        return get("rack") == Some(&*l.rack);
    }
    let mut members = a.reasons.iter().filter(|r| r.signal == "member").peekable();
    if a.scope != Scope::Gpu && members.peek().is_some() {
        let child = match a.scope {
            Scope::Host => l.gpu.as_deref().map(|g| format!("gpu {g}:")),
            Scope::Rack => l.host.as_deref().map(|h| format!("host {h}:")),
            _ => Some(format!("rack {}:", l.rack)),
        };
        let Some(child) = child else { return false };
        return members.any(|r| r.detail.starts_with(&child)) && covers_by_labels(a, l);
    }
    covers_by_labels(a, l)
}

fn covers_by_labels(a: &AlertEvent, l: &FailureLabel) -> bool {
    let get = |k: &str| a.labels.get(k).map(String::as_str);
    match a.scope {
        Scope::Gpu => get("gpu").is_some() && get("gpu") == l.gpu.as_deref(),
        Scope::Host => get("host").is_some() && get("host") == l.host.as_deref(),
        Scope::Rack => get("rack") == Some(&*l.rack),
        _ => get("cluster") == Some(&*l.cluster),
    }
}

fn window(l: &FailureLabel) -> (i64, i64) {
    let end = l.failure_ms.or(l.end_ms).unwrap_or(l.onset_ms);
    (l.onset_ms - 10 * MIN_MS, end + HOUR_MS)
}

fn matches(a: &AlertEvent, l: &FailureLabel) -> bool {
    let (lo, hi) = window(l);
    a.ts >= lo && a.ts <= hi && covers(a, l)
}

/// Scores one scenario's alert events.
pub fn score(truth: &Truth, events: &[AlertEvent]) -> ScenarioScore {
    let alerts: Vec<&AlertEvent> = events
        .iter()
        .filter(|e| e.status == Status::Firing)
        .collect();
    let mut s = ScenarioScore::default();
    let mut matched = vec![false; alerts.len()];
    for l in &truth.labels {
        let hits: Vec<usize> = (0..alerts.len())
            .filter(|i| matches(alerts[*i], l))
            .collect();
        for i in &hits {
            matched[*i] = true;
        }
        let pages = hits
            .iter()
            .filter(|i| alerts[**i].severity == Severity::Critical)
            .count() as u32;
        if l.kind.is_incident() {
            s.incidents.push(IncidentOutcome {
                rack: l.rack.to_string(),
                onset_ms: l.onset_ms,
                pages,
                rack_scope_pages: hits
                    .iter()
                    .filter(|i| {
                        alerts[**i].severity == Severity::Critical
                            && alerts[**i].scope == Scope::Rack
                    })
                    .count() as u32,
                alerts: hits.len() as u32,
            });
            continue;
        }
        s.failures.push(outcome(truth, l, &alerts, &hits, pages));
    }
    for (i, a) in alerts.iter().enumerate() {
        match a.severity {
            Severity::Critical => s.pages += 1,
            Severity::Warning => s.warnings += 1,
            _ => s.infos += 1,
        }
        if a.kind == "straggler" {
            s.straggler_alerts += 1;
            let flagged = truth.labels.iter().any(|l| {
                l.kind == FailureKind::Straggler
                    && covers(a, l)
                    && a.ts >= l.onset_ms
                    && a.ts <= l.end_ms.unwrap_or(l.onset_ms) + 30 * MIN_MS
            });
            if flagged {
                s.straggler_alerts_true += 1;
            }
        }
        if matched[i] {
            continue;
        }
        let why = benign_cause(truth, a);
        *s.benign_alerts.entry(why.clone()).or_default() += 1;
        match a.severity {
            Severity::Critical => {
                s.false_pages += 1;
                *s.benign_pages.entry(why).or_default() += 1;
                s.false_page_keys.push(format!(
                    "{} {} {} {}",
                    features::time::format_rfc3339_s(a.ts),
                    a.scope.as_str(),
                    a.kind,
                    a.dedup_key
                ));
            }
            Severity::Warning => s.false_warnings += 1,
            _ => {}
        }
    }
    s
}

fn outcome(
    truth: &Truth,
    l: &FailureLabel,
    alerts: &[&AlertEvent],
    hits: &[usize],
    pages: u32,
) -> FailureOutcome {
    let gpu = l.gpu.as_deref().unwrap_or("").to_string();
    let newcomer = truth.newcomers.contains_key(&gpu);
    let (detected, lead_h, detect_after_min) = if l.kind == FailureKind::Straggler {
        let end = l.end_ms.unwrap_or(l.onset_ms) + 30 * MIN_MS;
        let first = hits
            .iter()
            .map(|i| alerts[*i])
            .filter(|a| a.kind == "straggler" && a.ts >= l.onset_ms && a.ts <= end)
            .map(|a| a.ts)
            .min();
        // Timed from when the pipeline can judge it: a straggler that
        // starts during forewarn's first hour is timed from the warm-up's
        // end, and time its job spends paused does not count.
        let from = l.onset_ms.max(truth.start_ms + truth.warm_up_ms);
        (
            first.is_some(),
            None,
            first.map(|t| {
                let paused = l
                    .host
                    .as_deref()
                    .map_or(0, |h| job_paused_ms(truth, h, from, t));
                (t - from - paused).max(0) as f64 / MIN_MS as f64
            }),
        )
    } else {
        let fail = l.failure_ms.unwrap_or(l.onset_ms);
        let first = hits
            .iter()
            .map(|i| alerts[*i].ts)
            .filter(|t| *t <= fail + 5 * MIN_MS)
            .min();
        (
            first.is_some(),
            first.map(|t| (fail - t) as f64 / HOUR_MS as f64),
            first.map(|t| (t - l.onset_ms) as f64 / MIN_MS as f64),
        )
    };
    // Visible from the later of onset, warm-up end and the GPU's first
    // sample; eligible when that leaves ≥ 1 h before the failure (plus an
    // hour for a signal to build).
    let visible = l
        .onset_ms
        .max(truth.start_ms + truth.warm_up_ms)
        .max(truth.newcomers.get(&gpu).copied().unwrap_or(i64::MIN));
    let early_eligible = l.kind != FailureKind::SuddenDeath
        && l.kind != FailureKind::Straggler
        && l.failure_ms.is_some_and(|f| f - visible >= 2 * HOUR_MS);
    FailureOutcome {
        kind: l.kind.as_str(),
        gpu,
        onset_ms: l.onset_ms,
        failure_ms: l.failure_ms,
        lead_h,
        detected,
        early_eligible,
        detect_after_min,
        newcomer,
        pages,
    }
}

/// How long, within `[from, to]`, the job on `host` was paused: every
/// member idle in a checkpoint dip, or down between an application XID and
/// its restart. A straggler is slower than its peers only while they work
/// (at reduced seed 133 of the randomised family one was 30 s into its
/// slowness when its job went down for 13 min).
fn job_paused_ms(truth: &Truth, host: &str, from: i64, to: i64) -> i64 {
    let on_host = |job: &str| {
        truth
            .job_hosts
            .get(job)
            .is_some_and(|hs| hs.iter().any(|h| h == host))
    };
    let mut spans: Vec<(i64, i64)> = truth
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            SimEventKind::Checkpoint { job, end_ms } if on_host(job) => Some((e.ts_ms, *end_ms)),
            SimEventKind::AppXid {
                job, restart_ms, ..
            } if on_host(job) => Some((e.ts_ms, *restart_ms)),
            _ => None,
        })
        .map(|(a, b)| (a.max(from), b.min(to)))
        .filter(|(a, b)| a < b)
        .collect();
    spans.sort_unstable();
    let (mut total, mut reach) = (0, i64::MIN);
    for (a, b) in spans {
        let a = a.max(reach);
        if b > a {
            total += b - a;
            reach = b;
        }
    }
    total
}

/// The benign event behind an unmatched alert, or `unexplained`.
fn benign_cause(truth: &Truth, a: &AlertEvent) -> String {
    let host = a.labels.get("host").map(String::as_str);
    let job = a.labels.get("job").map(String::as_str);
    let on_host = |h: &str| host == Some(h);
    let in_job = |j: &str| {
        job == Some(j)
            || truth
                .job_hosts
                .get(j)
                .is_some_and(|hs| hs.iter().any(|h| on_host(h)))
    };
    let after = |t: i64, until: i64| a.ts >= t && a.ts <= until;
    for e in truth.events.iter().rev().filter(|e| e.ts_ms <= a.ts) {
        let t = e.ts_ms;
        let why = match &e.kind {
            SimEventKind::AppXid {
                job, restart_ms, ..
            } if in_job(job) && after(t, restart_ms + 30 * MIN_MS) => "app_xid",
            SimEventKind::DriverReload { host } if on_host(host) && after(t, t + 30 * MIN_MS) => {
                "driver_reload"
            }
            SimEventKind::Maintenance { host, end_ms }
                if on_host(host) && after(t, end_ms + 30 * MIN_MS) =>
            {
                "maintenance"
            }
            SimEventKind::GpuReplaced { host, .. }
                if on_host(host) && after(t, t + 30 * MIN_MS) =>
            {
                "gpu_replaced"
            }
            SimEventKind::JobStart { hosts, .. }
                if hosts.iter().any(|h| on_host(h)) && after(t, t + 30 * MIN_MS) =>
            {
                "job_transition"
            }
            SimEventKind::JobEnd { job } if in_job(job) && after(t, t + 30 * MIN_MS) => {
                "job_transition"
            }
            SimEventKind::Checkpoint { job, end_ms }
                if in_job(job) && after(t, end_ms + 15 * MIN_MS) =>
            {
                "checkpoint"
            }
            _ => continue,
        };
        return why.to_string();
    }
    if truth.ambient.is_some_and(|(on, _)| a.ts >= on) {
        return "ambient_change".into();
    }
    "unexplained".into()
}

#[cfg(test)]
mod tests;
