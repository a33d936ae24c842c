//! Rack cooling: the shards' rack air readings (`features::expected::rack`)
//! → one rack-scope observation per reading, in the alert stage, which is
//! the one place that sees every shard's piece of a rack and every rack of
//! a cluster.
//!
//! A rack's air shift is the sample-weighted mean of its pieces' medians (a
//! piece per shard), over the hosts of every piece, each counted once (a
//! piece carries its hosts' keys: with GPUs placed by host, a shard may
//! hold one host of a rack and no piece alone spans [`MIN_HOSTS`]); its
//! **excess** is that minus the median shift of the cluster's other racks at the same time, so a fleet-wide ambient change
//! or the daily swing, which warm every rack, cancel (and at most the shift
//! itself: a peer rack reading cold does not make this one hot). An excess held above
//! +6 °C on at least [`MIN_HOSTS`] hosts is a cooling incident:
//! kind [`KIND`], rack scope, a page. A rack alone in its cluster has
//! nothing to be compared with and is never judged.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use alerts::{AlertEngine, AlertEvent, Labels, Observation, Reason, Scope, Severity};
use features::expected::rack::RackReading;
use serde::{Deserialize, Serialize};

use models::stats::median;

/// The alert kind.
pub const KIND: &str = "rack_cooling";
/// Excess (°C) at which the observed value is 0; it reaches the default
/// `fire_at` of 0.5 at +6 °C and 1 at 9 °C.
const EXCESS_ZERO_C: f64 = 3.0;
const EXCESS_SPAN_C: f64 = 6.0;
/// Excess at value 0.5, the default `fire_at`.
#[cfg(test)]
const EXCESS_FIRES_C: f64 = EXCESS_ZERO_C + 0.5 * EXCESS_SPAN_C;
/// Hosts a rack's readings must span: a rack-wide condition, not one host.
pub const MIN_HOSTS: u32 = 2;
/// Samples a rack's bucket must hold over all its pieces.
const MIN_SAMPLES: u32 = 8;
/// How old (ms) a peer rack's reading may be to count.
const FRESH_MS: i64 = 3 * 60_000;

/// A rack's reading over every shard's piece of one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Latest {
    end_ms: i64,
    shift_c: f64,
    samples: u32,
    hosts: u32,
}

/// Rack readings of one bucket: `(end, cluster, rack)`.
type BucketKey = (i64, Arc<str>, Arc<str>);

/// Every rack's latest combined reading, by cluster ("" = no cluster
/// label), and the pieces of the current round not yet combined.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RackWatch {
    clusters: HashMap<Arc<str>, BTreeMap<Arc<str>, Latest>>,
    /// Filled by [`RackWatch::push`] during a round, emptied by
    /// [`RackWatch::flush`] at its end (so never in a checkpoint).
    #[serde(skip)]
    pending: BTreeMap<BucketKey, Vec<RackReading>>,
    #[serde(skip)]
    scratch: Vec<f64>,
}

impl RackWatch {
    /// Holds a shard's reading until the round's other shards have given
    /// theirs: a rack split across shards is judged on all its pieces.
    pub fn push(&mut self, r: &RackReading) {
        let cluster: Arc<str> = r.cluster.clone().unwrap_or_else(|| Arc::from(""));
        self.pending
            .entry((r.end_ms, cluster, r.rack.clone()))
            .or_default()
            .push(r.clone());
    }

    /// Combines the round's pieces bucket by bucket, in event-time order,
    /// and observes each rack in `engine`.
    pub fn flush(&mut self, engine: &mut AlertEngine, out: &mut Vec<AlertEvent>) {
        let pending = std::mem::take(&mut self.pending);
        for ((end_ms, cluster, rack), pieces) in pending {
            let (mut sum, mut samples, mut largest) = (0.0, 0u32, 0u32);
            let mut keys: Vec<u64> = Vec::new();
            for p in &pieces {
                sum += f64::from(p.shift_c) * f64::from(p.samples);
                samples += p.samples;
                largest = largest.max(p.hosts);
                keys.extend_from_slice(&p.host_keys);
            }
            // Hosts over every piece, each once (a host's GPUs may be in
            // several pieces); a piece without keys (an older writer)
            // counts as its own host count, so at least the largest.
            keys.sort_unstable();
            keys.dedup();
            let hosts = largest.max(keys.len() as u32);
            if samples == 0 {
                continue;
            }
            let shift = sum / f64::from(samples);
            let racks = self.clusters.entry(cluster).or_default();
            racks.insert(
                rack.clone(),
                Latest {
                    end_ms,
                    shift_c: shift,
                    samples,
                    hosts,
                },
            );
            self.scratch.clear();
            for (name, other) in racks.iter() {
                if *name != rack
                    && other.end_ms >= end_ms - FRESH_MS
                    && other.samples >= MIN_SAMPLES / 2
                {
                    self.scratch.push(other.shift_c);
                }
            }
            let Some(reference) = median(&mut self.scratch) else {
                continue;
            };
            if hosts < MIN_HOSTS || samples < MIN_SAMPLES {
                // Too few GPUs settled this minute (a job starting): no
                // verdict either way, so an incident's alert is not
                // cleared by a thin bucket.
                continue;
            }
            // Warmer than the other racks *and* than its own usual: a peer
            // rack reading cold (its GPUs' baselines took in part of its own
            // incident, and now it has recovered) does not make this one hot.
            let excess = (shift - reference).min(shift);
            let value = ((excess - EXCESS_ZERO_C) / EXCESS_SPAN_C).clamp(0.0, 1.0);
            let cluster = pieces.first().and_then(|p| p.cluster.as_deref());
            observe(
                engine,
                &Judged {
                    end_ms,
                    rack: &rack,
                    cluster,
                    excess,
                    shift,
                    reference,
                    peers: self.scratch.len(),
                    samples,
                    hosts,
                    value,
                },
                out,
            );
        }
    }
}

/// One rack's verdict for one bucket.
struct Judged<'a> {
    end_ms: i64,
    rack: &'a str,
    cluster: Option<&'a str>,
    excess: f64,
    shift: f64,
    reference: f64,
    peers: usize,
    samples: u32,
    hosts: u32,
    value: f64,
}

fn observe(engine: &mut AlertEngine, j: &Judged<'_>, out: &mut Vec<AlertEvent>) {
    let mut labels = Labels::new();
    labels.insert("rack".into(), j.rack.to_owned());
    if let Some(c) = j.cluster {
        labels.insert("cluster".into(), c.to_owned());
    }
    let summary = format!(
        "rack {}: GPUs run {:+.1} °C warmer at their load than the median of {} other rack(s){} ({} GPU samples on {} hosts): cooling failing?",
        j.rack,
        j.excess,
        j.peers,
        j.cluster.map(|c| format!(" in {c}")).unwrap_or_default(),
        j.samples,
        j.hosts,
    );
    let reasons = [Reason {
        signal: "DCGM_FI_DEV_GPU_TEMP".to_owned(),
        detail: format!(
            "median air shift {:+.1} °C vs {:+.1} °C in the other racks",
            j.shift, j.reference
        ),
    }];
    out.extend(engine.observe(&Observation {
        ts_ms: j.end_ms,
        kind: KIND,
        scope: Scope::Rack,
        labels: &labels,
        severity: Severity::Critical,
        value: j.value,
        summary: &summary,
        reasons: &reasons,
        eta_hours: None,
        confirmed: false,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use alerts::Status;

    fn reading(rack: &str, end_min: i64, shift_c: f32, hosts: u32) -> RackReading {
        RackReading {
            rack: rack.into(),
            cluster: Some("east-1".into()),
            end_ms: end_min * 60_000,
            shift_c,
            samples: 32,
            hosts,
            host_keys: Vec::new(),
        }
    }

    /// Runs `minutes` of readings of racks r0..r3 (two shards each) where
    /// `air(rack, minute)` is a rack's shift; returns the alert events.
    fn run(minutes: i64, hosts: u32, air: impl Fn(usize, i64) -> f32) -> Vec<AlertEvent> {
        run_pieces(minutes, |_| (hosts, Vec::new()), air)
    }

    /// As [`run`], shard `s`'s pieces with `keys(s)`: (hosts, host keys).
    fn run_pieces(
        minutes: i64,
        keys: impl Fn(usize) -> (u32, Vec<u64>),
        air: impl Fn(usize, i64) -> f32,
    ) -> Vec<AlertEvent> {
        let (cfg, _) = super::super::restart_tests::test_config(2);
        let mut engine = AlertEngine::new(cfg.alerts.engine.clone());
        let mut w = RackWatch::default();
        let mut out = Vec::new();
        for m in 0..minutes {
            for shard in 0..2 {
                for r in 0..4 {
                    let piece = air(r, m) + if shard == 0 { 0.3 } else { -0.3 };
                    let (hosts, host_keys) = keys(shard);
                    w.push(&RackReading {
                        host_keys,
                        ..reading(&format!("r{r}"), m, piece, hosts)
                    });
                }
            }
            w.flush(&mut engine, &mut out);
            out.extend(engine.tick(m * 60_000));
        }
        out
    }

    #[test]
    fn a_hot_rack_pages_once_at_rack_scope_and_resolves() {
        // r1's air +10 °C from minute 60 to 150; every rack +5 °C (ambient)
        // from minute 200.
        let events = run(400, 4, |r, m| {
            let incident = if r == 1 && (60..150).contains(&m) {
                10.0
            } else {
                0.0
            };
            let ambient = if m >= 200 { 5.0 } else { 0.0 };
            0.2 * r as f32 + incident + ambient
        });
        let firing: Vec<&AlertEvent> = events
            .iter()
            .filter(|e| e.status == Status::Firing)
            .collect();
        assert_eq!(firing.len(), 1, "{events:#?}");
        let page = firing[0];
        assert_eq!(page.kind, KIND);
        assert_eq!(page.scope, Scope::Rack);
        assert_eq!(page.severity, Severity::Critical);
        assert_eq!(page.labels.get("rack").map(String::as_str), Some("r1"));
        // `for` is 5 minutes.
        assert!(
            (64 * 60_000..=67 * 60_000).contains(&page.ts),
            "{}",
            page.ts
        );
        assert!(page.summary.contains("+9."), "{}", page.summary);
        let resolved = events
            .iter()
            .find(|e| e.status == Status::Resolved)
            .expect("resolved");
        assert!(
            resolved.ts > 150 * 60_000 && resolved.ts < 190 * 60_000,
            "{}",
            resolved.ts
        );
    }

    #[test]
    fn one_host_or_a_mild_excess_pages_nobody() {
        let one_host = run(200, 1, |r, m| if r == 1 && m >= 60 { 10.0 } else { 0.0 });
        assert!(one_host.is_empty(), "{one_host:#?}");
        let mild = run(200, 4, |r, m| {
            if r == 1 && m >= 60 {
                EXCESS_FIRES_C as f32 - 1.0
            } else {
                0.0
            }
        });
        assert!(mild.is_empty(), "{mild:#?}");
    }

    /// GPUs placed by host put one whole host in each shard: a rack's
    /// pieces then hold different hosts, which add up; a host whose GPUs
    /// are in both pieces counts once.
    #[test]
    fn hosts_in_separate_pieces_add_up_and_a_shared_host_counts_once() {
        let hot = |r: usize, m: i64| if r == 1 && m >= 60 { 10.0 } else { 0.0 };
        let split = run_pieces(200, |s| (1, vec![10 + s as u64]), hot);
        assert!(
            split
                .iter()
                .any(|e| e.status == Status::Firing && e.kind == KIND),
            "{split:#?}"
        );
        let shared = run_pieces(200, |_| (1, vec![7]), hot);
        assert!(shared.is_empty(), "{shared:#?}");
    }

    #[test]
    fn peers_reading_cold_do_not_make_a_rack_hot() {
        // After their own incident, r1..r3's GPUs read 8 °C below their
        // baselines for a while; r0 is as usual.
        let events = run(200, 4, |r, m| if r > 0 && m >= 60 { -8.0 } else { 0.0 });
        assert!(events.is_empty(), "{events:#?}");
    }

    #[test]
    fn a_rack_alone_in_its_cluster_is_never_judged() {
        let (cfg, _) = super::super::restart_tests::test_config(1);
        let mut engine = AlertEngine::new(cfg.alerts.engine.clone());
        let mut w = RackWatch::default();
        let mut out = Vec::new();
        for m in 0..100 {
            w.push(&reading("solo", m, 20.0, 4));
            w.flush(&mut engine, &mut out);
        }
        assert!(out.is_empty());
        assert!(w.pending.is_empty());
    }
}
