//! Routing: the Alertmanager-style routing tree ([`Router`]) and the
//! aggregation groups that turn routed alert events into notifications per
//! receiver ([`Dispatcher`]), both driven by event time.
//!
//! Differences from Alertmanager (also in `docs/alerts.md`):
//! - A notification carries the group's *changes* (new firing, resolved)
//!   rather than every alert of the group; re-sends after `repeat_interval`
//!   carry every firing alert and are flagged `resend`. Per-incident sinks
//!   (PagerDuty, webhook) would otherwise re-trigger unchanged incidents.
//! - An alert that fires and resolves inside one `group_wait` /
//!   `group_interval` window is never notified at all (neither state).
//! - Matchers may name `kind`, `severity`, `scope` besides labels.
//! - Receivers of type `alertmanager` cap the repeat at their `resend_interval`.

mod checkpoint;
pub mod config;
mod dispatch;
mod tree;

pub use checkpoint::{ROUTER_SNAPSHOT_VERSION, RouterSnapshot};
pub use config::{RawRoute, Route};
pub use dispatch::{Dispatcher, Notification};
pub use tree::Router;
