//! Per-identity lifecycle: pending -> firing -> resolved, as a pure state
//! machine over event time. The engine feeds it observations and ticks and
//! applies the returned [`Step`] (counters, correlation, notification).
//!
//! - Hysteresis: the condition holds at `value >= fire_at` and clears only
//!   at `value < resolve_below`; values in between keep the current phase.
//! - `for`: the condition must hold for `for` before a pending alert fires.
//! - Resolve hold: a firing alert resolves once the condition has been clear
//!   for `resolve_after` (`flap_resolve_after` when it fired
//!   `flap_max_fires` times within `flap_window`: flap damping keeps a
//!   flapping alert firing instead of paging firing / resolved pairs).
//! - Staleness: no observation for `stale_after` resolves (the source is
//!   gone for good); a pending alert is dropped.
//! - Out-of-order observations (older than the last one seen) are ignored.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::alert::{AlertEvent, Labels, Reason, Scope, Severity, Status, dedup_key};
use crate::config::Rule;

/// Where an alert identity is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) enum Phase {
    /// The condition holds since `since`, not yet for `for`.
    Pending { since: i64 },
    /// Firing since `since`; `clear_since` is when the condition last cleared.
    Firing {
        since: i64,
        clear_since: Option<i64>,
    },
    /// Inactive since `at` (kept only for flap history).
    Resolved { at: i64 },
}

/// Why an alert resolved (goes into the resolved event's summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResolveCause {
    /// The condition stayed clear for the resolve hold.
    Cleared,
    /// The source stopped reporting.
    Stale,
    /// The source was retired or replaced.
    Retired,
    /// A wider-scope group no longer meets its thresholds.
    Uncorrelated,
    /// Its kind's rule was removed from the config (found at restore).
    Unconfigured,
}

impl ResolveCause {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ResolveCause::Cleared => "condition cleared",
            ResolveCause::Stale => "source stopped reporting",
            ResolveCause::Retired => "source retired or replaced",
            ResolveCause::Uncorrelated => "members no longer bad together",
            ResolveCause::Unconfigured => "kind removed from the config",
        }
    }
}

/// What one observation or tick did to an identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Step {
    /// Became active (pending or firing) from inactive.
    pub activated: bool,
    /// Started firing.
    pub fired: bool,
    /// Became inactive; `Some(true)` if it had been firing.
    pub deactivated: Option<bool>,
    /// Why, when it resolved from firing.
    pub cause: Option<ResolveCause>,
}

/// State of one alert identity (kind, scope, scope value). Serialized as is
/// into engine snapshots: changing or removing a field changes the snapshot
/// format (bump `snapshot::ENGINE_SNAPSHOT_VERSION`); a field added with
/// `#[serde(default)]` does not (older snapshots load, as `page_since`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct AlertState {
    /// Labels from the first observation of the current incident.
    pub labels: Labels,
    /// Severity as notified (after any job attribution).
    pub severity: Severity,
    /// Last observed value.
    pub risk: f64,
    /// Latest summary while the condition was not clear.
    pub summary: String,
    /// Latest reasons while the condition was not clear.
    pub reasons: Vec<Reason>,
    /// Latest forecast.
    pub eta_hours: Option<f64>,
    /// Lifecycle phase.
    pub phase: Phase,
    /// Event time of the last observation.
    pub last_seen: i64,
    /// Whether the last observation was at or above `resolve_below`.
    pub holding: bool,
    /// Firing times within the flap window, oldest first.
    pub fires: VecDeque<i64>,
    /// A firing event went out and no resolve yet.
    pub notified: bool,
    /// Raised by correlation (a wider-scope alert), not by observations.
    pub derived: bool,
    /// A job rule re-attributed this incident to the workload.
    pub attributed: bool,
    /// Since when every observation has called for a page (none: the
    /// last did not); see [`Self::held_severity`].
    #[serde(default)]
    pub page_since: Option<i64>,
}

impl AlertState {
    /// A fresh, inactive state.
    pub fn new(labels: Labels, severity: Severity, ts: i64) -> Self {
        Self {
            labels,
            severity,
            risk: 0.0,
            summary: String::new(),
            reasons: Vec::new(),
            eta_hours: None,
            phase: Phase::Resolved { at: ts },
            last_seen: i64::MIN,
            holding: false,
            fires: VecDeque::new(),
            notified: false,
            derived: false,
            attributed: false,
            page_since: None,
        }
    }

    /// The severity an observation may claim: a page once the page level
    /// has held for the kind's `for`, as a raise must (Prometheus's way: a
    /// critical rule with its own `for`), or at once when the value is
    /// confirmed (a sequential test's statistic is evidence held already).
    /// One sample's reading does not page: a burst of correctable errors
    /// in 30 s reads 2,400/h and is gone at the next sample. A late
    /// observation (older than the last seen), which the lifecycle
    /// ignores, neither moves the hold nor claims more than the current
    /// severity.
    pub fn held_severity(
        &mut self,
        rule: &Rule,
        ts: i64,
        severity: Severity,
        confirmed: bool,
    ) -> Severity {
        if ts < self.last_seen {
            return severity.min(self.severity);
        }
        if severity < Severity::Critical {
            self.page_since = None;
            return severity;
        }
        let since = *self.page_since.get_or_insert(ts);
        if confirmed || ts - since >= rule.for_ms {
            severity
        } else {
            Severity::Warning
        }
    }

    /// Pending or firing.
    pub fn active(&self) -> bool {
        !matches!(self.phase, Phase::Resolved { .. })
    }

    /// Firing.
    pub fn firing(&self) -> bool {
        matches!(self.phase, Phase::Firing { .. })
    }

    /// When it started firing, if it is.
    pub fn firing_since(&self) -> Option<i64> {
        match self.phase {
            Phase::Firing { since, .. } => Some(since),
            _ => None,
        }
    }

    /// Firing with its condition clear since the returned time.
    pub fn clearing_since(&self) -> Option<i64> {
        match self.phase {
            Phase::Firing { clear_since, .. } => clear_since,
            _ => None,
        }
    }

    /// The contract event for this state.
    pub fn event(
        &self,
        status: Status,
        ts: i64,
        kind: &str,
        scope: Scope,
        value: &str,
    ) -> AlertEvent {
        AlertEvent {
            ts,
            status,
            severity: self.severity,
            kind: kind.to_owned(),
            scope,
            labels: self.labels.clone(),
            dedup_key: dedup_key(scope, value, kind),
            summary: self.summary.clone(),
            risk: self.risk,
            eta_hours: self.eta_hours,
            reasons: self.reasons.clone(),
        }
    }

    /// The resolved event, its summary saying why.
    pub fn resolved_event(
        &self,
        ts: i64,
        kind: &str,
        scope: Scope,
        value: &str,
        cause: ResolveCause,
    ) -> AlertEvent {
        let mut ev = self.event(Status::Resolved, ts, kind, scope, value);
        ev.summary = format!("resolved ({}): {}", cause.as_str(), self.summary);
        ev
    }

    fn fire(&mut self, rule: &Rule, ts: i64, step: &mut Step) {
        self.phase = Phase::Firing {
            since: ts,
            clear_since: None,
        };
        while self
            .fires
            .front()
            .is_some_and(|t| *t <= ts - rule.flap_window_ms)
        {
            self.fires.pop_front();
        }
        self.fires.push_back(ts);
        step.fired = true;
    }

    fn resolve_hold(&self, rule: &Rule) -> i64 {
        let recent = self
            .fires
            .iter()
            .filter(|t| **t > self.last_seen - rule.flap_window_ms)
            .count();
        if recent >= rule.flap_max_fires as usize {
            rule.flap_resolve_after_ms.max(rule.resolve_after_ms)
        } else {
            rule.resolve_after_ms
        }
    }

    fn deactivate(&mut self, ts: i64, cause: ResolveCause, step: &mut Step) {
        let was_firing = self.firing();
        self.phase = Phase::Resolved { at: ts };
        // A new incident holds its page level afresh.
        self.page_since = None;
        step.deactivated = Some(was_firing);
        if was_firing {
            step.cause = Some(cause);
        }
    }

    /// Applies one observation of `value` at `ts` (unconfirmed).
    #[cfg(test)]
    pub fn observe(&mut self, rule: &Rule, ts: i64, value: f64) -> Step {
        self.observe_confirmed(rule, ts, value, false)
    }

    /// [`Self::observe`], where `confirmed` says the value comes from a
    /// sequential test past its threshold: its statistic already is the
    /// evidence held over time that `for` waits for, so a raise fires at
    /// once (`for` stays for level readings, one sample of which proves
    /// little).
    pub fn observe_confirmed(&mut self, rule: &Rule, ts: i64, value: f64, confirmed: bool) -> Step {
        let mut step = Step::default();
        if ts < self.last_seen {
            return step;
        }
        self.last_seen = ts;
        self.risk = value;
        let raise = value >= rule.fire_at;
        let clear = value < rule.resolve_below;
        self.holding = !clear;
        match self.phase {
            Phase::Resolved { .. } if raise => {
                step.activated = true;
                self.phase = Phase::Pending { since: ts };
                if rule.for_ms == 0 || confirmed {
                    self.fire(rule, ts, &mut step);
                }
            }
            Phase::Resolved { .. } => {}
            Phase::Pending { .. } if clear => self.deactivate(ts, ResolveCause::Cleared, &mut step),
            Phase::Pending { since } => {
                if ts - since >= rule.for_ms || confirmed {
                    self.fire(rule, ts, &mut step);
                }
            }
            Phase::Firing { since, clear_since } => {
                let clear_since = if clear {
                    Some(clear_since.unwrap_or(ts))
                } else {
                    None
                };
                self.phase = Phase::Firing { since, clear_since };
                if let Some(c) = clear_since
                    && ts - c >= self.resolve_hold(rule)
                {
                    self.deactivate(ts, ResolveCause::Cleared, &mut step);
                }
            }
        }
        step
    }

    /// Applies the passage of event time to `now` without an observation.
    pub fn tick(&mut self, rule: &Rule, now: i64) -> Step {
        let mut step = Step::default();
        if self.derived {
            return step;
        }
        let stale = now.saturating_sub(self.last_seen) >= rule.stale_after_ms;
        match self.phase {
            Phase::Resolved { .. } => {}
            _ if stale => self.deactivate(now, ResolveCause::Stale, &mut step),
            Phase::Pending { since } => {
                if self.holding && now.saturating_sub(since) >= rule.for_ms {
                    // The page level held as long: it fires as a page (the
                    // observations so far could only claim a warning).
                    if !self.attributed
                        && self
                            .page_since
                            .is_some_and(|p| now.saturating_sub(p) >= rule.for_ms)
                    {
                        self.severity = Severity::Critical;
                    }
                    self.fire(rule, now, &mut step);
                }
            }
            Phase::Firing {
                clear_since: Some(c),
                ..
            } => {
                if now.saturating_sub(c) >= self.resolve_hold(rule) {
                    self.deactivate(now, ResolveCause::Cleared, &mut step);
                }
            }
            Phase::Firing { .. } => {}
        }
        step
    }

    /// Forces resolution (retired or replaced source, uncorrelated group).
    pub fn force_resolve(&mut self, ts: i64, cause: ResolveCause) -> Step {
        let mut step = Step::default();
        if self.active() {
            self.deactivate(ts, cause, &mut step);
        }
        step
    }

    /// Whether a resolved state can be forgotten (its flap history expired).
    pub fn forgettable(&self, rule: &Rule, now: i64) -> bool {
        matches!(self.phase, Phase::Resolved { at } if now.saturating_sub(at) >= rule.flap_window_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> Rule {
        Rule {
            fire_at: 0.8,
            resolve_below: 0.6,
            for_ms: 60_000,
            resolve_after_ms: 60_000,
            stale_after_ms: 600_000,
            flap_window_ms: 3_600_000,
            flap_max_fires: 3,
            flap_resolve_after_ms: 1_800_000,
        }
    }

    #[test]
    fn a_confirmed_raise_fires_without_waiting_out_for() {
        // A sequential test's crossing is evidence held over time already;
        // a level reading still waits `for`.
        let r = rule();
        let mut s = AlertState::new(Labels::new(), Severity::Warning, 0);
        let st = s.observe_confirmed(&r, 0, 0.9, true);
        assert!(st.activated && st.fired);
        let mut s = AlertState::new(Labels::new(), Severity::Warning, 0);
        assert!(!s.observe_confirmed(&r, 0, 0.9, false).fired);
        assert!(
            s.observe_confirmed(&r, 20_000, 0.9, true).fired,
            "pending, then confirmed"
        );
        // Confirmation does not lower the bar: below `fire_at` nothing starts.
        let mut s = AlertState::new(Labels::new(), Severity::Warning, 0);
        assert_eq!(s.observe_confirmed(&r, 0, 0.7, true), Step::default());
    }

    #[test]
    fn pending_for_hysteresis_and_resolve_hold() {
        let r = rule();
        let mut s = AlertState::new(Labels::new(), Severity::Critical, 0);
        assert!(s.observe(&r, 0, 0.9).activated);
        assert!(
            !s.observe(&r, 30_000, 0.7).fired,
            "band keeps pending, for not elapsed"
        );
        assert!(s.observe(&r, 60_000, 0.85).fired);
        assert_eq!(
            s.observe(&r, 90_000, 0.7),
            Step::default(),
            "band keeps firing"
        );
        assert_eq!(
            s.observe(&r, 120_000, 0.5),
            Step::default(),
            "clear starts the hold"
        );
        let st = s.observe(&r, 180_000, 0.5);
        assert_eq!(
            (st.deactivated, st.cause),
            (Some(true), Some(ResolveCause::Cleared))
        );
        assert_eq!(
            s.observe(&r, 10_000, 0.99),
            Step::default(),
            "out of order ignored"
        );
    }

    #[test]
    fn flapping_alert_holds_its_resolve() {
        let r = Rule {
            for_ms: 0,
            ..rule()
        };
        let mut s = AlertState::new(Labels::new(), Severity::Critical, 0);
        let mut t = 0;
        let mut fired = 0;
        for _ in 0..10 {
            fired += usize::from(s.observe(&r, t, 0.9).fired);
            t += 60_000;
            s.observe(&r, t, 0.1);
            t += 60_000;
            s.observe(&r, t, 0.1);
            t += 60_000;
        }
        assert_eq!(
            fired, 3,
            "after 3 firings in an hour the alert stays firing"
        );
        assert!(s.firing());
    }

    #[test]
    fn stale_source_resolves() {
        let r = rule();
        let mut s = AlertState::new(Labels::new(), Severity::Critical, 0);
        s.observe(&r, 0, 0.9);
        assert!(s.tick(&r, 60_000).fired, "tick fires once for has elapsed");
        let st = s.tick(&r, 600_000);
        assert_eq!(st.cause, Some(ResolveCause::Stale));
    }
}
