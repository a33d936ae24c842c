//! Checkpoints of the aggregation groups: [`Dispatcher::snapshot`] copies
//! every group (pending changes, notified firing alerts, flush and re-send
//! timers) into a [`RouterSnapshot`]; [`Dispatcher::restore`] puts them back
//! under a routing tree that may have changed since.
//!
//! A group belongs to a route, and route ids are positions in the tree, so
//! the snapshot names each group's route by its signature (matchers on the
//! path from the root, receiver, `group_by`) and finds it again by that:
//! inserting or reordering routes keeps the groups of unchanged routes
//! (their group keys take the new route id). A group whose route no longer
//! exists is dropped with a warning. Intervals and re-send caps come from
//! the config given at restore.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::alert::AlertEvent;
use crate::route::dispatch::{Dispatcher, Group};
use crate::route::tree::Router;
use crate::snapshot::{EventRecord, SnapshotError};

/// Format version of [`RouterSnapshot`].
pub const ROUTER_SNAPSHOT_VERSION: u32 = 1;

/// All aggregation groups of a [`Dispatcher`] (or `AlertRouter`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RouterSnapshot {
    /// Format version ([`ROUTER_SNAPSHOT_VERSION`]).
    pub version: u32,
    groups: Vec<GroupRecord>,
    /// Notifications made but not yet in the outbox (its disk was full or
    /// failing), each as the JSON the outbox stores; `AlertRouter` keeps
    /// them so a checkpoint taken meanwhile loses none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) unwritten: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct GroupRecord {
    /// Signature of the group's route.
    route: String,
    /// Which of the routes with that signature (identical siblings), in id order.
    ordinal: u32,
    /// Group key without its `<route id>/` prefix.
    key: String,
    pending: Vec<EventRecord>,
    firing: Vec<EventRecord>,
    next_flush: Option<i64>,
    last_flush: Option<i64>,
    last_notify: i64,
}

/// (signature, ordinal) of every route id.
fn route_names(router: &Router) -> Vec<(String, u32)> {
    let mut seen: HashMap<String, u32> = HashMap::new();
    router
        .signatures()
        .into_iter()
        .map(|s| {
            let n = seen.entry(s.clone()).or_insert(0);
            let ordinal = *n;
            *n += 1;
            (s, ordinal)
        })
        .collect()
}

impl Dispatcher {
    /// Copies every aggregation group.
    pub fn snapshot(&self) -> RouterSnapshot {
        let names = route_names(&self.router);
        let groups = self
            .groups
            .iter()
            .filter_map(|(key, g)| {
                let (route, ordinal) = names.get(g.route)?.clone();
                let prefix = format!("{}/", g.route);
                Some(GroupRecord {
                    route,
                    ordinal,
                    key: key.strip_prefix(&prefix).unwrap_or(key).to_owned(),
                    pending: g.pending.iter().map(EventRecord::from).collect(),
                    firing: g.firing.values().map(EventRecord::from).collect(),
                    next_flush: g.next_flush,
                    last_flush: g.last_flush,
                    last_notify: g.last_notify,
                })
            })
            .collect();
        RouterSnapshot {
            version: ROUTER_SNAPSHOT_VERSION,
            groups,
            unwritten: Vec::new(),
        }
    }

    /// A dispatcher over `router` (as [`Dispatcher::new`]) with the groups of
    /// `snap` whose route still exists.
    pub fn restore(
        router: Router,
        resend_caps: HashMap<String, i64>,
        snap: RouterSnapshot,
    ) -> Result<Self, SnapshotError> {
        if snap.version != ROUTER_SNAPSHOT_VERSION {
            return Err(SnapshotError::UnsupportedVersion {
                what: "router",
                found: snap.version,
                supported: ROUTER_SNAPSHOT_VERSION,
            });
        }
        let ids: HashMap<(String, u32), usize> = route_names(&router)
            .into_iter()
            .enumerate()
            .map(|(id, name)| (name, id))
            .collect();
        let mut d = Dispatcher::new(router, resend_caps);
        for g in snap.groups {
            let Some(&id) = ids.get(&(g.route.clone(), g.ordinal)) else {
                tracing::warn!(
                    route = %g.route,
                    group = %g.key,
                    firing = g.firing.len(),
                    pending = g.pending.len(),
                    "route removed from the config: its aggregation group is dropped"
                );
                continue;
            };
            let Some(receiver) = d.router.route(id).map(|r| r.receiver.clone()) else {
                continue;
            };
            let firing: BTreeMap<String, AlertEvent> = g
                .firing
                .into_iter()
                .map(AlertEvent::from)
                .map(|e| (e.dedup_key.clone(), e))
                .collect();
            let group = Group {
                receiver,
                route: id,
                pending: g.pending.into_iter().map(AlertEvent::from).collect(),
                firing,
                next_flush: g.next_flush,
                last_flush: g.last_flush,
                last_notify: g.last_notify,
            };
            d.groups.insert(format!("{id}/{}", g.key), group);
        }
        Ok(d)
    }
}
