//! Event-time helpers for alert routing: epoch milliseconds <-> RFC 3339 and
//! the duration grammar of every config section. The one implementation
//! lives in [`features::time`] (on `jiff`); alerts uses its strict RFC 3339
//! (an offset is required) and the "milliseconds only when non-zero" form
//! that alert events and silences carry.
//!
//! The engine never reads the wall clock: every timestamp is event time in
//! epoch milliseconds (`i64`), handed in by the caller.

pub use features::time::{
    TimeError, duration_ms, format_duration, format_rfc3339, parse_duration, parse_rfc3339,
};
