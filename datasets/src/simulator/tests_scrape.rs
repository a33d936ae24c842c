//! Spread scrapes (`SimConfig::spread_scrapes`): each host at its own
//! offset within the interval, a host's GPUs sharing each timestamp, every
//! GPU's timestamps increasing; off, every sample at its tick.

use std::collections::BTreeMap;

use super::tests::run;
use super::*;

#[test]
fn hosts_report_at_their_own_offsets_and_share_each_timestamp() {
    let cfg = SimConfig {
        gpus: 64,
        hours: 1.0,
        ..SimConfig::default()
    };
    let (_, plain) = run(cfg.clone());
    let interval = cfg.interval_ms();
    let on_tick = |ts: i64| (ts - cfg.start_ms) % interval == 0;
    assert!(
        plain.iter().all(|s| on_tick(s.ts_ms)),
        "off: every sample on its tick"
    );

    let (_, spread) = run(SimConfig {
        spread_scrapes: true,
        ..cfg.clone()
    });
    assert_eq!(
        spread.len(),
        plain.len(),
        "the same samples, other timestamps"
    );
    // Per host and tick: one timestamp, within the tick's interval.
    let mut per_host: BTreeMap<(String, i64), Vec<i64>> = BTreeMap::new();
    for (s, p) in spread.iter().zip(&plain) {
        assert_eq!((&s.gpu, &s.metrics), (&p.gpu, &p.metrics));
        assert!((p.ts_ms..p.ts_ms + interval).contains(&s.ts_ms));
        let host = s.topo.host.as_deref().unwrap_or_default().to_owned();
        per_host.entry((host, p.ts_ms)).or_default().push(s.ts_ms);
    }
    assert!(per_host.values().all(|v| v.iter().all(|t| *t == v[0])));
    // Hosts' offsets differ (64 GPUs: eight hosts).
    let first_tick: Vec<i64> = per_host
        .iter()
        .filter(|((_, tick), _)| *tick == cfg.start_ms)
        .map(|(_, v)| v[0] - cfg.start_ms)
        .collect();
    let distinct: std::collections::BTreeSet<i64> = first_tick.iter().copied().collect();
    assert!(distinct.len() >= 6, "offsets {first_tick:?}");
    // Every GPU's timestamps increase.
    let mut last: BTreeMap<&str, i64> = BTreeMap::new();
    for s in &spread {
        if let Some(prev) = last.insert(&s.gpu, s.ts_ms) {
            assert!(s.ts_ms > prev, "{}: {prev} then {}", s.gpu, s.ts_ms);
        }
    }
}
