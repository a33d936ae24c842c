//! [`Dispatcher`]: aggregation groups in event time. Every routed alert
//! event joins the group (route, `group_by` values) of each route it matched;
//! [`Dispatcher::tick`] flushes groups into [`Notification`]s:
//! - a new group notifies `group_wait` after its first event;
//! - later changes notify no sooner than `group_interval` after the last
//!   notification of the group;
//! - a group with firing alerts and no changes re-sends them every
//!   `repeat_interval` (flagged `resend`);
//! - a firing event cancelled by its resolve before it was notified is
//!   dropped together with the resolve.
//!
//! Deterministic: groups are kept in a `BTreeMap` and flushed in key order.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::alert::{AlertEvent, Status};
use crate::route::tree::Router;
use crate::time::duration_ms;

/// One message for one receiver: what the outbox stores and a sink sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Receiver name.
    pub receiver: String,
    /// Aggregation group (`<route id>/<label>=<value>,...`).
    pub group_key: String,
    /// Event time the notification was made, epoch ms.
    pub ts: i64,
    /// Changes (or, for a resend, every firing alert), in event order.
    pub events: Vec<AlertEvent>,
    /// A periodic re-send of unchanged firing alerts.
    pub resend: bool,
    /// Alerts firing in the group after this notification.
    pub firing_in_group: usize,
    /// Made by a shadow route: recorded, never sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
}

#[derive(Debug)]
pub(crate) struct Group {
    pub receiver: String,
    pub route: usize,
    /// Changes since the last notification, in order.
    pub pending: Vec<AlertEvent>,
    /// Firing alerts already notified, by dedup key.
    pub firing: BTreeMap<String, AlertEvent>,
    pub next_flush: Option<i64>,
    pub last_flush: Option<i64>,
    pub last_notify: i64,
}

/// Aggregation groups of all routes.
#[derive(Debug)]
pub struct Dispatcher {
    pub(crate) router: Router,
    /// By `<route id>/<group_by values>`.
    pub(crate) groups: BTreeMap<String, Group>,
    /// Receiver name -> cap on the repeat interval (Alertmanager receivers).
    resend_caps: HashMap<String, i64>,
    scratch: Vec<usize>,
}

impl Dispatcher {
    /// A dispatcher over `router`; `resend_caps` caps the repeat interval of
    /// some receivers (ms).
    pub fn new(router: Router, resend_caps: HashMap<String, i64>) -> Self {
        Self {
            router,
            groups: BTreeMap::new(),
            resend_caps,
            scratch: Vec::new(),
        }
    }

    /// The routing tree.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Routes one alert event into its groups at event time `event.ts`.
    pub fn push(&mut self, event: &AlertEvent) {
        self.push_due(event);
    }

    /// [`Dispatcher::push`], returning the earliest flush due among the
    /// event's groups (see [`Dispatcher::next_due`]).
    pub fn push_due(&mut self, event: &AlertEvent) -> Option<i64> {
        let mut due: Option<i64> = None;
        let mut ids = std::mem::take(&mut self.scratch);
        self.router.matches(event, &mut ids);
        for &id in &ids {
            let Some(route) = self.router.route(id) else {
                continue;
            };
            let mut key = format!("{id}/");
            match &route.group_by {
                Some(labels) => {
                    for (i, l) in labels.iter().enumerate() {
                        if i > 0 {
                            key.push(',');
                        }
                        key.push_str(&format!("{l}={}", event.field(l).unwrap_or("")));
                    }
                }
                None => key.push_str(&event.dedup_key),
            }
            let (wait, interval) = (
                duration_ms(route.group_wait),
                duration_ms(route.group_interval),
            );
            let group = self.groups.entry(key).or_insert_with(|| Group {
                receiver: route.receiver.clone(),
                route: id,
                pending: Vec::new(),
                firing: BTreeMap::new(),
                next_flush: Some(event.ts + wait),
                last_flush: None,
                last_notify: event.ts,
            });
            let cancelled = event.status == Status::Resolved
                && !group.firing.contains_key(&event.dedup_key)
                && group.pending.iter().any(|e| e.dedup_key == event.dedup_key);
            if cancelled {
                group.pending.retain(|e| e.dedup_key != event.dedup_key);
            } else {
                group.pending.push(event.clone());
            }
            if group.next_flush.is_none() {
                let earliest = group.last_flush.map_or(event.ts, |t| t + interval);
                group.next_flush = Some(earliest.max(event.ts));
            }
            if let Some(t) = group.next_flush {
                due = Some(due.map_or(t, |d| d.min(t)));
            }
        }
        self.scratch = ids;
        due
    }

    /// Flushes every group due at `now_ms`.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Notification> {
        let mut out = Vec::new();
        for (key, g) in &mut self.groups {
            let Some(route) = self.router.route(g.route) else {
                continue;
            };
            let shadow = route.shadow;
            let mut repeat = duration_ms(route.repeat_interval);
            if let Some(cap) = self.resend_caps.get(&g.receiver) {
                repeat = repeat.min(*cap);
            }
            if g.next_flush.is_some_and(|t| t <= now_ms) {
                g.next_flush = None;
                if g.pending.is_empty() {
                    continue;
                }
                let events = std::mem::take(&mut g.pending);
                for e in &events {
                    match e.status {
                        Status::Firing => g.firing.insert(e.dedup_key.clone(), e.clone()),
                        Status::Resolved => g.firing.remove(&e.dedup_key),
                    };
                }
                g.last_flush = Some(now_ms);
                g.last_notify = now_ms;
                out.push(Notification {
                    receiver: g.receiver.clone(),
                    group_key: key.clone(),
                    ts: now_ms,
                    events,
                    resend: false,
                    firing_in_group: g.firing.len(),
                    shadow,
                });
            } else if g.pending.is_empty()
                && !g.firing.is_empty()
                && now_ms.saturating_sub(g.last_notify) >= repeat
            {
                g.last_notify = now_ms;
                out.push(Notification {
                    receiver: g.receiver.clone(),
                    group_key: key.clone(),
                    ts: now_ms,
                    events: g.firing.values().cloned().collect(),
                    resend: true,
                    firing_in_group: g.firing.len(),
                    shadow,
                });
            }
        }
        self.groups.retain(|_, g| {
            !(g.pending.is_empty() && g.firing.is_empty() && g.next_flush.is_none())
        });
        out
    }

    /// Whether some group holds events not yet in a notification (waiting
    /// for its `group_wait` or `group_interval`).
    pub fn has_pending(&self) -> bool {
        self.groups.values().any(|g| !g.pending.is_empty())
    }

    /// Event time of the next flush or re-send due, if any (lets a driver
    /// sleep exactly until then).
    pub fn next_due(&self) -> Option<i64> {
        self.groups
            .values()
            .filter_map(|g| {
                let route = self.router.route(g.route)?;
                let mut repeat = duration_ms(route.repeat_interval);
                if let Some(cap) = self.resend_caps.get(&g.receiver) {
                    repeat = repeat.min(*cap);
                }
                let resend = (!g.firing.is_empty()).then_some(g.last_notify + repeat);
                match (g.next_flush, resend) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                }
            })
            .min()
    }
}
