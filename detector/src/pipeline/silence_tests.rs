//! Silence end to end through the pipeline (`pipeline::shard`): hosts
//! scraped at their own offsets within the interval, as Prometheus spreads
//! them. A GPU that dies while its host reports is paged lost within a
//! few minutes; a whole host that goes quiet pages nothing, and when it
//! comes back without one of its GPUs, that GPU is paged lost at the
//! host's next scrape — the others, back with their host, are not.

use std::collections::BTreeMap;

use alerts::{AlertEvent, Severity, Status};
use datasets::simulator::SimConfig;

use super::test_support::{alerts_of, sim_ticks};

const MIN_MS: i64 = 60_000;

/// First `gpu_lost` page per GPU.
fn lost_pages(events: &[AlertEvent]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for e in events {
        if e.kind == "gpu_lost" && e.status == Status::Firing && e.severity == Severity::Critical {
            let gpu = e.labels.get("gpu").cloned().unwrap_or_default();
            out.entry(gpu).or_insert(e.ts);
        }
    }
    out
}

#[test]
fn a_gpu_missing_when_its_host_comes_back_is_lost_the_rest_are_not() {
    let mut ticks = sim_ticks(SimConfig {
        gpus: 32,
        hours: 3.0,
        seed: 29,
        failure_rate_per_gpu_day: 0.0,
        spread_scrapes: true,
        ..SimConfig::default()
    });
    let start = ticks[0][0].ts_ms;
    let first = ticks[0][0].clone();
    let host = first.topo.host.clone().expect("host");
    let gone = first.gpu.to_string();
    let dead = ticks[0]
        .iter()
        .find(|s| s.topo.host != first.topo.host)
        .map(|s| s.gpu.to_string())
        .expect("another host");
    let (quiet_from, back_at, dies_at) = (
        start + 90 * MIN_MS,
        start + 120 * MIN_MS,
        start + 150 * MIN_MS,
    );
    for t in &mut ticks {
        t.retain(|s| {
            let host_quiet =
                s.topo.host == Some(host.clone()) && (quiet_from..back_at).contains(&s.ts_ms);
            let gone_for_good = *s.gpu == *gone && s.ts_ms >= quiet_from;
            let died = *s.gpu == *dead && s.ts_ms >= dies_at;
            !(host_quiet || gone_for_good || died)
        });
    }
    let pages = lost_pages(&alerts_of(ticks));
    assert_eq!(
        pages.keys().cloned().collect::<Vec<_>>(),
        {
            let mut v = vec![gone.clone(), dead.clone()];
            v.sort();
            v
        },
        "only the two lost GPUs page: {pages:?}"
    );
    // The one missing from its host's return: at the host's second scrape
    // back (30–70 s after it returns).
    let at = pages[&gone] - back_at;
    assert!(
        (0..=90_000).contains(&at),
        "lost {at} ms after its host came back"
    );
    // The one that died while its host reported: within five minutes.
    let at = pages[&dead] - dies_at;
    assert!((0..=5 * MIN_MS).contains(&at), "lost {at} ms after it died");
}
