//! Checkpoints of the engine: [`AlertEngine::snapshot`] copies every piece
//! of dynamic state into an [`EngineSnapshot`] (a plain serde type, meant
//! for a binary format that keeps floats exactly, such as CBOR), and
//! [`AlertEngine::restore`] rebuilds an engine from it under a config that
//! may have changed since. The router's groups have their own snapshot
//! (`route::checkpoint`).
//!
//! What comes from where on restore:
//! - the config: lifecycle rules, correlation levels, excluded kinds, job
//!   rules, inhibition rules, slot labels and the config file's silences;
//! - the snapshot: per-identity lifecycle state, correlation and job
//!   counters, learned topology, silences added at run time (and the
//!   early end of a config silence expired at run time), inhibition source
//!   counts, the held / muted set, the sweep timer.
//!
//! A kind that had its own `[lifecycle.kinds.<kind>]` rule when the snapshot
//! was taken and has none now is dropped with a warning; its delivered
//! alerts are resolved by the next `tick` so no incident stays open
//! downstream. Counters derived from config (correlation, job, inhibition)
//! are recomputed from the restored states when the config behind them
//! changed; otherwise they are restored as they were, so an unchanged config
//! continues exactly where the snapshot left off.
//!
//! Snapshots are sorted, so the same state gives the same bytes.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::alert::{AlertEvent, Labels, Reason, Scope, Severity, Status};
use crate::config::EngineConfig;
use crate::engine::{AlertEngine, AlertId, KindTable};
use crate::inhibit::Inhibitor;
use crate::lifecycle::AlertState;
use crate::matcher::{Matcher, MatcherSpec};
use crate::silence::{Silence, Silences};
use crate::topology::{Topology, TopologySnapshot};

/// Format version of [`EngineSnapshot`]; bump it on any change to the
/// snapshot types (including `AlertState`, which is stored as is) that
/// older snapshots would not load into — not for a field added with
/// `#[serde(default)]`, which they load into as its default.
pub const ENGINE_SNAPSHOT_VERSION: u32 = 1;

/// Why a snapshot could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// Written by another format version.
    #[error("{what} snapshot has version {found}, this build reads version {supported}")]
    UnsupportedVersion {
        /// `engine` or `router`.
        what: &'static str,
        /// Version in the snapshot.
        found: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// A silence in the snapshot does not rebuild (a regex no longer compiles).
    #[error("silence {id:?} in the snapshot: {reason}")]
    Silence {
        /// Silence id.
        id: String,
        /// The matcher error.
        reason: String,
    },
    /// A part of the snapshot does not decode.
    #[error("router snapshot: {0}")]
    Corrupt(String),
}

/// Just the version of a snapshot: deserialize this from the bytes first
/// (other fields are ignored) to tell an old snapshot from a corrupt one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct SnapshotHeader {
    /// [`ENGINE_SNAPSHOT_VERSION`] or `route::ROUTER_SNAPSHOT_VERSION` of the writer.
    pub version: u32,
}

/// All dynamic state of an [`AlertEngine`] (see the module docs). Compare
/// two snapshots by their encoded bytes (values may be NaN).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineSnapshot {
    /// Format version ([`ENGINE_SNAPSHOT_VERSION`]).
    pub version: u32,
    kinds: Vec<KindSnapshot>,
    topology: TopologySnapshot,
    silences: Vec<SilenceRecord>,
    /// Config silences no longer listed (ended long ago and collected):
    /// not brought back by a restore under the same config.
    collected: Vec<SilenceRecord>,
    /// Fingerprints of the inhibition rules the counts below belong to.
    inhibit_rules: Vec<String>,
    inhibit_sources: Vec<(u32, String, u32)>,
    /// Fingerprint of the correlation config the counters belong to.
    correlation: String,
    suppressed: Vec<AlertId>,
    orphans: Vec<(AlertId, AlertState)>,
    recheck: bool,
    last_sweep: i64,
}

/// One correlation group: (group value, active members per child unit).
type GroupRecord = (Box<str>, Vec<(Box<str>, u32)>);

#[derive(Debug, Clone, Serialize, Deserialize)]
struct KindSnapshot {
    kind: Box<str>,
    /// The kind had its own rule in the config (not the default).
    own_rule: bool,
    states: [Vec<(Box<str>, AlertState)>; 5],
    groups: [Vec<GroupRecord>; 5],
    jobs: Vec<(Box<str>, u32)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SilenceRecord {
    id: String,
    matchers: Vec<MatcherSpec>,
    starts_at_ms: i64,
    ends_at_ms: i64,
    created_by: String,
    comment: String,
    /// A config file silence (possibly ended early at run time).
    from_config: bool,
}

fn sorted<K: Ord + Clone, V: Clone>(m: &HashMap<K, V>) -> Vec<(K, V)> {
    let mut v: Vec<(K, V)> = m.iter().map(|(k, x)| (k.clone(), x.clone())).collect();
    v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    v
}

fn correlation_fingerprint(cfg: &EngineConfig) -> String {
    let mut exclude = cfg.exclude_kinds.clone();
    exclude.sort_unstable();
    let mut jobs: Vec<_> = cfg.job_rules.iter().collect();
    jobs.sort_unstable_by(|a, b| a.0.cmp(b.0));
    format!("{:?} {exclude:?} {jobs:?}", cfg.levels)
}

impl AlertEngine {
    /// Copies all dynamic state (see the module docs). Takes time and memory
    /// in proportion to the alert states and the learned topology; call it
    /// between `observe` / `tick` calls, as often as checkpoints are due.
    pub fn snapshot(&self) -> EngineSnapshot {
        let mut kinds: Vec<KindSnapshot> = self
            .kinds
            .iter()
            .map(|(kind, t)| KindSnapshot {
                kind: kind.clone(),
                own_rule: self.cfg.rules.contains_key(&**kind),
                states: std::array::from_fn(|l| sorted(&t.states[l])),
                groups: std::array::from_fn(|l| {
                    let mut g: Vec<GroupRecord> = t.groups[l]
                        .iter()
                        .map(|(k, m)| (k.clone(), sorted(m)))
                        .collect();
                    g.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    g
                }),
                jobs: sorted(&t.jobs),
            })
            .collect();
        kinds.sort_unstable_by(|a, b| a.kind.cmp(&b.kind));
        let record = |s: &Silence, from_config: bool| SilenceRecord {
            id: s.id.clone(),
            matchers: s.matchers.iter().map(Matcher::spec).collect(),
            starts_at_ms: s.starts_at_ms,
            ends_at_ms: s.ends_at_ms,
            created_by: s.created_by.clone(),
            comment: s.comment.clone(),
            from_config,
        };
        let listed = self.silences.list();
        let silences = listed
            .iter()
            .map(|s| {
                let from_config = self
                    .cfg
                    .silences
                    .iter()
                    .any(|c| c.same_but_end(s) && s.ends_at_ms <= c.ends_at_ms);
                record(s, from_config)
            })
            .collect();
        let collected = self
            .cfg
            .silences
            .iter()
            .filter(|c| !listed.iter().any(|s| c.same_but_end(s)))
            .map(|c| record(c, true))
            .collect();
        EngineSnapshot {
            version: ENGINE_SNAPSHOT_VERSION,
            kinds,
            topology: self.topology.snapshot(),
            silences,
            collected,
            inhibit_rules: self.inhibitor.fingerprints(),
            inhibit_sources: self.inhibitor.sources(),
            correlation: correlation_fingerprint(&self.cfg),
            suppressed: self.suppressed.iter().cloned().collect(),
            orphans: self.orphans.clone(),
            recheck: self.recheck,
            last_sweep: self.last_sweep,
        }
    }

    /// Rebuilds an engine from `snap` under `cfg` (see the module docs).
    /// Fails only on a snapshot of another format version or a silence
    /// whose matchers no longer compile; never panics on a changed config.
    pub fn restore(cfg: EngineConfig, snap: EngineSnapshot) -> Result<Self, SnapshotError> {
        if snap.version != ENGINE_SNAPSHOT_VERSION {
            return Err(SnapshotError::UnsupportedVersion {
                what: "engine",
                found: snap.version,
                supported: ENGINE_SNAPSHOT_VERSION,
            });
        }
        let silences = restore_silences(&cfg.silences, snap.silences, &snap.collected)?;
        let mut e = AlertEngine::new(cfg);
        e.silences = silences;
        e.topology = Topology::restore(e.cfg.slot_labels.clone(), snap.topology);
        e.orphans = snap.orphans;
        let mut dropped = false;
        for k in snap.kinds {
            if k.own_rule && !e.cfg.rules.contains_key(&*k.kind) {
                let delivered = k.states.iter().flatten().filter(|(_, s)| s.notified);
                let n = delivered.clone().count();
                tracing::warn!(
                    kind = &*k.kind,
                    delivered_alerts = n,
                    "kind's rule removed from the config: its alert state is dropped and its delivered alerts resolve on the next tick"
                );
                for (level, states) in k.states.into_iter().enumerate() {
                    for (value, st) in states.into_iter().filter(|(_, s)| s.notified) {
                        e.orphans
                            .push(((k.kind.clone(), Scope::ALL[level], value), st));
                    }
                }
                dropped = true;
                continue;
            }
            let mut t: KindTable = AlertEngine::new_table(&e.cfg, &k.kind);
            for (level, states) in k.states.into_iter().enumerate() {
                t.states[level] = states.into_iter().collect();
            }
            for (level, groups) in k.groups.into_iter().enumerate() {
                t.groups[level] = groups
                    .into_iter()
                    .map(|(g, m)| (g, m.into_iter().collect()))
                    .collect();
            }
            t.jobs = k.jobs.into_iter().collect();
            e.kinds.insert(k.kind, t);
        }
        if snap.correlation != correlation_fingerprint(&e.cfg) {
            tracing::info!("correlation config changed since the snapshot: recounting groups");
            e.recount_members();
        }
        if !e.inhibitor.is_empty() {
            if !dropped && snap.inhibit_rules == e.inhibitor.fingerprints() {
                e.inhibitor.set_sources(snap.inhibit_sources);
            } else {
                e.recount_inhibitors();
            }
        }
        e.suppressed = snap
            .suppressed
            .into_iter()
            .filter(|id| e.kinds.contains_key(&id.0))
            .collect::<BTreeSet<_>>();
        // A changed config can unmute held alerts: look at them again.
        e.recheck = snap.recheck || dropped;
        e.last_sweep = snap.last_sweep;
        Ok(e)
    }

    /// Recomputes correlation and job counters from the active states.
    fn recount_members(&mut self) {
        let mut ids = Vec::new();
        for (kind, t) in &mut self.kinds {
            t.groups = Default::default();
            t.jobs.clear();
            for (level, states) in t.states.iter().enumerate() {
                for (value, st) in states {
                    if st.active() && !st.derived {
                        ids.push((kind.clone(), Scope::ALL[level], value.clone()));
                    }
                }
            }
        }
        for id in ids {
            self.count_member(&id, 1);
        }
    }

    /// Recomputes the inhibition source counts from the firing states.
    fn recount_inhibitors(&mut self) {
        let mut inhibitor = Inhibitor::new(self.cfg.inhibit_rules.clone());
        for (kind, t) in &self.kinds {
            for (level, states) in t.states.iter().enumerate() {
                for (value, st) in states.iter().filter(|(_, s)| s.firing()) {
                    let ev = st.event(Status::Firing, st.last_seen, kind, Scope::ALL[level], value);
                    inhibitor.source_changed(&ev, 1);
                }
            }
        }
        self.inhibitor = inhibitor;
    }
}

/// Config silences (with any early end from the snapshot), then the
/// run-time ones from the snapshot, replacing by id as `add_silence` does.
fn restore_silences(
    config: &[Silence],
    records: Vec<SilenceRecord>,
    collected: &[SilenceRecord],
) -> Result<Silences, SnapshotError> {
    let gone = |c: &Silence| {
        collected.iter().any(|r| {
            r.id == c.id
                && r.starts_at_ms == c.starts_at_ms
                && r.ends_at_ms == c.ends_at_ms
                && r.created_by == c.created_by
                && r.comment == c.comment
                && r.matchers.iter().eq(c
                    .matchers
                    .iter()
                    .map(|m| m.spec())
                    .collect::<Vec<_>>()
                    .iter())
        })
    };
    let kept: Vec<Silence> = config.iter().filter(|c| !gone(c)).cloned().collect();
    let mut list = Silences::new(kept);
    for r in records {
        let matchers = r
            .matchers
            .iter()
            .map(Matcher::from_spec)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| SnapshotError::Silence {
                id: r.id.clone(),
                reason: e.to_string(),
            })?;
        let s = Silence {
            id: r.id,
            matchers,
            starts_at_ms: r.starts_at_ms,
            ends_at_ms: r.ends_at_ms,
            created_by: r.created_by,
            comment: r.comment,
        };
        if r.from_config {
            // Kept only if the config still has it: then an early end stays.
            if config.iter().any(|c| c.same_but_end(&s)) {
                list.expire(&s.id, s.ends_at_ms);
            }
        } else {
            list.upsert(s);
        }
    }
    Ok(list)
}

/// An [`AlertEvent`] as stored in router snapshots: `ts` as epoch ms (the
/// contract's RFC 3339 text covers only years 0 to 9999).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct EventRecord {
    ts: i64,
    status: Status,
    severity: Severity,
    kind: String,
    scope: Scope,
    labels: Labels,
    dedup_key: String,
    summary: String,
    risk: f64,
    eta_hours: Option<f64>,
    reasons: Vec<Reason>,
}

impl From<&AlertEvent> for EventRecord {
    fn from(e: &AlertEvent) -> Self {
        Self {
            ts: e.ts,
            status: e.status,
            severity: e.severity,
            kind: e.kind.clone(),
            scope: e.scope,
            labels: e.labels.clone(),
            dedup_key: e.dedup_key.clone(),
            summary: e.summary.clone(),
            risk: e.risk,
            eta_hours: e.eta_hours,
            reasons: e.reasons.clone(),
        }
    }
}

impl From<EventRecord> for AlertEvent {
    fn from(e: EventRecord) -> Self {
        Self {
            ts: e.ts,
            status: e.status,
            severity: e.severity,
            kind: e.kind,
            scope: e.scope,
            labels: e.labels,
            dedup_key: e.dedup_key,
            summary: e.summary,
            risk: e.risk,
            eta_hours: e.eta_hours,
            reasons: e.reasons,
        }
    }
}
