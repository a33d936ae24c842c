//! Routing throughput: alert evaluations per second on one core, the rate
//! the detector needs (>= 200,000/s) when it calls `AlertEngine::observe`
//! for every GPU evaluation. Three cases: a healthy fleet (the common path),
//! a fleet with 1 % of GPUs hot (alerts pending / firing / held by host
//! correlation), and the routing tree on alert events (`Router::matches`).
//! Plus the checkpoint cost of such an engine (snapshot + CBOR both ways).
//!
//! Run: `cargo bench -p alerts -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use alerts::route::RawRoute;
use alerts::{
    AlertEngine, AlertEvent, EngineSnapshot, Labels, Observation, RawEngineConfig, Router, Scope,
    Severity, Status,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const GPUS: usize = 10_000;

fn fleet() -> Vec<Labels> {
    (0..GPUS)
        .map(|i| {
            [
                ("gpu", format!("GPU-{i:06}")),
                ("host", format!("node-{:05}", i / 8)),
                ("rack", format!("r{:03}", i / 256)),
                ("cluster", format!("c{}", i / 4096)),
                ("job", format!("job-{}", i / 64)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
        })
        .collect()
}

fn engine() -> AlertEngine {
    let raw: RawEngineConfig =
        toml::from_str("[lifecycle.default]\nfor = \"1m\"\n").expect("bench config parses");
    AlertEngine::new(raw.validate().expect("bench config is valid"))
}

fn run(e: &mut AlertEngine, fleet: &[Labels], ts: i64, hot_every: usize) -> usize {
    let mut events = 0;
    for (i, l) in fleet.iter().enumerate() {
        let hot = hot_every > 0 && i % hot_every < 8;
        let obs = Observation {
            ts_ms: ts,
            kind: "thermal",
            scope: Scope::Gpu,
            labels: l,
            severity: Severity::Critical,
            value: if hot { 0.95 } else { 0.05 },
            summary: "GPU hot",
            reasons: &[],
            eta_hours: None,
            confirmed: false,
        };
        events += e.observe(black_box(&obs)).len();
    }
    events
}

fn bench(c: &mut Criterion) {
    let fleet = fleet();
    let mut g = c.benchmark_group("alert_evaluations");
    g.throughput(Throughput::Elements(GPUS as u64));
    for (name, hot_every) in [("healthy_fleet", 0), ("one_percent_hot", 800)] {
        let mut e = engine();
        let mut ts = 0;
        run(&mut e, &fleet, ts, hot_every);
        g.bench_function(name, |b| {
            b.iter(|| {
                ts += 30_000;
                let n = run(&mut e, &fleet, ts, hot_every);
                e.tick(ts);
                n
            })
        });
    }
    g.finish();

    let raw: RawRoute = toml::from_str(
        r#"
        receiver = "file"
        group_by = ["kind", "rack"]
        [[routes]]
        matchers = ['severity="critical"']
        receiver = "pagerduty"
        continue = true
        [[routes]]
        matchers = ['severity=~"critical|warning"', 'kind!~"app_.*"']
        receiver = "slack"
        "#,
    )
    .expect("bench route parses");
    let router = Router::new(
        &raw.validate(&["file", "pagerduty", "slack"])
            .expect("valid"),
    );
    let events: Vec<AlertEvent> = fleet
        .iter()
        .take(1000)
        .enumerate()
        .map(|(i, l)| AlertEvent {
            ts: 0,
            status: Status::Firing,
            severity: [Severity::Critical, Severity::Warning, Severity::Info][i % 3],
            kind: if i % 2 == 0 { "thermal" } else { "app_xid" }.into(),
            scope: Scope::Gpu,
            labels: l.clone(),
            dedup_key: alerts::dedup_key(Scope::Gpu, &l["gpu"], "thermal"),
            summary: String::new(),
            risk: 0.9,
            eta_hours: None,
            reasons: vec![],
        })
        .collect();
    let mut g = c.benchmark_group("routing_tree");
    g.throughput(Throughput::Elements(events.len() as u64));
    let mut ids = Vec::new();
    g.bench_function("matches", |b| {
        b.iter(|| {
            let mut n = 0;
            for ev in &events {
                router.matches(black_box(ev), &mut ids);
                n += ids.len();
            }
            n
        })
    });
    g.finish();
}

/// Checkpoint cost: snapshot + CBOR encode, and decode + restore, of an
/// engine that has learned a 10,000-GPU topology with 1 % of GPUs hot.
fn checkpoint(c: &mut Criterion) {
    let fleet = fleet();
    let mut e = engine();
    for step in 0..6 {
        run(&mut e, &fleet, step * 30_000, 800);
        e.tick(step * 30_000);
    }
    let encode = |e: &AlertEngine| {
        let mut buf = Vec::new();
        ciborium::into_writer(&e.snapshot(), &mut buf).expect("snapshot encodes");
        buf
    };
    let bytes = encode(&e);
    eprintln!("checkpoint: {} bytes for {GPUS} GPUs", bytes.len());
    let mut g = c.benchmark_group("checkpoint");
    g.throughput(Throughput::Elements(GPUS as u64));
    g.bench_function("snapshot_cbor", |b| b.iter(|| encode(black_box(&e)).len()));
    g.bench_function("restore_cbor", |b| {
        b.iter(|| {
            let snap: EngineSnapshot =
                ciborium::from_reader(black_box(&bytes[..])).expect("snapshot decodes");
            let raw: RawEngineConfig =
                toml::from_str("[lifecycle.default]\nfor = \"1m\"\n").expect("parses");
            AlertEngine::restore(raw.validate().expect("valid"), snap).expect("restores")
        })
    });
    g.finish();
}

criterion_group!(benches, bench, checkpoint);
criterion_main!(benches);
