//! Whether the Kafka brokers answer, for readiness. Consumer lag alone
//! cannot tell: while the brokers are gone no statistics report new high
//! watermarks, so the last lag (often zero) would keep `/readyz` at 200
//! while nothing is read. librdkafka's statistics list every broker
//! connection with its state and how long since it last received
//! anything; [`Reachability`] folds them (in librdkafka's own clock, so a
//! poll loop that stalls for a while does not look like an outage) and
//! [`Watch`] turns that into the transitions the poll loop logs once each
//! and publishes as readiness and `forewarn_kafka_broker_up`.

use std::time::{Duration, Instant};

/// A connection counts as answering while it is `UP` and has received
/// something this recently. A healthy member hears from its group
/// coordinator at every heartbeat (`heartbeat.interval.ms`, 2 s) and from
/// partition leaders at every fetch (`fetch.wait.max.ms`, 50 ms); a broker
/// that stops answering without closing the connection (a network
/// partition) shows as a growing receive idle time, not as a state change.
pub(super) const RX_FRESH: Duration = Duration::from_secs(10);

/// No broker answering for this long marks the brokers unreachable: long
/// enough to ride out a reconnect, short enough that `/readyz` says so
/// within a few seconds of a stopped broker (statistics come every second).
pub(crate) const DOWN_AFTER: Duration = Duration::from_secs(3);

/// What the statistics say about broker contact, in librdkafka's clock
/// (microseconds).
#[derive(Debug, Default)]
pub(crate) struct Reachability {
    /// The newest statistics' time.
    latest_us: Option<i64>,
    /// The newest statistics' time at which some broker answered.
    contact_us: Option<i64>,
    /// The first statistics' time (a broker never reached counts from it).
    first_us: Option<i64>,
    /// The newest connection error librdkafka reported (it names the
    /// broker and the cause, e.g. `Connection refused`).
    pub(crate) last_error: Option<String>,
    /// The newest TLS or authentication failure (a wrong CA, a refused
    /// password): unlike a broker that is away, one that refuses us will
    /// not come round by itself.
    pub(crate) refused: Option<String>,
}

impl Reachability {
    /// One statistics snapshot: its time and each broker connection's
    /// state and receive idle time (µs; -1 before the connection's first
    /// receive).
    pub(crate) fn observe<'a>(
        &mut self,
        ts_us: i64,
        brokers: impl IntoIterator<Item = (&'a str, i64)>,
    ) {
        self.first_us.get_or_insert(ts_us);
        self.latest_us = Some(ts_us);
        let fresh = i64::try_from(RX_FRESH.as_micros()).unwrap_or(i64::MAX);
        if brokers
            .into_iter()
            .any(|(state, rx_idle_us)| state == "UP" && rx_idle_us < fresh)
        {
            self.contact_us = Some(ts_us);
        }
    }

    /// A TLS or authentication failure while no broker has ever
    /// answered, for [`DOWN_AFTER`]: the configuration is wrong (a broker
    /// that answered once and refuses later is an outage like any other).
    pub(crate) fn refused_from_the_start(&self) -> Option<&str> {
        if self.contact_us.is_some() {
            return None;
        }
        self.silent_for()?;
        self.refused.as_deref()
    }

    /// How long no broker has answered, once that is at least
    /// [`DOWN_AFTER`]; `None` while one does (or before any statistics).
    pub(crate) fn silent_for(&self) -> Option<Duration> {
        let latest = self.latest_us?;
        let since = self.contact_us.or(self.first_us)?;
        let silent =
            Duration::from_micros(u64::try_from(latest.saturating_sub(since)).unwrap_or(0));
        (silent >= DOWN_AFTER).then_some(silent)
    }
}

/// A change in broker contact, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Change {
    /// No broker has answered for this long.
    Down(Duration),
    /// A broker answers again after an outage of this long (wall time).
    Up(Duration),
}

/// The published judgement: brokers up or not, and since when down.
#[derive(Debug)]
pub(super) struct Watch {
    up: bool,
    down_since: Option<Instant>,
}

impl Default for Watch {
    /// Up until the statistics say otherwise: a consumer that never
    /// reaches its brokers is reported [`DOWN_AFTER`] its first statistics.
    fn default() -> Self {
        Watch {
            up: true,
            down_since: None,
        }
    }
}

impl Watch {
    pub(super) fn up(&self) -> bool {
        self.up
    }

    /// Folds the newest reachability in; the change, if any.
    pub(super) fn update(&mut self, silent_for: Option<Duration>) -> Option<Change> {
        match (self.up, silent_for) {
            (true, Some(d)) => {
                self.up = false;
                self.down_since = Some(Instant::now());
                Some(Change::Down(d))
            }
            (false, None) => {
                self.up = true;
                let down = self.down_since.take().map(|t| t.elapsed());
                Some(Change::Up(down.unwrap_or_default()))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    #[test]
    fn an_up_connection_that_receives_is_contact() {
        let mut r = Reachability::default();
        r.observe(0, [("UP", 20_000), ("INIT", -1)]);
        assert_eq!(r.silent_for(), None);
        // Every connection gone: silent, but not yet for long enough.
        r.observe(S, [("DOWN", -1), ("TRY_CONNECT", -1)]);
        r.observe(2 * S, [("CONNECT", -1)]);
        assert_eq!(r.silent_for(), None, "a reconnect is ridden out");
        r.observe(4 * S, [("CONNECT", -1)]);
        assert_eq!(r.silent_for(), Some(Duration::from_secs(4)));
        // Back: a fresh connection is UP (it has answered its handshake).
        r.observe(40 * S, [("UP", -1)]);
        assert_eq!(r.silent_for(), None);
    }

    #[test]
    fn a_connection_that_stays_up_but_answers_nothing_is_silent() {
        let mut r = Reachability::default();
        r.observe(0, [("UP", 1_000)]);
        r.observe(5 * S, [("UP", 5 * S)]);
        assert_eq!(r.silent_for(), None, "heartbeats may be seconds apart");
        r.observe(11 * S, [("UP", 11 * S)]);
        assert_eq!(r.silent_for(), Some(Duration::from_secs(6)));
    }

    #[test]
    fn brokers_never_reached_count_from_the_first_statistics() {
        let mut r = Reachability::default();
        assert_eq!(r.silent_for(), None, "no statistics: no judgement");
        r.observe(7 * S, [("CONNECT", -1)]);
        r.observe(10 * S, [("TRY_CONNECT", -1)]);
        assert_eq!(r.silent_for(), Some(Duration::from_secs(3)));
    }

    #[test]
    fn a_refusal_is_fatal_only_before_any_broker_answered() {
        let mut r = Reachability::default();
        r.observe(0, [("CONNECT", -1)]);
        r.refused = Some("SSL handshake failed".into());
        assert_eq!(r.refused_from_the_start(), None, "not yet for long");
        r.observe(4 * S, [("CONNECT", -1)]);
        assert_eq!(r.refused_from_the_start(), Some("SSL handshake failed"));
        r.observe(5 * S, [("UP", 1_000)]);
        r.observe(20 * S, [("CONNECT", -1)]);
        assert_eq!(r.refused_from_the_start(), None, "answered once: an outage");
    }

    #[test]
    fn the_watch_reports_each_change_once() {
        let mut w = Watch::default();
        assert!(w.up());
        assert_eq!(w.update(None), None);
        let d = Duration::from_secs(3);
        assert_eq!(w.update(Some(d)), Some(Change::Down(d)));
        assert!(!w.up());
        assert_eq!(w.update(Some(2 * d)), None, "still down: no new line");
        assert!(matches!(w.update(None), Some(Change::Up(_))));
        assert!(w.up());
        assert_eq!(w.update(None), None);
    }
}
