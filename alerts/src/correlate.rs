//! Upward correlation, job attribution and the final "may this alert be
//! delivered now" decision, as `impl AlertEngine` blocks.
//!
//! When an alert starts firing ([`AlertEngine::try_surface`]):
//! 1. A job rule for its kind re-attributes it to the workload when at
//!    least `min_count` members sharing the workload label are active
//!    (pending or firing) together: severity becomes the rule's (info),
//!    and it is not correlated upward (an application fault is no rack fault).
//! 2. From the widest level down (fleet, cluster, rack, host): if a firing
//!    alert of the same kind already covers it at that level, it is held
//!    back, unless it starts firing more than two hours after that alert
//!    did (news, not more of that incident: it surfaces); if that level's
//!    group qualifies (`min_count` bad direct children, `min_fraction` of
//!    the known children and `min_alerts` member alerts under them), one
//!    wider-scope alert is raised listing the members and the member is
//!    held back.
//! 3. A silence or an inhibition rule mutes it for now.
//!
//! Held or muted alerts stay in `suppressed` and are re-examined on every
//! `tick` and whenever a wider alert or an inhibition source resolves, so a
//! member whose wider alert resolved surfaces on its own. A wider alert
//! resolves once its group has stayed short of its thresholds for its
//! kind's resolve hold, like an observed alert; members that come back
//! within the hold stay folded into it. Members that were already delivered
//! before their wider alert formed stay delivered and resolve normally.

use crate::alert::{AlertEvent, Labels, Reason, Scope, Severity, Status};
use crate::engine::{AlertEngine, AlertId};
use crate::lifecycle::{AlertState, Phase, ResolveCause};

/// A member that starts firing this long after its wider alert did
/// surfaces on its own (two hours: a rack incident's GPUs cross their
/// thresholds within its first hour as its air heats).
const LATE_MEMBER_MS: i64 = 2 * 3_600_000;

/// At most this many members are listed in a wider alert's reasons (a
/// cluster of 1,000 hosts should not make a 1,000-line page).
const MAX_LISTED_MEMBERS: usize = 64;

impl AlertEngine {
    /// Adds `delta` to the correlation and job counters of an observed alert.
    pub(crate) fn count_member(&mut self, id: &AlertId, delta: i32) {
        let levels = self.cfg.levels;
        let job_label = self.cfg.job_rules.get(&*id.0).map(|r| r.label.as_str());
        let Some(t) = self.kinds.get_mut(&id.0) else {
            return;
        };
        let own = id.1.level();
        let Some(st) = t.states[own].get(&id.2) else {
            return;
        };
        if st.derived {
            return;
        }
        if t.correlate {
            for (level, cfg) in levels.iter().enumerate().skip(own + 1) {
                let (Some(_), Some(g)) = (cfg, Scope::ALL[level].value_in(&st.labels)) else {
                    continue;
                };
                let child = if level - 1 == own {
                    Some(&*id.2)
                } else {
                    Scope::ALL[level - 1].value_in(&st.labels)
                };
                let Some(child) = child else { continue };
                let group = t.groups[level].entry(g.into()).or_default();
                let n = group.entry(child.into()).or_insert(0);
                *n = n.saturating_add_signed(delta);
                if *n == 0 {
                    group.remove(child);
                }
                if group.is_empty() {
                    t.groups[level].remove(g);
                }
            }
        }
        if let Some(job) = job_label.and_then(|l| st.labels.get(l)) {
            let n = t.jobs.entry(job.as_str().into()).or_insert(0);
            *n = n.saturating_add_signed(delta);
            if *n == 0 {
                t.jobs.remove(job.as_str());
            }
        }
    }

    /// Whether the group `g` at `level` of `kind` meets its thresholds.
    fn qualifies(&self, kind: &str, level: usize, g: &str) -> bool {
        let (Some(cfg), Some(t)) = (self.cfg.levels[level], self.kinds.get(kind)) else {
            return false;
        };
        let group = t.groups[level].get(g);
        let active = group.map_or(0, |m| m.len());
        let alerts: u64 = group.map_or(0, |m| m.values().map(|n| u64::from(*n)).sum());
        let known = self
            .topology
            .children(Scope::ALL[level], g)
            .max(active)
            .max(1);
        active as u64 >= u64::from(cfg.min_count)
            && active as f64 / known as f64 >= cfg.min_fraction
            && alerts >= u64::from(cfg.min_alerts)
    }

    fn attribute_job(&mut self, id: &AlertId) {
        let Some(rule) = self.cfg.job_rules.get(&*id.0) else {
            return;
        };
        let Some(t) = self.kinds.get_mut(&id.0) else {
            return;
        };
        let Some(st) = t.states[id.1.level()].get_mut(&id.2) else {
            return;
        };
        let Some(job) = st.labels.get(&rule.label) else {
            return;
        };
        let n = t.jobs.get(job.as_str()).copied().unwrap_or(0);
        if n < rule.min_count {
            return;
        }
        let detail = format!(
            "{n} members of {} {job} show {} together: attributed to the workload",
            rule.label, id.0
        );
        st.summary = format!("{} (attributed to {} {job})", st.summary, rule.label);
        st.reasons.insert(
            0,
            Reason {
                signal: "job_correlation".to_owned(),
                detail,
            },
        );
        st.severity = rule.severity;
        st.attributed = true;
    }

    /// Delivers a firing alert now unless it is held back or muted (see the
    /// module docs); held / muted alerts wait in `suppressed`.
    pub(crate) fn try_surface(&mut self, id: &AlertId, ts: i64, out: &mut Vec<AlertEvent>) {
        let Some(st) = self.state(id) else {
            self.suppressed.remove(id);
            return;
        };
        if st.notified || !st.firing() {
            self.suppressed.remove(id);
            return;
        }
        if matches!(
            st.phase,
            Phase::Firing {
                clear_since: Some(_),
                ..
            }
        ) {
            // Its condition already cleared: it is resolving, surfacing it
            // now would page a firing / resolved pair. It surfaces on a
            // later tick if the condition comes back.
            self.suppressed.insert(id.clone());
            return;
        }
        let (derived, attributed) = (st.derived, st.attributed);
        if !derived && !attributed {
            self.attribute_job(id);
        }
        let attributed = self.state(id).is_some_and(|s| s.attributed);
        let correlate = self.kinds.get(&id.0).is_some_and(|t| t.correlate);
        if !derived && !attributed && correlate {
            let labels = self.state(id).map(|s| s.labels.clone()).unwrap_or_default();
            for level in (id.1.level() + 1..Scope::ALL.len()).rev() {
                if self.cfg.levels[level].is_none() {
                    continue;
                }
                let Some(g) = Scope::ALL[level].value_in(&labels) else {
                    continue;
                };
                let wid: AlertId = (id.0.clone(), Scope::ALL[level], g.into());
                if let Some(wider) = self.state(&wid).and_then(AlertState::firing_since) {
                    // A member that starts firing long after its wider
                    // alert did is news, not more of that incident: it
                    // surfaces on its own (at full random-precursor seed
                    // 125 a GPU's cooling fault was folded for 11 h into
                    // a rack alert 19 h old, which it kept alive).
                    let since = self.state(id).and_then(AlertState::firing_since);
                    if since.is_some_and(|s| s - wider > LATE_MEMBER_MS) {
                        break;
                    }
                    self.suppressed.insert(id.clone());
                    return;
                }
                if self.qualifies(&id.0, level, g) {
                    self.fire_wider(&wid, &labels, ts, out);
                    self.suppressed.insert(id.clone());
                    return;
                }
            }
        }
        let Some(ev) = self.event_of(id, Status::Firing, ts) else {
            return;
        };
        if self.silences.muted_by(&ev, ts).is_some() || self.inhibitor.inhibited(&ev, true) {
            self.suppressed.insert(id.clone());
            return;
        }
        if let Some(st) = self.state_mut(id) {
            st.notified = true;
        }
        self.suppressed.remove(id);
        out.push(ev);
    }

    /// Raises the wider-scope alert `wid` for its currently active members.
    fn fire_wider(
        &mut self,
        wid: &AlertId,
        member_labels: &Labels,
        ts: i64,
        out: &mut Vec<AlertEvent>,
    ) {
        let level = wid.1.level();
        let labels: Labels = Scope::ALL[level..]
            .iter()
            .filter_map(|s| s.label())
            .filter_map(|l| member_labels.get(l).map(|v| (l.to_owned(), v.clone())))
            .collect();
        let summary = self.summarize(wid);
        let t = self
            .kinds
            .get_mut(&wid.0)
            .expect("a member of this kind exists");
        let st = t.states[level]
            .entry(wid.2.clone())
            .or_insert_with(|| AlertState::new(labels.clone(), Severity::Info, ts));
        st.labels = labels;
        (st.severity, st.risk, st.eta_hours, st.summary, st.reasons) = summary;
        st.derived = true;
        st.notified = false;
        st.last_seen = ts;
        st.phase = Phase::Firing {
            since: ts,
            clear_since: None,
        };
        if !self.inhibitor.is_empty()
            && let Some(ev) = self.event_of(wid, Status::Firing, ts)
        {
            self.inhibitor.source_changed(&ev, 1);
        }
        self.try_surface(wid, ts, out);
    }

    /// Severity, risk, eta, summary and reasons of a wider alert from its members.
    fn summarize(&self, wid: &AlertId) -> (Severity, f64, Option<f64>, String, Vec<Reason>) {
        let level = wid.1.level();
        let child_scope = Scope::ALL[level - 1];
        let mut severity = Severity::Info;
        let (mut risk, mut eta, mut alerts) = (0.0_f64, None::<f64>, 0_usize);
        let mut strongest: Option<&AlertState> = None;
        if let Some(t) = self.kinds.get(&wid.0) {
            // In id order: the first of equally strong members wins, whatever
            // the hash maps' order (a restored engine must say the same).
            let mut ids: Vec<AlertId> = self.members(wid).collect();
            ids.sort_unstable();
            for st in ids.iter().filter_map(|m| t.states[m.1.level()].get(&m.2)) {
                alerts += 1;
                severity = severity.max(st.severity);
                eta = match (eta, st.eta_hours) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if strongest.is_none() || st.risk > risk {
                    risk = st.risk;
                    strongest = Some(st);
                }
            }
        }
        let mut children: Vec<(&str, u32)> = self
            .kinds
            .get(&wid.0)
            .and_then(|t| t.groups[level].get(&wid.2))
            .map(|g| g.iter().map(|(c, n)| (&**c, *n)).collect())
            .unwrap_or_default();
        children.sort_unstable();
        let known = self.topology.children(wid.1, &wid.2).max(children.len());
        let mut reasons: Vec<Reason> = children
            .iter()
            .take(MAX_LISTED_MEMBERS)
            .map(|(c, n)| Reason {
                signal: "member".to_owned(),
                detail: format!("{child_scope} {c}: {n} {} alert(s)", wid.0),
            })
            .collect();
        if children.len() > MAX_LISTED_MEMBERS {
            let more = children.len() - MAX_LISTED_MEMBERS;
            reasons.push(Reason {
                signal: "member".to_owned(),
                detail: format!("and {more} more {child_scope}s"),
            });
        }
        let mut summary = format!(
            "{} {}: {} of {known} {child_scope}s show {} together ({alerts} member alerts held back)",
            wid.1,
            wid.2,
            children.len(),
            wid.0
        );
        if let Some(s) = strongest {
            summary.push_str("; strongest: ");
            summary.push_str(&s.summary);
            reasons.extend(s.reasons.iter().cloned());
        }
        (severity, risk, eta, summary, reasons)
    }

    /// Active observed alerts of `wid`'s kind below its scope that it covers.
    fn members<'a>(&'a self, wid: &'a AlertId) -> impl Iterator<Item = AlertId> + 'a {
        let level = wid.1.level();
        let label = wid.1.label();
        self.kinds.get(&wid.0).into_iter().flat_map(move |t| {
            t.states[..level]
                .iter()
                .enumerate()
                .flat_map(move |(l, m)| {
                    m.iter()
                        .filter(move |(_, s)| {
                            s.active()
                                && !s.derived
                                && label.is_none_or(|lb| {
                                    s.labels.get(lb).map(String::as_str) == Some(&*wid.2)
                                })
                        })
                        .map(move |(v, _)| (wid.0.clone(), Scope::ALL[l], v.clone()))
                })
        })
    }

    /// After a member became inactive: starts the resolve hold of wider
    /// alerts covering it whose group no longer qualifies.
    pub(crate) fn check_wider(&mut self, id: &AlertId, ts: i64) {
        let Some(st) = self.state(id) else { return };
        if st.derived {
            return;
        }
        let labels = st.labels.clone();
        for level in id.1.level() + 1..Scope::ALL.len() {
            let Some(g) = Scope::ALL[level].value_in(&labels) else {
                continue;
            };
            let wid: AlertId = (id.0.clone(), Scope::ALL[level], g.into());
            if !self.state(&wid).is_some_and(AlertState::firing) || self.qualifies(&id.0, level, g)
            {
                continue;
            }
            // Its resolve hold starts (see `settle_wider`).
            if let Some(st) = self.state_mut(&wid)
                && let Phase::Firing {
                    since,
                    clear_since: None,
                } = st.phase
            {
                st.phase = Phase::Firing {
                    since,
                    clear_since: Some(ts),
                };
            }
        }
    }

    /// On the engine's sweep: a wider alert whose group qualifies again
    /// keeps firing; one whose group stayed short of its thresholds for its
    /// kind's resolve hold resolves, and its held members surface. (Without
    /// the hold a group whose members were pending ones that came and went
    /// fired and resolved a rack alert four times in 40 minutes.)
    /// `clearing`: each wider alert in its hold with its kind's resolve
    /// hold (collected by the sweep that ticks the states).
    pub(crate) fn settle_wider(
        &mut self,
        mut clearing: Vec<(AlertId, i64)>,
        now: i64,
        out: &mut Vec<AlertEvent>,
    ) {
        clearing.sort_unstable();
        for (wid, hold) in clearing {
            let Some(c) = self.state(&wid).and_then(AlertState::clearing_since) else {
                continue;
            };
            if self.qualifies(&wid.0, wid.1.level(), &wid.2) {
                if let Some(st) = self.state_mut(&wid)
                    && let Phase::Firing { since, .. } = st.phase
                {
                    st.phase = Phase::Firing {
                        since,
                        clear_since: None,
                    };
                }
                continue;
            }
            if now.saturating_sub(c) < hold {
                continue;
            }
            if let Some(step) = self
                .state_mut(&wid)
                .map(|s| s.force_resolve(now, ResolveCause::Uncorrelated))
                && step.deactivated == Some(true)
            {
                self.finish(&wid, now, ResolveCause::Uncorrelated, out);
            }
            let mut held: Vec<AlertId> = self
                .members(&wid)
                .filter(|m| self.state(m).is_some_and(|s| s.firing() && !s.notified))
                .collect();
            held.sort();
            for m in held {
                self.try_surface(&m, now, out);
            }
        }
    }

    /// Re-examines every held / muted alert.
    pub(crate) fn recheck_suppressed(&mut self, now: i64, out: &mut Vec<AlertEvent>) {
        self.recheck = false;
        if self.suppressed.is_empty() {
            return;
        }
        let ids: Vec<AlertId> = self.suppressed.iter().cloned().collect();
        for id in ids {
            self.try_surface(&id, now, out);
        }
    }
}
