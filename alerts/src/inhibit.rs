//! Inhibition: a firing source alert (say `kind="host_down"`) mutes target
//! alerts (its GPUs' alerts) that share the rule's `equal` labels, with
//! Alertmanager's semantics. The engine keeps a count of firing sources per
//! (rule, equal-label values) so checking a target is a few lookups; an
//! alert never inhibits itself.

use std::collections::HashMap;

use crate::alert::AlertEvent;
use serde::Deserialize;

use crate::matcher::{self, Matcher};

/// `[[inhibit_rules]]`: a firing source alert mutes matching targets that
/// share the `equal` labels (Alertmanager semantics).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawInhibitRule {
    /// Matchers the inhibiting (source) alert must satisfy.
    pub source_matchers: Vec<String>,
    /// Matchers the muted (target) alert must satisfy.
    pub target_matchers: Vec<String>,
    /// Labels whose values must be equal in source and target.
    #[serde(default)]
    pub equal: Vec<String>,
}

/// A validated inhibition rule.
#[derive(Debug, Clone)]
pub struct InhibitRule {
    /// Source matchers.
    pub source: Vec<Matcher>,
    /// Target matchers.
    pub target: Vec<Matcher>,
    /// Labels that must be equal.
    pub equal: Vec<String>,
}

/// Firing-source index over all rules.
#[derive(Debug, Default)]
pub struct Inhibitor {
    rules: Vec<InhibitRule>,
    /// (rule index, `\u{1f}`-joined equal-label values) -> firing sources.
    sources: HashMap<(usize, String), u32>,
}

fn key(rule: &InhibitRule, alert: &AlertEvent) -> String {
    let mut k = String::new();
    for (i, l) in rule.equal.iter().enumerate() {
        if i > 0 {
            k.push('\u{1f}');
        }
        k.push_str(alert.field(l).unwrap_or(""));
    }
    k
}

impl Inhibitor {
    /// An index over `rules`.
    pub fn new(rules: Vec<InhibitRule>) -> Self {
        Self {
            rules,
            sources: HashMap::new(),
        }
    }

    /// Whether there are no rules (lets the engine skip building events).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Records that `alert` started (`delta = 1`) or stopped (`-1`) firing.
    pub fn source_changed(&mut self, alert: &AlertEvent, delta: i32) {
        for (i, r) in self.rules.iter().enumerate() {
            if !matcher::all_match(&r.source, alert) {
                continue;
            }
            let entry = self.sources.entry((i, key(r, alert))).or_insert(0);
            *entry = entry.saturating_add_signed(delta);
            if *entry == 0 {
                self.sources.remove(&(i, key(r, alert)));
            }
        }
    }

    /// One text per rule identifying it (its matchers and equal labels):
    /// snapshots keep source counts only for unchanged rules.
    pub fn fingerprints(&self) -> Vec<String> {
        let list = |ms: &[Matcher]| ms.iter().map(ToString::to_string).collect::<Vec<_>>();
        self.rules
            .iter()
            .map(|r| {
                format!(
                    "{:?} -> {:?} on {:?}",
                    list(&r.source),
                    list(&r.target),
                    r.equal
                )
            })
            .collect()
    }

    /// The firing-source counts, sorted.
    pub fn sources(&self) -> Vec<(u32, String, u32)> {
        let mut v: Vec<(u32, String, u32)> = self
            .sources
            .iter()
            .map(|((i, k), n)| (u32::try_from(*i).unwrap_or(u32::MAX), k.clone(), *n))
            .collect();
        v.sort_unstable();
        v
    }

    /// Replaces the counts (from a snapshot of the same rules); counts of
    /// rules that do not exist are ignored.
    pub fn set_sources(&mut self, sources: Vec<(u32, String, u32)>) {
        self.sources = sources
            .into_iter()
            .filter(|(i, _, n)| (*i as usize) < self.rules.len() && *n > 0)
            .map(|(i, k, n)| ((i as usize, k), n))
            .collect();
    }

    /// Whether `alert` is muted by a firing source other than itself
    /// (`self_firing`: whether `alert` itself is counted as a source).
    pub fn inhibited(&self, alert: &AlertEvent, self_firing: bool) -> bool {
        self.rules.iter().enumerate().any(|(i, r)| {
            if !matcher::all_match(&r.target, alert) {
                return false;
            }
            let n = self.sources.get(&(i, key(r, alert))).copied().unwrap_or(0);
            let own = u32::from(self_firing && matcher::all_match(&r.source, alert));
            n > own
        })
    }
}
