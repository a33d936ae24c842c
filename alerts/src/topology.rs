//! Topology learned from observations: which GPUs sit in which host, hosts
//! in which rack, racks in which cluster. Correlation needs it for the
//! "fraction of known members" threshold, and replacement detection needs
//! the physical slot of each GPU. Built from the topology labels (`host`,
//! `rack`, `cluster`) of each observation; a source that is already known
//! with the same parent costs one hash lookup and no allocation.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::alert::{Labels, Scope};

/// Number of levels below the fleet (gpu, host, rack, cluster) plus the fleet.
const LEVELS: usize = Scope::ALL.len();

#[derive(Debug, Default)]
struct Node {
    parent: Option<Box<str>>,
    children: HashSet<Box<str>>,
    /// Event time this node was last observed as a source itself.
    last_seen: Option<i64>,
    /// Slot key, for sources registered with slot labels.
    slot: Option<String>,
}

/// Units per level, with parent / children links.
#[derive(Debug)]
pub(crate) struct Topology {
    levels: [HashMap<Box<str>, Node>; LEVELS],
    /// Slot key -> source value occupying it.
    slots: HashMap<String, Box<str>>,
    /// Labels naming a physical slot of a `gpu` source (empty: no replacement detection).
    slot_labels: Vec<String>,
}

fn parent_value(level: usize, labels: &Labels) -> Option<&str> {
    // The fleet links every cluster; a unit without the next label stops the chain.
    Scope::ALL.get(level + 1).and_then(|s| s.value_in(labels))
}

impl Topology {
    pub fn new(slot_labels: Vec<String>) -> Self {
        Self {
            levels: Default::default(),
            slots: HashMap::new(),
            slot_labels,
        }
    }

    /// Records that the source `value` at `scope` reported at `ts`. Returns a
    /// source this one replaced in its slot (same slot labels, other value).
    pub fn observe(
        &mut self,
        scope: Scope,
        value: &str,
        labels: &Labels,
        ts: i64,
    ) -> Option<Box<str>> {
        let level = scope.level();
        let parent = parent_value(level, labels);
        if let Some(node) = self.levels[level].get_mut(value)
            && (parent.is_none() || node.parent.as_deref() == parent)
        {
            // A source reporting without its parent label keeps the parent it had.
            node.last_seen = Some(ts);
            return None;
        }
        self.register(level, value, labels);
        if let Some(node) = self.levels[level].get_mut(value) {
            node.last_seen = Some(ts);
        }
        if scope != Scope::Gpu || self.slot_labels.is_empty() {
            return None;
        }
        let mut key = String::new();
        for l in &self.slot_labels {
            key.push_str(labels.get(l)?);
            key.push('\u{1f}');
        }
        let previous = self.slots.insert(key.clone(), value.into());
        if let Some(node) = self.levels[level].get_mut(value) {
            node.slot = Some(key);
        }
        previous.filter(|p| &**p != value)
    }

    fn register(&mut self, level: usize, value: &str, labels: &Labels) {
        let parent = parent_value(level, labels);
        let old_parent = match self.levels[level].get_mut(value) {
            Some(node) => std::mem::replace(&mut node.parent, parent.map(Into::into)),
            None => {
                let node = Node {
                    parent: parent.map(Into::into),
                    ..Node::default()
                };
                self.levels[level].insert(value.into(), node);
                None
            }
        };
        if let Some(old) = old_parent {
            self.detach(level + 1, &old, value);
        }
        if let Some(p) = parent {
            let known = self.levels[level + 1].contains_key(p);
            if !known
                || self.levels[level + 1].get(p).map(|n| n.parent.as_deref())
                    != Some(parent_value(level + 1, labels))
            {
                self.register(level + 1, p, labels);
            }
            if let Some(node) = self.levels[level + 1].get_mut(p) {
                node.children.insert(value.into());
            }
        }
    }

    /// Removes `child` from the children of `value` at `level`, dropping
    /// units that are left with no children and were never sources.
    fn detach(&mut self, level: usize, value: &str, child: &str) {
        let Some(node) = self.levels.get_mut(level).and_then(|l| l.get_mut(value)) else {
            return;
        };
        node.children.remove(child);
        if node.children.is_empty() && node.last_seen.is_none() {
            self.remove(level, value);
        }
    }

    /// Forgets a unit (retired, replaced or stale).
    pub fn remove(&mut self, level: usize, value: &str) {
        let Some(node) = self.levels[level].remove(value) else {
            return;
        };
        if let Some(slot) = node.slot
            && self.slots.get(&slot).is_some_and(|v| &**v == value)
        {
            self.slots.remove(&slot);
        }
        if let Some(p) = node.parent {
            self.detach(level + 1, &p, value);
        }
    }

    /// Known direct children of a unit (GPUs of a host, hosts of a rack...).
    pub fn children(&self, scope: Scope, value: &str) -> usize {
        self.levels[scope.level()]
            .get(value)
            .map_or(0, |n| n.children.len())
    }

    /// Forgets sources not seen since `before` (and units left empty).
    pub fn gc(&mut self, before: i64) {
        for level in 0..LEVELS {
            let stale: Vec<Box<str>> = self.levels[level]
                .iter()
                .filter(|(_, n)| n.last_seen.is_some_and(|t| t < before))
                .map(|(k, _)| k.clone())
                .collect();
            for v in stale {
                let has_children = self.levels[level]
                    .get(&v)
                    .is_some_and(|n| !n.children.is_empty());
                if has_children {
                    if let Some(n) = self.levels[level].get_mut(&v) {
                        n.last_seen = None;
                    }
                } else {
                    self.remove(level, &v);
                }
            }
        }
    }
}

/// The topology as saved in an engine snapshot (sorted: same state, same bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TopologySnapshot {
    levels: [Vec<(Box<str>, NodeRecord)>; LEVELS],
    slots: Vec<(String, Box<str>)>,
    /// The slot labels the slot keys were made with.
    slot_labels: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct NodeRecord {
    parent: Option<Box<str>>,
    children: Vec<Box<str>>,
    last_seen: Option<i64>,
    slot: Option<String>,
}

impl Topology {
    /// A sorted copy of the learned topology.
    pub fn snapshot(&self) -> TopologySnapshot {
        let levels = std::array::from_fn(|l| {
            let mut v: Vec<(Box<str>, NodeRecord)> = self.levels[l]
                .iter()
                .map(|(k, n)| {
                    let mut children: Vec<Box<str>> = n.children.iter().cloned().collect();
                    children.sort_unstable();
                    let rec = NodeRecord {
                        parent: n.parent.clone(),
                        children,
                        last_seen: n.last_seen,
                        slot: n.slot.clone(),
                    };
                    (k.clone(), rec)
                })
                .collect();
            v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            v
        });
        let mut slots: Vec<(String, Box<str>)> = self
            .slots
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        slots.sort_unstable();
        TopologySnapshot {
            levels,
            slots,
            slot_labels: self.slot_labels.clone(),
        }
    }

    /// The topology of `snap` under the config's `slot_labels`. Slot keys
    /// made with other slot labels mean nothing now: they are dropped (the
    /// slots fill again as sources report).
    pub fn restore(slot_labels: Vec<String>, snap: TopologySnapshot) -> Self {
        let same_slots = snap.slot_labels == slot_labels;
        if !same_slots {
            tracing::warn!(
                old = ?snap.slot_labels,
                new = ?slot_labels,
                "slot labels changed since the snapshot: replacement detection starts afresh"
            );
        }
        let mut levels: [HashMap<Box<str>, Node>; LEVELS] = Default::default();
        for (level, nodes) in snap.levels.into_iter().enumerate() {
            levels[level] = nodes
                .into_iter()
                .map(|(k, n)| {
                    let node = Node {
                        parent: n.parent,
                        children: n.children.into_iter().collect(),
                        last_seen: n.last_seen,
                        slot: n.slot.filter(|_| same_slots),
                    };
                    (k, node)
                })
                .collect();
        }
        let slots = if same_slots {
            snap.slots.into_iter().collect()
        } else {
            HashMap::new()
        };
        Self {
            levels,
            slots,
            slot_labels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(gpu: &str, host: &str, rack: &str, slot: &str) -> Labels {
        [
            ("gpu", gpu),
            ("host", host),
            ("rack", rack),
            ("cluster", "c1"),
            ("slot", slot),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    #[test]
    fn learns_counts_moves_and_replacements() {
        let mut t = Topology::new(vec!["host".into(), "slot".into()]);
        for h in 0..2 {
            for g in 0..4 {
                let l = labels(&format!("g{h}{g}"), &format!("h{h}"), "r1", &g.to_string());
                assert_eq!(t.observe(Scope::Gpu, &format!("g{h}{g}"), &l, 0), None);
            }
        }
        assert_eq!(
            (t.children(Scope::Host, "h0"), t.children(Scope::Rack, "r1")),
            (4, 2)
        );
        assert_eq!(t.children(Scope::Cluster, "c1"), 1);
        // A new GPU in h0 slot 0 replaces g00.
        let replaced = t.observe(Scope::Gpu, "new", &labels("new", "h0", "r1", "0"), 10);
        assert_eq!(replaced.as_deref(), Some("g00"));
        t.remove(0, "g00");
        assert_eq!(t.children(Scope::Host, "h0"), 4);
        // Stale GPUs of h1 go, and h1 with them.
        t.observe(Scope::Gpu, "new", &labels("new", "h0", "r1", "0"), 100);
        for g in 1..4 {
            t.observe(
                Scope::Gpu,
                &format!("g0{g}"),
                &labels(&format!("g0{g}"), "h0", "r1", &g.to_string()),
                100,
            );
        }
        t.gc(50);
        assert_eq!(
            (t.children(Scope::Host, "h1"), t.children(Scope::Rack, "r1")),
            (0, 1)
        );
    }
}
