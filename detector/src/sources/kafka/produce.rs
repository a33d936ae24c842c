//! A producer that watches its brokers, for `forewarn replay`: librdkafka
//! retries a broker that is away forever (backing off up to
//! `reconnect.backoff.max.ms`) and, with rdkafka's default context, logs
//! every attempt at ERROR. Here the attempts are kept quiet (the newest
//! failure is kept for the report), broker contact is judged from the
//! statistics as the consumer does ([`super::health`]), deliveries are
//! counted, and [`Patience`] logs one WARN per backoff step and gives up
//! after a stated time, naming the brokers.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::ProducerContext;
use rdkafka::statistics::Statistics;

use super::context::{is_connection_error, is_refusal, is_refusal_text};
use super::health::{DOWN_AFTER, Reachability};

/// What the producer's callbacks saw.
#[derive(Debug, Default)]
pub struct Watched {
    reach: Mutex<Reachability>,
    delivered: AtomicU64,
    failed: AtomicU64,
    first_failure: Mutex<Option<String>>,
}

impl Watched {
    /// Messages the brokers confirmed.
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// Messages that could not be delivered, and the first reason.
    pub fn failed(&self) -> (u64, Option<String>) {
        let reason = self.first_failure.lock().ok().and_then(|f| f.clone());
        (self.failed.load(Ordering::Relaxed), reason)
    }
}

/// The producer's context: quiet reconnects, statistics, deliveries.
pub struct WatchCtx(pub std::sync::Arc<Watched>);

impl ClientContext for WatchCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        if fac == "FAIL" {
            tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}");
            if let Ok(mut r) = self.0.reach.lock() {
                if is_refusal_text(message) {
                    r.refused = Some(message.to_owned());
                }
                r.last_error = Some(message.to_owned());
            }
            return;
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning => {
                tracing::warn!(target: "librdkafka", "librdkafka: {fac} {message}");
            }
            _ => tracing::debug!(target: "librdkafka", "librdkafka: {fac} {message}"),
        }
    }

    fn stats(&self, stats: Statistics) {
        if let Ok(mut r) = self.0.reach.lock() {
            r.observe(
                stats.ts,
                stats.brokers.values().map(|b| (b.state.as_str(), b.rxidle)),
            );
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if let Ok(mut r) = self.0.reach.lock() {
            let why = if reason.is_empty() {
                error.to_string()
            } else {
                reason.to_owned()
            };
            if is_refusal(&error) {
                r.refused = Some(why.clone());
            }
            // "1/1 brokers are down" says less than the connection
            // failure logged before it ("Connection refused").
            if error.rdkafka_error_code() != Some(RDKafkaErrorCode::AllBrokersDown)
                || r.last_error.is_none()
            {
                r.last_error = Some(why);
            }
        }
        if !is_connection_error(&error) {
            tracing::warn!(%error, reason, "Kafka producer error");
        }
    }
}

impl ProducerContext for WatchCtx {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(_) => {
                self.0.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut f) = self.0.first_failure.lock() {
                    f.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }
}

/// Waiting for brokers that do not answer: one WARN per step (the steps
/// double, so a long outage is a handful of lines), and an error once
/// `give_up` has passed with no broker answering (`None`: never).
#[derive(Debug)]
pub struct Patience {
    brokers: String,
    give_up: Option<Duration>,
    next_warn: Duration,
    warned: bool,
}

/// The longest gap between two "still waiting" lines.
const MAX_WARN_STEP: Duration = Duration::from_secs(60);

impl Patience {
    pub fn new(brokers: &str, give_up: Option<Duration>) -> Self {
        Patience {
            brokers: brokers.to_owned(),
            give_up,
            next_warn: DOWN_AFTER,
            warned: false,
        }
    }

    /// Looks at broker contact now; an error once it is time to give up,
    /// or at once when the brokers refused the TLS handshake or the
    /// credentials before any answered (retrying cannot fix that).
    pub fn check(&mut self, w: &Watched) -> Result<(), String> {
        let Ok(r) = w.reach.lock() else {
            return Ok(());
        };
        let last = r.last_error.as_deref().unwrap_or("none");
        if let Some(why) = r.refused_from_the_start() {
            return Err(format!(
                "the Kafka brokers {} refused the connection: {why} (check security.protocol, ssl.ca.location, the client certificate and the sasl.* options)",
                self.brokers
            ));
        }
        let Some(silent) = r.silent_for() else {
            if self.warned {
                tracing::info!(brokers = %self.brokers, "Kafka brokers answer again");
            }
            self.warned = false;
            self.next_warn = DOWN_AFTER;
            return Ok(());
        };
        if let Some(limit) = self.give_up
            && silent >= limit
        {
            return Err(format!(
                "no Kafka broker of {} answered for {} s; giving up (--give-up-after {} s); last error: {last}",
                self.brokers,
                silent.as_secs(),
                limit.as_secs()
            ));
        }
        if silent >= self.next_warn {
            self.warned = true;
            let step = self.next_warn.mul_f64(2.0);
            self.next_warn = step.min(self.next_warn + MAX_WARN_STEP);
            tracing::warn!(
                brokers = %self.brokers,
                silent_s = silent.as_secs(),
                give_up_after_s = self.give_up.map(|d| d.as_secs()),
                last_error = last,
                "no Kafka broker answering; librdkafka keeps retrying"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000;

    #[test]
    fn patience_warns_once_per_doubling_step_then_gives_up_naming_the_brokers() {
        let w = Watched::default();
        let mut p = Patience::new("127.0.0.1:1", Some(Duration::from_secs(20)));
        let mut steps = Vec::new();
        for t in 0..20 {
            w.reach
                .lock()
                .expect("lock")
                .observe(t * S, [("CONNECT", -1)]);
            let before = p.next_warn;
            assert!(p.check(&w).is_ok(), "{t}");
            if p.next_warn != before {
                steps.push(t);
            }
        }
        assert_eq!(steps, vec![3, 6, 12], "one line per step");
        w.reach
            .lock()
            .expect("lock")
            .observe(20 * S, [("CONNECT", -1)]);
        let e = p.check(&w).expect_err("gives up");
        assert!(e.contains("127.0.0.1:1") && e.contains("giving up"), "{e}");
    }

    #[test]
    fn a_refused_handshake_gives_up_at_once() {
        let w = Watched::default();
        let mut p = Patience::new("127.0.0.1:1", None);
        if let Ok(mut r) = w.reach.lock() {
            r.observe(0, [("CONNECT", -1)]);
            r.refused = Some("SSL handshake failed: certificate verify failed".into());
            r.observe(3 * S, [("CONNECT", -1)]);
        }
        let e = p.check(&w).expect_err("refused");
        assert!(e.contains("certificate verify failed"), "{e}");
    }
}
