//! # alerts: a small, generic alert router
//!
//! Place in the pipeline: `models -> (detector turns risks into
//! observations) -> alerts -> PagerDuty / Slack / Alertmanager / webhook /
//! file`. It knows labels, severities, kinds and scopes, never GPUs or models.
//!
//! ## What the detector calls
//!
//! ```text
//! let cfg = RawConfig::from_toml(text)?.validate()?;        // no IO
//! let mut sys = AlertSystem::open(&cfg)?;                   // secrets, outbox recovery
//! let workers = sys.spawn_delivery(&shutdown);              // one task per receiver
//! for each evaluation:
//!     let events = sys.engine.observe(&Observation { ts_ms, kind, scope, labels, severity,
//!                                                     value: risk, summary, reasons, eta_hours,
//!                                                     confirmed });
//!     sys.router.push(&events);
//! as event time passes (every few seconds):
//!     let events = sys.engine.tick(now_ms); sys.router.push(&events);
//!     sys.router.flush(now_ms)?;                            // blocking: spawn_blocking it
//! GPU removed: sys.engine.retire(Scope::Gpu, uuid, now_ms)
//! ```
//!
//! `observe` / `tick` / `retire` return [`AlertEvent`]s: exactly the alert
//! contract (`shared/contracts/alerts.md`), `ts` in epoch ms in memory and
//! RFC 3339 in JSON, `dedup_key = forewarn/<scope>/<value>/<kind>`.
//!
//! ## Stages (one module each)
//!
//! | stage | module | sync? |
//! |---|---|---|
//! | lifecycle: pending -> firing -> resolved, `for`, hysteresis, flap damping, staleness, replacement | `lifecycle`, `engine`, `topology` | pure |
//! | upward correlation (host / rack / cluster / fleet), job attribution | `correlate` | pure |
//! | silences, inhibition | `silence`, `inhibit`, `matcher` | pure |
//! | checkpoints of engine and router state | `snapshot`, `route::checkpoint` | pure |
//! | routing tree, aggregation groups (`group_wait`, `group_interval`, `repeat_interval`) | `route` | pure |
//! | durable outbox (file per entry + ledger) | `outbox` | blocking IO |
//! | delivery workers (backoff, Retry-After, dead letters) | `delivery` | async |
//! | sinks | `sinks::{pagerduty, slack, alertmanager, webhook, file}` | async |
//!
//! Everything up to the outbox is driven by event time handed in by the
//! caller and is deterministic, so a backtest replays what live did. Only
//! delivery uses the wall clock (backoff, rate limits).
//!
//! The config file format (TOML) is documented in `docs/alerts.md`;
//! [`RawConfig`] is its schema.

pub mod alert;
pub mod config;
mod correlate;
pub mod delivery;
pub mod dirlock;
pub mod engine;
mod inhibit;
mod lifecycle;
pub mod matcher;
pub mod outbox;
pub mod pipeline;
pub mod route;
pub mod secret;
pub mod shadow;
pub mod silence;
pub mod sinks;
pub mod snapshot;
pub mod time;
mod topology;

pub use alert::{AlertEvent, Labels, Reason, Scope, Severity, Status, dedup_key};
pub use config::{ConfigError, EngineConfig, RawEngineConfig};
pub use delivery::RetryPolicy;
pub use dirlock::{DirLock, LockError};
pub use engine::{AlertEngine, Observation};
pub use outbox::{Outbox, OutboxError};
pub use pipeline::{AlertRouter, AlertSystem, Base, Config, RawConfig, StartError};
pub use route::{Dispatcher, Notification, Router, RouterSnapshot};
pub use silence::{Silence, SilenceBody, SilenceError, SilenceState};
pub use sinks::{Outcome, Sink, SinkError};
pub use snapshot::{EngineSnapshot, SnapshotError, SnapshotHeader};

#[cfg(test)]
mod route_tests;
#[cfg(test)]
mod tests;
