//! The gauges an operator alerts on when watching forewarn itself: what
//! build runs, the process (CPU, memory, file descriptors), GPUs per
//! health state, active alerts per severity, when input last arrived and
//! the event time it reached, and how old the oldest undelivered
//! notification is. The alerting rules and the dashboard in `deploy/`
//! are written against exactly these names.

use prometheus::{Gauge, Opts};

use super::Page;

pub const BUILD_INFO: &str = "forewarn_build_info";
pub const GPUS_IN_STATE: &str = "forewarn_gpus_in_state";
pub const ALERTS_ACTIVE: &str = "forewarn_alerts_active";
pub const LAST_INGEST: &str = "forewarn_source_last_ingest_timestamp_seconds";
pub const EVENT_TIME: &str = "forewarn_event_time_seconds";
pub const SINK_OLDEST: &str = "forewarn_sink_oldest_pending_age_seconds";

/// Every health state, in the order `/metrics` lists them (each always
/// present, 0 when no GPU is in it, so a rule can compare them).
pub const STATES: [&str; 5] = ["healthy", "watch", "degraded", "failing", "silent"];
/// Every severity, likewise.
pub const SEVERITIES: [&str; 3] = ["info", "warning", "critical"];

/// What the REST layer counts at scrape time for the operator gauges.
#[derive(Debug, Default, Clone)]
pub struct FleetInfo {
    /// GPUs per state, indexed like [`STATES`].
    pub states: [i64; 5],
    /// Active (firing) alerts per severity, indexed like [`SEVERITIES`].
    pub alerts: [i64; 3],
}

impl FleetInfo {
    /// Counts one GPU in `state` (a [`STATES`] name; others are ignored).
    pub fn count_state(&mut self, state: &str) {
        if let Some(i) = STATES.iter().position(|s| *s == state) {
            self.states[i] += 1;
        }
    }

    /// Counts one firing alert of `severity`.
    pub fn count_alert(&mut self, severity: &str) {
        if let Some(i) = SEVERITIES.iter().position(|s| *s == severity) {
            self.alerts[i] += 1;
        }
    }
}

/// The build: version, profile and the commit when the build had one
/// (`FOREWARN_GIT_COMMIT` at compile time).
fn build_labels() -> [(&'static str, &'static str); 3] {
    [
        ("version", env!("CARGO_PKG_VERSION")),
        (
            "commit",
            option_env!("FOREWARN_GIT_COMMIT").unwrap_or("unknown"),
        ),
        (
            "profile",
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            },
        ),
    ]
}

fn float_gauge(p: &Page, name: &str, help: &str, v: f64) {
    if let Ok(g) = Gauge::new(name, help) {
        g.set(v);
        p.add(g);
    }
}

/// Writes the operator gauges. `last_ingest_ms` and `event_ms` are 0
/// until the first batch (then the gauges are left out, so "absent"
/// means "nothing yet" rather than 1970).
pub(super) fn render(p: &Page, fleet: &FleetInfo, last_ingest_ms: i64, event_ms: i64) {
    let labels = build_labels();
    let names: Vec<&str> = labels.iter().map(|(k, _)| *k).collect();
    if let Ok(g) = prometheus::IntGaugeVec::new(
        Opts::new(BUILD_INFO, "Always 1; the labels say which build runs."),
        &names,
    ) {
        let values: Vec<&str> = labels.iter().map(|(_, v)| *v).collect();
        g.with_label_values(&values).set(1);
        p.add(g);
    }
    // CPU seconds, resident and virtual memory, open and maximum file
    // descriptors, start time and threads of this process (Linux).
    p.add(prometheus::process_collector::ProcessCollector::for_self());
    p.gauges(
        GPUS_IN_STATE,
        "GPUs per health state (as /v1/gpus?state= lists them).",
        "state",
        STATES.iter().copied().zip(fleet.states),
    );
    p.gauges(
        ALERTS_ACTIVE,
        "Alerts firing now, per severity (silenced ones included).",
        "severity",
        SEVERITIES.iter().copied().zip(fleet.alerts),
    );
    if last_ingest_ms > 0 {
        float_gauge(
            p,
            LAST_INGEST,
            "Wall time the pipeline last took in a batch of samples (source staleness: time() minus this).",
            last_ingest_ms as f64 / 1000.0,
        );
    }
    if event_ms > 0 {
        float_gauge(
            p,
            EVENT_TIME,
            "The fleet's robust event time the pipeline has reached (processing delay: time() minus this).",
            event_ms as f64 / 1000.0,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_severities_are_counted_and_all_listed() {
        let mut f = FleetInfo::default();
        for s in ["healthy", "healthy", "failing", "no-such-state"] {
            f.count_state(s);
        }
        f.count_alert("critical");
        let p = Page(prometheus::Registry::new());
        render(&p, &f, 0, 1_796_000_000_500);
        let text = p.text();
        for line in [
            "forewarn_gpus_in_state{state=\"healthy\"} 2",
            "forewarn_gpus_in_state{state=\"failing\"} 1",
            "forewarn_gpus_in_state{state=\"silent\"} 0",
            "forewarn_alerts_active{severity=\"critical\"} 1",
            "forewarn_alerts_active{severity=\"info\"} 0",
            "forewarn_event_time_seconds 1796000000.5",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        // Nothing taken in yet: no 1970 timestamp for a rule to misread.
        assert!(!text.contains(LAST_INGEST));
        assert!(text.contains("forewarn_build_info{commit="));
    }
}
