//! One writer per partition on an object store, where there are no OS
//! locks: a lease object `partitions/<topic>-<partition>/owner` (JSON:
//! holder, token, renewed_ms, ttl_ms) written only with conditional puts.
//!
//! - Claim: create it if absent (`If-None-Match: *`); if present, take it
//!   over (`If-Match: <its ETag>`) only when it is this writer's own (the
//!   same instance restarted: `holder` names the instance, see
//!   `partitions::instance_id`) or it has not been renewed for its
//!   `ttl_ms` (its holder died without releasing it); otherwise refuse.
//! - Before each checkpoint write: renew it, conditioned on the ETag of
//!   this writer's last put. A writer whose lease was taken over (it
//!   stalled past the TTL) fails there and its write is refused.
//! - Release: delete it if it is still this writer's.
//!
//! What this decides (pure, tested without a store) is [`judge`]; the
//! puts are in `super::object`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The lease object's name in each partition's folder.
pub const LEASE_OBJECT: &str = "owner";

/// How long a lease lasts without renewal unless told
/// ([`crate::checkpoint::PartitionStore::with_lease_ttl`]).
pub const DEFAULT_TTL: Duration = Duration::from_secs(120);

/// Who claims: the instance's stable name and this store's own token.
#[derive(Debug, Clone)]
pub struct Writer {
    /// The instance (stable across its restarts); may be empty (tests,
    /// tools), then the token stands in for it.
    pub name: String,
    /// Unique to this store object: tells this run's lease from one a
    /// previous run of the same instance left.
    pub token: String,
    pub ttl: Duration,
}

impl Writer {
    pub fn new(name: String) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let token = format!(
            "{}-{}-{n}",
            std::process::id(),
            crate::checkpoint::files::wall_ms()
        );
        Writer {
            name,
            token,
            ttl: DEFAULT_TTL,
        }
    }

    /// The name written as the lease's holder.
    pub fn holder(&self) -> &str {
        if self.name.is_empty() {
            &self.token
        } else {
            &self.name
        }
    }

    /// A fresh lease of this writer's, renewed at `now_ms`.
    pub fn lease(&self, now_ms: i64) -> Lease {
        Lease {
            holder: self.holder().to_owned(),
            token: self.token.clone(),
            renewed_ms: now_ms,
            ttl_ms: i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX),
        }
    }
}

/// The lease object's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub holder: String,
    pub token: String,
    /// Wall time of the holder's last put (its clock).
    pub renewed_ms: i64,
    /// How long after `renewed_ms` another writer may take it over.
    pub ttl_ms: i64,
}

impl Lease {
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_json(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

/// A lease this store holds: its content and the version of the object it
/// last put (the condition of its next put).
#[derive(Debug, Clone)]
pub struct Held {
    pub lease: Lease,
    pub e_tag: Option<String>,
    pub version: Option<String>,
}

/// What a claimant may do with the lease it found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It is this store's own (same token): renew it.
    Ours,
    /// Take it over (conditioned on its version), for the reason given.
    TakeOver(&'static str),
    /// Another live writer holds it.
    Refuse(String),
}

/// What `me` may do at `now_ms` with the lease object whose bytes are
/// `found`. An unreadable lease (damaged, or not one of ours) is treated
/// as expired: nothing else would ever free it.
pub fn judge(found: &[u8], me: &Writer, now_ms: i64) -> Verdict {
    let Some(l) = Lease::from_json(found) else {
        return Verdict::TakeOver("the lease object does not parse");
    };
    if l.token == me.token {
        return Verdict::Ours;
    }
    if !me.name.is_empty() && l.holder == me.name {
        return Verdict::TakeOver("left by this instance's previous run");
    }
    let age = now_ms.saturating_sub(l.renewed_ms);
    if age > l.ttl_ms {
        return Verdict::TakeOver("expired: its holder did not renew it in time");
    }
    Verdict::Refuse(format!(
        "held by {} (renewed {:.1} s ago; free after {:.1} s without renewal)",
        l.holder,
        age as f64 / 1000.0,
        l.ttl_ms as f64 / 1000.0
    ))
}
