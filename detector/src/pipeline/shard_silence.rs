//! Silence (part of [`super`]): a GPU whose samples stopped. Lost, and
//! paged, when its host goes on reporting without it; watched, not paged,
//! when its whole host went quiet (maintenance, a host outage) — and lost
//! after all if the host comes back without it (a GPU that fell off the
//! bus in a reboot, or a host whose next scrape was not yet in when the
//! silence was judged: hosts scraped at their own offsets within the
//! interval).

use super::{BatchOutput, GpuId, QuietGpu, Shard};
use crate::assess::{Assessment, Evidence, HealthState, KINDS, Kind};
use features::FeatureEvent;

/// How much later than a quiet GPU its host must have reported for the GPU
/// to count as lost (three 30-s intervals).
const HOST_ALIVE_MARGIN_MS: i64 = 90_000;

/// How much later than the host's first sample after a quiet GPU's last
/// the host must report again (its next scrape), and then again (the
/// scrape after), before the GPU, still silent, is lost: more than a
/// scrape's own spread (its GPUs share its time, give or take its
/// samples' arrival), less than the shortest cadence (10 s), so that the
/// decision comes at the third scrape back at every cadence. At 10 s it
/// had skipped every other scrape and paged at the fifth.
const HOST_NEXT_SCRAPE_MS: i64 = 5_000;

impl Shard {
    /// A GPU's silence, judged when the fleet's clock passed it (or again
    /// when its quiet host came back, [`Self::host_back`]).
    pub(super) fn on_silent(
        &mut self,
        gpu: GpuId,
        last_ts_ms: i64,
        watermark_ms: i64,
        out: &mut BatchOutput,
    ) {
        // A GPU that never established itself (a flood of one-sample
        // ids, a first sample from a broken clock) is forgotten by
        // the admission gate, never paged as lost.
        let accepted = self
            .features
            .gpu_state(&gpu)
            .map_or(0, |st| st.arrival.accepted);
        if accepted < features::admission::ESTABLISHED_AFTER {
            return;
        }
        let topo = self.topo.get(&gpu).cloned().unwrap_or_default();
        let host_last = topo
            .host
            .as_ref()
            .and_then(|h| self.host_seen.get(h))
            .copied()
            .unwrap_or(i64::MIN);
        // The host's other GPUs went on reporting: this GPU is lost.
        // The whole host quiet: maintenance or a host outage, not a
        // GPU failure (watched, not paged).
        let host_alive = host_last > last_ts_ms + HOST_ALIVE_MARGIN_MS;
        let mut components = [0.0f32; KINDS];
        let detail;
        if self.hard.contains_key(&gpu) {
            // Silence after a hard failure is the same incident.
            components[Kind::HardFailure as usize] = 1.0;
            detail = "stopped reporting after a hard failure".to_string();
        } else if host_alive {
            components[Kind::GpuLost as usize] = 1.0;
            detail = format!(
                "no telemetry for {} min while its host reports",
                (watermark_ms - last_ts_ms) / 60_000
            );
        } else {
            if let Some(h) = &topo.host {
                let quiet = self.quiet_with_host.entry(h.clone()).or_default();
                quiet.retain(|q| q.gpu != gpu);
                quiet.push(QuietGpu {
                    gpu: gpu.clone(),
                    last_ts_ms,
                    host_back_ms: None,
                    host_next_ms: None,
                });
            }
            components[Kind::GpuLost as usize] = 0.3;
            detail = format!(
                "no telemetry for {} min; its whole host is quiet",
                (watermark_ms - last_ts_ms) / 60_000
            );
        }
        let (risk, kind) = if components[Kind::HardFailure as usize] > 0.0 {
            (1.0, Kind::HardFailure)
        } else {
            (f64::from(components[Kind::GpuLost as usize]), Kind::GpuLost)
        };
        let mut reasons = vec![Evidence {
            signal: "last_seen".into(),
            detail,
        }];
        if let Some(st) = self.hard.get(&gpu) {
            reasons.insert(0, st.evidence.clone());
        }
        // A hard-failed GPU that went quiet is still failing: a
        // `?state=failing` list must not miss it.
        let state = if kind == Kind::HardFailure {
            HealthState::Failing
        } else {
            HealthState::Silent
        };
        out.assessments.push(Assessment {
            ts_ms: watermark_ms,
            gpu,
            topo,
            risk,
            state,
            kind,
            components,
            anomaly_grade: 0.0,
            eta_hours: None,
            reasons,
            confirmed: 0,
        });
    }

    /// Host `host` reported at `ts_ms`: its GPUs that went quiet with it
    /// and missed its first two scrapes since (still silent when the one
    /// after begins) are judged again, now as lost while their host
    /// reports.
    pub(super) fn host_back(
        &mut self,
        host: &std::sync::Arc<str>,
        ts_ms: i64,
        out: &mut BatchOutput,
    ) {
        let Some(quiet) = self.quiet_with_host.get_mut(host) else {
            return;
        };
        let features = &self.features;
        // Every input partition must have passed the host's return by a
        // scrape: a GPU keyed to a lagging partition may be in it yet.
        let clock = features.quiet_clock_ms();
        let mut lost = Vec::new();
        quiet.retain_mut(|q| {
            let silent = features.gpu_state(&q.gpu).is_some_and(|st| {
                st.arrival.silent_reported && st.arrival.last_ts_ms() == q.last_ts_ms
            });
            if !silent {
                return false;
            }
            // Each step waits until every partition's clock has passed it
            // too (see above).
            let after = |t: i64| ts_ms > t + HOST_NEXT_SCRAPE_MS && clock > t + HOST_NEXT_SCRAPE_MS;
            match (q.host_back_ms, q.host_next_ms) {
                // The scrape after the host's next: the GPU was in neither.
                (Some(_), Some(next)) if after(next) => {
                    lost.push((q.gpu.clone(), q.last_ts_ms));
                    false
                }
                // The host's next scrape has begun; the GPU's sample of it
                // may come after its neighbours' (one scrape's samples
                // arrive GPU by GPU), and its sample of the host's first
                // scrape back may arrive after that (held back a tick):
                // judged at the scrape after.
                (Some(back), None) if after(back) => {
                    q.host_next_ms = Some(ts_ms);
                    true
                }
                (None, _) if ts_ms > q.last_ts_ms + HOST_ALIVE_MARGIN_MS => {
                    q.host_back_ms = Some(ts_ms);
                    true
                }
                _ => true,
            }
        });
        if quiet.is_empty() {
            self.quiet_with_host.remove(host);
        }
        for (gpu, last_ts_ms) in lost {
            let ev = FeatureEvent::Silent {
                gpu,
                last_ts_ms,
                watermark_ms: ts_ms,
            };
            self.on_event(ev, &mut None, out);
        }
    }
}
