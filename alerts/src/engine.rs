//! [`AlertEngine`]: the synchronous heart of the router. The detector calls
//! [`AlertEngine::observe`] for every evaluation of every source and
//! [`AlertEngine::tick`] as event time passes; both return the state changes
//! ([`AlertEvent`]s) to hand to routing. Pure and deterministic: no clock,
//! no IO, no randomness, so a backtest replays exactly what live did.
//!
//! Per observation the common case (a healthy source with no alert) is three
//! hash lookups with borrowed keys and no allocation: topology (already
//! known), kind table, identity state. Everything else happens on state
//! changes, which are rare. Correlation, job attribution, silences and
//! inhibition are in `correlate.rs`; the per-identity state machine in
//! `lifecycle.rs`.

use std::collections::{BTreeSet, HashMap};

use crate::alert::{AlertEvent, Labels, Reason, Scope, Severity, Status};
use crate::config::{EngineConfig, Rule};
use crate::inhibit::Inhibitor;
use crate::lifecycle::{AlertState, ResolveCause, Step};
use crate::silence::{Silence, Silences};
use crate::topology::Topology;

/// One evaluation of one source, borrowed from the caller (no copies unless
/// it changes an alert's state).
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    /// Event time, epoch ms.
    pub ts_ms: i64,
    /// Stable machine name of the cause being evaluated.
    pub kind: &'a str,
    /// Scope of the source (usually `Gpu`); its label must be in `labels`.
    pub scope: Scope,
    /// Identity, topology (`host`, `rack`, `cluster`) and context labels.
    pub labels: &'a Labels,
    /// Severity if this fires.
    pub severity: Severity,
    /// The evaluated value (risk in `[0, 1]`), compared with the kind's thresholds.
    pub value: f64,
    /// One human sentence (read only when an alert is active or starts).
    pub summary: &'a str,
    /// Evidence, strongest first (read only when an alert is active or starts).
    pub reasons: &'a [Reason],
    /// Forecast hours to a limit, if any.
    pub eta_hours: Option<f64>,
    /// The value comes from a sequential test past its threshold (a
    /// CUSUM's statistic is evidence held over time already): a raise
    /// fires without waiting out the kind's `for`.
    pub confirmed: bool,
}

/// Identity of one alert: (kind, scope, scope value).
pub(crate) type AlertId = (Box<str>, Scope, Box<str>);

/// Active member count per child unit of one correlation group.
pub(crate) type GroupMembers = HashMap<Box<str>, u32>;

/// All state of one kind.
#[derive(Debug)]
pub(crate) struct KindTable {
    pub rule: Rule,
    /// Correlated upward (not in `exclude_kinds`).
    pub correlate: bool,
    /// Identity states per scope level, by scope value.
    pub states: [HashMap<Box<str>, AlertState>; 5],
    /// Active (pending or firing) observed members per level, group value and
    /// child unit: `groups[level][group][child]` = active alerts below it.
    pub groups: [HashMap<Box<str>, GroupMembers>; 5],
    /// Active members per workload label value (job rules).
    pub jobs: HashMap<Box<str>, u32>,
}

/// The alert engine. See the crate docs for the semantics.
#[derive(Debug)]
pub struct AlertEngine {
    pub(crate) cfg: EngineConfig,
    pub(crate) kinds: HashMap<Box<str>, KindTable>,
    pub(crate) topology: Topology,
    pub(crate) silences: Silences,
    pub(crate) inhibitor: Inhibitor,
    /// Firing alerts not notified: held by correlation, silenced or inhibited.
    pub(crate) suppressed: BTreeSet<AlertId>,
    /// Something that can unmute suppressed alerts happened (re-check them).
    pub(crate) recheck: bool,
    /// Event time of the last full sweep in `tick`.
    pub(crate) last_sweep: i64,
    /// Delivered alerts of kinds dropped at restore (their rule left the
    /// config): the next `tick` resolves them so no incident stays open.
    pub(crate) orphans: Vec<(AlertId, AlertState)>,
}

/// How often `tick` sweeps all states for `for`, holds and staleness.
/// Ten seconds is a third of the usual telemetry interval: finer buys nothing.
const SWEEP_EVERY_MS: i64 = 10_000;

impl AlertEngine {
    /// An engine with no state.
    pub fn new(cfg: EngineConfig) -> Self {
        let topology = Topology::new(cfg.slot_labels.clone());
        let silences = Silences::new(cfg.silences.clone());
        let inhibitor = Inhibitor::new(cfg.inhibit_rules.clone());
        Self {
            cfg,
            kinds: HashMap::new(),
            topology,
            silences,
            inhibitor,
            suppressed: BTreeSet::new(),
            recheck: false,
            last_sweep: i64::MIN,
            orphans: Vec::new(),
        }
    }

    /// An empty table for `kind` with its rule from the config.
    pub(crate) fn new_table(cfg: &EngineConfig, kind: &str) -> KindTable {
        KindTable {
            rule: cfg.rule_for(kind).clone(),
            correlate: !cfg.exclude_kinds.iter().any(|k| k == kind),
            states: Default::default(),
            groups: Default::default(),
            jobs: HashMap::new(),
        }
    }

    fn table(&mut self, kind: &str) -> &mut KindTable {
        if !self.kinds.contains_key(kind) {
            let t = Self::new_table(&self.cfg, kind);
            self.kinds.insert(kind.into(), t);
        }
        self.kinds.get_mut(kind).expect("inserted above")
    }

    /// Evaluates one observation; returns the alert events it caused.
    pub fn observe(&mut self, obs: &Observation<'_>) -> Vec<AlertEvent> {
        let mut out = Vec::new();
        let Some(value) = obs.scope.value_in(obs.labels) else {
            tracing::debug!(kind = obs.kind, scope = %obs.scope, "observation without its scope label ignored");
            return out;
        };
        if let Some(old) = self
            .topology
            .observe(obs.scope, value, obs.labels, obs.ts_ms)
        {
            self.retire_inner(obs.scope, &old, obs.ts_ms, &mut out);
        }
        let level = obs.scope.level();
        let mut escalate = false;
        // (The severity it may claim: a page must hold like a raise.)
        let mut held = *obs;
        let obs = &mut held;
        let step = match self.kinds.get_mut(obs.kind) {
            Some(t) => match t.states[level].get_mut(value) {
                Some(st) => {
                    obs.severity =
                        st.held_severity(&t.rule, obs.ts_ms, obs.severity, obs.confirmed);
                    let step = st.observe_confirmed(&t.rule, obs.ts_ms, obs.value, obs.confirmed);
                    if st.active() && st.holding {
                        refresh(st, obs);
                    }
                    escalate = st.notified
                        && st.firing()
                        && !st.derived
                        && !st.attributed
                        && obs.severity > st.severity;
                    step
                }
                None if obs.value < t.rule.fire_at => return out,
                None => Self::start(t, level, value, obs),
            },
            None => {
                let fire_at = self.cfg.rule_for(obs.kind).fire_at;
                if obs.value < fire_at {
                    return out;
                }
                let t = self.table(obs.kind);
                Self::start(t, level, value, obs)
            }
        };
        if step != Step::default() {
            let id: AlertId = (obs.kind.into(), obs.scope, value.into());
            self.apply(&id, step, obs.ts_ms, &mut out);
        }
        if escalate {
            let id: AlertId = (obs.kind.into(), obs.scope, value.into());
            self.escalate(&id, obs, &mut out);
        }
        if self.recheck {
            self.recheck_suppressed(obs.ts_ms, &mut out);
        }
        out
    }

    fn start(t: &mut KindTable, level: usize, value: &str, obs: &mut Observation<'_>) -> Step {
        let mut st = AlertState::new(obs.labels.clone(), obs.severity, obs.ts_ms);
        obs.severity = st.held_severity(&t.rule, obs.ts_ms, obs.severity, obs.confirmed);
        st.severity = obs.severity;
        let step = st.observe_confirmed(&t.rule, obs.ts_ms, obs.value, obs.confirmed);
        refresh(&mut st, obs);
        t.states[level].insert(value.into(), st);
        step
    }

    /// A delivered incident whose evidence now calls for a higher severity
    /// (a warning that became a page): re-notified as firing with the new
    /// severity and evidence, same `dedup_key`. Never lowered: a page stays
    /// a page until it resolves.
    fn escalate(&mut self, id: &AlertId, obs: &Observation<'_>, out: &mut Vec<AlertEvent>) {
        let ts = obs.ts_ms;
        let before = if self.inhibitor.is_empty() {
            None
        } else {
            self.event_of(id, Status::Firing, ts)
        };
        let Some(st) = self.state_mut(id) else { return };
        copy_evidence(st, obs);
        let ev = st.event(Status::Firing, ts, &id.0, id.1, &id.2);
        if let Some(old) = before {
            self.inhibitor.source_changed(&old, -1);
            self.inhibitor.source_changed(&ev, 1);
            self.recheck = true;
        }
        out.push(ev);
    }

    /// Applies a lifecycle step of `id` to counters, correlation and outputs.
    pub(crate) fn apply(&mut self, id: &AlertId, step: Step, ts: i64, out: &mut Vec<AlertEvent>) {
        if step.activated {
            self.count_member(id, 1);
        }
        if step.fired {
            if !self.inhibitor.is_empty()
                && let Some(ev) = self.event_of(id, Status::Firing, ts)
            {
                self.inhibitor.source_changed(&ev, 1);
            }
            self.try_surface(id, ts, out);
        }
        if let Some(was_firing) = step.deactivated {
            if was_firing {
                self.finish(id, ts, step.cause.unwrap_or(ResolveCause::Cleared), out);
            }
            self.count_member(id, -1);
            self.check_wider(id, ts);
        }
    }

    /// Emits the resolve of a firing alert that stopped firing (if it was
    /// delivered) and updates the inhibition index.
    pub(crate) fn finish(
        &mut self,
        id: &AlertId,
        ts: i64,
        cause: ResolveCause,
        out: &mut Vec<AlertEvent>,
    ) {
        self.suppressed.remove(id);
        let Some(st) = self.state_mut(id) else { return };
        let notified = std::mem::replace(&mut st.notified, false);
        let ev = st.resolved_event(ts, &id.0, id.1, &id.2, cause);
        if !self.inhibitor.is_empty() {
            self.inhibitor.source_changed(&ev, -1);
            self.recheck = true;
        }
        if notified {
            out.push(ev);
        }
    }

    pub(crate) fn state_mut(&mut self, id: &AlertId) -> Option<&mut AlertState> {
        self.kinds.get_mut(&id.0)?.states[id.1.level()].get_mut(&id.2)
    }

    pub(crate) fn state(&self, id: &AlertId) -> Option<&AlertState> {
        self.kinds.get(&id.0)?.states[id.1.level()].get(&id.2)
    }

    pub(crate) fn event_of(&self, id: &AlertId, status: Status, ts: i64) -> Option<AlertEvent> {
        self.state(id)
            .map(|s| s.event(status, ts, &id.0, id.1, &id.2))
    }

    /// Advances event time to `now_ms`: fires pending alerts whose `for`
    /// elapsed, resolves held-clear and stale ones, surfaces alerts whose
    /// silence ended or whose inhibitor / wider alert resolved.
    pub fn tick(&mut self, now_ms: i64) -> Vec<AlertEvent> {
        let mut out = Vec::new();
        for (id, st) in std::mem::take(&mut self.orphans) {
            out.push(st.resolved_event(now_ms, &id.0, id.1, &id.2, ResolveCause::Unconfigured));
        }
        if now_ms.saturating_sub(self.last_sweep) >= SWEEP_EVERY_MS {
            self.last_sweep = now_ms;
            let mut steps = Vec::new();
            let mut forget = Vec::new();
            let mut clearing = Vec::new();
            for (kind, t) in &mut self.kinds {
                for (level, states) in t.states.iter_mut().enumerate() {
                    for (value, st) in states.iter_mut() {
                        if st.derived && st.clearing_since().is_some() {
                            let id = (kind.clone(), Scope::ALL[level], value.clone());
                            clearing.push((id, t.rule.resolve_after_ms));
                        }
                        let step = st.tick(&t.rule, now_ms);
                        if step != Step::default() {
                            steps.push(((kind.clone(), Scope::ALL[level], value.clone()), step));
                        } else if st.forgettable(&t.rule, now_ms) {
                            forget.push((kind.clone(), level, value.clone()));
                        }
                    }
                }
            }
            steps.sort_by(|a, b| a.0.cmp(&b.0));
            for (id, step) in steps {
                self.apply(&id, step, now_ms, &mut out);
            }
            self.settle_wider(clearing, now_ms, &mut out);
            // Only what is still forgettable: settling a wider alert above
            // may have raised one of these again (forgetting it then lost a
            // firing rack alert, which the next member fired a second time).
            for (kind, level, value) in forget {
                if let Some(t) = self.kinds.get_mut(&kind)
                    && t.states[level]
                        .get(&value)
                        .is_some_and(|st| st.forgettable(&t.rule, now_ms))
                {
                    t.states[level].remove(&value);
                }
            }
            let oldest_stale = self.kinds.values().map(|t| t.rule.stale_after_ms).max();
            let stale = oldest_stale
                .unwrap_or(self.cfg.default_rule.stale_after_ms)
                .max(self.cfg.default_rule.stale_after_ms);
            self.topology.gc(now_ms.saturating_sub(stale));
            self.silences.gc(now_ms.saturating_sub(stale));
        }
        self.recheck_suppressed(now_ms, &mut out);
        out
    }

    /// Resolves every alert of the source `value` at `scope` (taken out of
    /// service) and forgets it.
    pub fn retire(&mut self, scope: Scope, value: &str, now_ms: i64) -> Vec<AlertEvent> {
        let mut out = Vec::new();
        self.retire_inner(scope, value, now_ms, &mut out);
        self.recheck_suppressed(now_ms, &mut out);
        out
    }

    fn retire_inner(&mut self, scope: Scope, value: &str, ts: i64, out: &mut Vec<AlertEvent>) {
        let mut kinds: Vec<Box<str>> = self
            .kinds
            .iter()
            .filter(|(_, t)| {
                t.states[scope.level()]
                    .get(value)
                    .is_some_and(AlertState::active)
            })
            .map(|(k, _)| k.clone())
            .collect();
        kinds.sort();
        for kind in kinds {
            let id: AlertId = (kind, scope, value.into());
            if let Some(step) = self
                .state_mut(&id)
                .map(|s| s.force_resolve(ts, ResolveCause::Retired))
            {
                self.apply(&id, step, ts, out);
            }
        }
        self.topology.remove(scope.level(), value);
    }

    /// Forgets every alert of the source `value` at `scope` with no event:
    /// another instance now watches it (its Kafka partition moved), so it
    /// is neither resolved nor lost here. Returns how many alert states
    /// were dropped.
    pub fn hand_over(&mut self, scope: Scope, value: &str) -> usize {
        let level = scope.level();
        let mut n = 0;
        for t in self.kinds.values_mut() {
            if t.states[level].remove(value).is_some() {
                n += 1;
            }
        }
        self.suppressed
            .retain(|id| !(id.1 == scope && &*id.2 == value));
        self.topology.remove(level, value);
        n
    }

    /// Adds (or replaces, by id) a silence.
    pub fn add_silence(&mut self, silence: Silence) {
        self.silences.upsert(silence);
    }

    /// Ends a silence at `now_ms`; alerts it muted surface on the next `tick`.
    pub fn expire_silence(&mut self, id: &str, now_ms: i64) -> bool {
        self.recheck = true;
        self.silences.expire(id, now_ms)
    }

    /// The silences in force or scheduled.
    pub fn silences(&self) -> &[Silence] {
        self.silences.list()
    }

    /// Consistency check (tests, debugging): firing alerts whose condition
    /// still holds that were not delivered and are neither held by a firing
    /// wider-scope alert nor silenced nor inhibited. Empty after every
    /// `tick` of a consistent engine. Returns their dedup keys.
    pub fn unaccounted(&self, now_ms: i64) -> Vec<String> {
        let mut v = Vec::new();
        for (kind, t) in &self.kinds {
            for (level, m) in t.states.iter().enumerate() {
                for (value, st) in m {
                    let resolving = matches!(
                        st.phase,
                        crate::lifecycle::Phase::Firing {
                            clear_since: Some(_),
                            ..
                        }
                    );
                    if !st.firing() || st.notified || resolving {
                        continue;
                    }
                    let covered = (level + 1..Scope::ALL.len()).any(|l| {
                        Scope::ALL[l].value_in(&st.labels).is_some_and(|g| {
                            t.states[l].get(g).is_some_and(|w| w.firing())
                                && self.cfg.levels[l].is_some()
                        })
                    });
                    let ev = st.event(Status::Firing, now_ms, kind, Scope::ALL[level], value);
                    let muted = self.silences.muted_by(&ev, now_ms).is_some()
                        || self.inhibitor.inhibited(&ev, true);
                    if !covered && !muted {
                        v.push(ev.dedup_key);
                    }
                }
            }
        }
        v.sort();
        v
    }

    /// Alerts currently firing and delivered, as firing events (for a REST
    /// listing), sorted by dedup key.
    pub fn firing(&self) -> Vec<AlertEvent> {
        let mut v: Vec<AlertEvent> = self
            .kinds
            .iter()
            .flat_map(|(kind, t)| {
                t.states.iter().enumerate().flat_map(move |(level, m)| {
                    m.iter().filter(|(_, s)| s.notified).map(move |(value, s)| {
                        let since = match s.phase {
                            crate::lifecycle::Phase::Firing { since, .. } => since,
                            _ => s.last_seen,
                        };
                        s.event(Status::Firing, since, kind, Scope::ALL[level], value)
                    })
                })
            })
            .collect();
        v.sort_by(|a, b| a.dedup_key.cmp(&b.dedup_key));
        v
    }
}

/// Copies the latest evidence of an active alert from its observation.
fn refresh(st: &mut AlertState, obs: &Observation<'_>) {
    if st.notified || st.derived || st.attributed {
        // A delivered (or re-attributed) incident keeps the text it was
        // delivered with, so the resolve matches the page; only the value moves.
        return;
    }
    copy_evidence(st, obs);
}

/// Severity, summary, reasons and forecast of `obs`, into `st`.
fn copy_evidence(st: &mut AlertState, obs: &Observation<'_>) {
    st.severity = obs.severity;
    st.summary.clear();
    st.summary.push_str(obs.summary);
    st.reasons.clear();
    st.reasons.extend_from_slice(obs.reasons);
    st.eta_hours = obs.eta_hours;
}
