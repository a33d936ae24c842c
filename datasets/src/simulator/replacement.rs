//! The `Replacement` scenario's plan: GPUs replaced mid-run by new UUIDs in
//! the same host slot, and newcomers that then degrade next to a twin that
//! was there from the start.
//!
//! Per pair (on one host, so both GPUs run the same job): slot A's GPU dies
//! suddenly; 30 min later a new GPU (new UUID, `replaces` = the old one)
//! reports from slot A; an hour after it joined, it starts an HBM
//! degradation. Slot B's GPU, present since the start, degrades with the
//! same onset, the same failure time, the same precursor length and the
//! same error counts (one seeded precursor stream for both). An
//! evaluator compares how long after onset each was first alerted: a
//! newcomer scored from its first samples by its cohort and peers is
//! alerted no later than its incumbent twin.

use super::failures::{FailureKind, FailureLabel, FailurePlan, FailurePlans, Replacement};
use super::rng::SimRng;
use super::scheduler::{Grid, SimEvent, SimEventKind};
use super::topology::{Fleet, GpuInfo, random_uuid};

const MIN_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

/// Plans the replacement pairs: one per 2 hosts, at least 2 (when the fleet
/// has 2 full hosts), staggered by 20 minutes.
pub(crate) fn plan_pairs(grid: Grid, fleet: &Fleet, rng: &mut SimRng, out: &mut FailurePlans) {
    // Full hosts of two GPUs or more (a pair shares one).
    let per_host = fleet.per_host;
    let mut hosts: Vec<usize> = (0..fleet.hosts.len())
        .filter(|h| per_host >= 2 && fleet.hosts[*h].slots.len() == per_host)
        .collect();
    rng.shuffle(&mut hosts);
    let pairs = (fleet.hosts.len() / 2).max(2).min(hosts.len());
    let run_ms = grid.end_ms - grid.start_ms;
    let last_tick = grid.end_ms - grid.interval_ms;
    for (i, &host) in hosts.iter().take(pairs).enumerate() {
        let a = rng.below(per_host as u64) as usize;
        let b = (a + 1 + rng.below(per_host as u64 - 1) as usize) % per_host;
        let base = fleet.hosts[host].slots.start;
        let (slot_a, slot_b) = (base + a, base + b);
        if out.per_slot[slot_a].is_some() || out.per_slot[slot_b].is_some() {
            continue;
        }
        let death = grid.snap(grid.start_ms + run_ms / 10 + i as i64 * 20 * MIN_MS);
        let joins = grid.snap(death + 30 * MIN_MS);
        let onset = grid.snap(joins + HOUR_MS);
        let want = (FailureKind::HbmEcc.precursor_hours(rng) * HOUR_MS as f64) as i64;
        let failure = grid.snap((onset + want).min(last_tick - HOUR_MS / 2));
        if failure - onset < 2 * HOUR_MS {
            continue;
        }
        let old = &fleet.gpus[slot_a];
        let twin = &fleet.gpus[slot_b];
        // The old GPU: sudden death, no precursor.
        out.per_slot[slot_a] = Some(plan(FailureKind::SuddenDeath, death, death, death, rng));
        out.labels
            .push(label(FailureKind::SuddenDeath, old, death, death));
        // The newcomer.
        let gpu = GpuInfo {
            uuid: random_uuid(rng),
            replaces: Some(old.uuid.clone()),
            active_from_ms: Some(joins),
            ..old.clone()
        };
        let silent = failure + 2 * grid.interval_ms;
        out.labels
            .push(label(FailureKind::HbmEcc, &gpu, onset, failure));
        out.events.push(SimEvent {
            ts_ms: joins,
            kind: SimEventKind::GpuReplaced {
                host: old.host.clone(),
                old: old.uuid.clone(),
                new: gpu.uuid.clone(),
            },
        });
        let mut newcomer = plan(FailureKind::HbmEcc, onset, failure, silent, rng);
        // One error stream for both (common random numbers): the twin's
        // comparison then measures the pipeline, not two Poisson draws.
        newcomer.precursor_seed = Some(rng.next_u64());
        out.replacements.push(Replacement {
            slot: slot_a,
            at_ms: joins,
            gpu,
            failure: Some(newcomer.clone()),
        });
        // The incumbent twin: the same degradation on the same clock.
        out.labels
            .push(label(FailureKind::HbmEcc, twin, onset, failure));
        out.per_slot[slot_b] = Some(newcomer);
    }
}

fn plan(kind: FailureKind, onset: i64, failure: i64, silent: i64, rng: &mut SimRng) -> FailurePlan {
    FailurePlan {
        kind,
        onset_ms: onset,
        failure_ms: failure,
        end_ms: i64::MAX,
        silent_from_ms: silent,
        follow_xid: if rng.chance(0.6) { 94 } else { 95 },
        clock_factor: 1.0,
        power_factor: 1.0,
        precursor_seed: None,
        precursor: None,
    }
}

fn label(kind: FailureKind, gpu: &GpuInfo, onset: i64, failure: i64) -> FailureLabel {
    FailureLabel {
        kind,
        gpu: Some(gpu.uuid.clone()),
        host: Some(gpu.host.clone()),
        rack: gpu.rack.clone(),
        cluster: gpu.cluster.clone(),
        onset_ms: onset,
        failure_ms: Some(failure),
        end_ms: None,
        xid: kind.xid(),
    }
}
