//! Component health: every long-lived part of the service (the source,
//! each shard, the alert stage, the outbox, each delivery worker, the
//! exporter, the checkpointer, the model watcher, REST) reports here, and
//! `/healthz`, `/readyz` and `forewarn_component_up{component}` read it.
//!
//! Three states, because operators act on them differently:
//! - **up**: working.
//! - **degraded**: a fault the part is retrying by itself (the outbox disk
//!   is full, a receiver or broker is unreachable). `/readyz` answers 503
//!   when the part is on the alert path; `/healthz` stays 200 (restarting
//!   would not help) but names it.
//! - **down**: the part stopped (its thread failed or panicked). `/healthz`
//!   answers 503 naming it; a part the service cannot run without also
//!   ends the process with a non-zero exit (see `commands::serve`), so
//!   systemd or Kubernetes restarts it from the last checkpoint.
//!
//! Every transition is logged once (ERROR into degraded or down, INFO back
//! to up), so a fault is in the log within the time the part notices it,
//! and a retrying part does not flood it.

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde::Serialize;

/// The state of one component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    Up,
    Degraded,
    Down,
}

/// One component as `/healthz` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Component {
    pub condition: Condition,
    /// Why it is not up (the newest error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// Wall time (epoch ms) of the last change of condition.
    pub since_ms: i64,
    /// Whether `/readyz` fails while this part is degraded.
    #[serde(skip)]
    pub gates_readiness: bool,
}

/// The registry of component health (one per service).
#[derive(Debug, Default)]
pub struct Health {
    parts: RwLock<BTreeMap<String, Component>>,
}

impl Health {
    /// Registers `name` as up. `gates_readiness`: a degraded state fails
    /// `/readyz` (parts on the path from input to the outbox).
    pub fn register(&self, name: &str, gates_readiness: bool) {
        if let Ok(mut p) = self.parts.write() {
            p.entry(name.to_owned()).or_insert(Component {
                condition: Condition::Up,
                cause: None,
                since_ms: crate::checkpoint::wall_ms(),
                gates_readiness,
            });
        }
    }

    /// `name` works (again).
    pub fn up(&self, name: &str) {
        self.set(name, Condition::Up, None);
    }

    /// `name` hit a fault it retries by itself.
    pub fn degraded(&self, name: &str, cause: impl std::fmt::Display) {
        self.set(name, Condition::Degraded, Some(cause.to_string()));
    }

    /// `name` stopped.
    pub fn down(&self, name: &str, cause: impl std::fmt::Display) {
        self.set(name, Condition::Down, Some(cause.to_string()));
    }

    fn set(&self, name: &str, condition: Condition, cause: Option<String>) {
        // The common call (a part that works saying so, every round) only
        // reads.
        if condition == Condition::Up
            && self
                .parts
                .read()
                .is_ok_and(|p| p.get(name).is_some_and(|c| c.condition == Condition::Up))
        {
            return;
        }
        let Ok(mut parts) = self.parts.write() else {
            return;
        };
        let part = parts.entry(name.to_owned()).or_insert(Component {
            condition: Condition::Up,
            cause: None,
            since_ms: crate::checkpoint::wall_ms(),
            gates_readiness: false,
        });
        if part.condition == condition {
            // Keep the newest cause without logging again.
            if cause.is_some() {
                part.cause = cause;
            }
            return;
        }
        let why = cause.as_deref().unwrap_or("");
        match condition {
            Condition::Up => tracing::info!(component = name, "component recovered"),
            Condition::Degraded => {
                tracing::error!(
                    component = name,
                    cause = why,
                    "component degraded (retrying)"
                )
            }
            Condition::Down => tracing::error!(component = name, cause = why, "component stopped"),
        }
        part.condition = condition;
        part.cause = cause;
        part.since_ms = crate::checkpoint::wall_ms();
    }

    /// Every component, by name.
    pub fn snapshot(&self) -> BTreeMap<String, Component> {
        self.parts.read().map(|p| p.clone()).unwrap_or_default()
    }

    /// Components that are down.
    pub fn down_parts(&self) -> Vec<String> {
        self.filter(|c| c.condition == Condition::Down)
    }

    /// Components that fail readiness: down, or degraded on the alert path.
    pub fn unready_parts(&self) -> Vec<String> {
        self.filter(|c| {
            c.condition == Condition::Down
                || (c.condition == Condition::Degraded && c.gates_readiness)
        })
    }

    fn filter(&self, f: impl Fn(&Component) -> bool) -> Vec<String> {
        self.parts
            .read()
            .map(|p| {
                p.iter()
                    .filter(|(_, c)| f(c))
                    .map(|(n, _)| n.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `(component, 1 if up else 0)` for the metrics page.
    pub fn gauges(&self) -> Vec<(String, i64)> {
        self.snapshot()
            .into_iter()
            .map(|(n, c)| (n, i64::from(c.condition == Condition::Up)))
            .collect()
    }
}

/// Marks a thread's component down if the thread unwinds (a panic), so a
/// dead shard or alert thread shows in `/healthz` even though nothing
/// returned an error.
pub struct PanicGuard<'a> {
    pub health: &'a Health,
    pub name: String,
}

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.health.down(&self.name, "the thread panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_gate_health_and_readiness_separately() {
        let h = Health::default();
        h.register("outbox", true);
        h.register("delivery:pd", false);
        h.register("shard-0", true);
        assert!(h.unready_parts().is_empty() && h.down_parts().is_empty());
        h.degraded("delivery:pd", "connection refused");
        assert!(
            h.unready_parts().is_empty(),
            "a receiver outage is not ours"
        );
        h.degraded("outbox", "No space left on device");
        assert_eq!(h.unready_parts(), ["outbox"]);
        assert!(
            h.down_parts().is_empty(),
            "a full disk is retried, not fatal"
        );
        h.up("outbox");
        assert!(h.unready_parts().is_empty());
        std::thread::scope(|s| {
            let t = s.spawn(|| {
                let _g = PanicGuard {
                    health: &h,
                    name: "shard-0".into(),
                };
                panic!("boom");
            });
            assert!(t.join().is_err());
        });
        assert_eq!(h.down_parts(), ["shard-0"]);
        assert_eq!(h.unready_parts(), ["shard-0"]);
        let g = h.gauges();
        assert!(g.contains(&("shard-0".to_owned(), 0)));
        assert!(g.contains(&("delivery:pd".to_owned(), 0)));
        let snap = h.snapshot();
        assert_eq!(
            snap["shard-0"].cause.as_deref(),
            Some("the thread panicked")
        );
    }
}
