//! `GET /v1/gpus` from the table's kept orders answers byte for byte what
//! the former copy-filter-sort of the whole table answered, on random
//! tables (ties in risk, updates that move GPUs, filters, pages).

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use features::Topology;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::app;
use super::gpus::{GpuSummary, summary};
use crate::assess::{Assessment, HealthState, KINDS, Kind};
use crate::state::{GpuView, SharedState, State};

/// splitmix64: a tiny seeded generator for the tables.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn assessment(rng: &mut Rng, gpu: &str, ts_ms: i64) -> Assessment {
    // Few distinct risks, so ties (broken by id) are common.
    let risk = match rng.below(6) {
        0 => 0.0,
        1 => 0.25,
        2 => 0.9,
        3 => -0.0,
        _ => rng.below(1_000) as f64 / 1_000.0,
    };
    let pick = |rng: &mut Rng, names: &[&str]| {
        let i = rng.below(names.len() as u64 + 1) as usize;
        names.get(i).map(|n| std::sync::Arc::<str>::from(*n))
    };
    Assessment {
        ts_ms,
        gpu: gpu.into(),
        topo: Topology {
            host: pick(rng, &["h1", "h2", "h3"]),
            rack: pick(rng, &["r01", "r02"]),
            cluster: pick(rng, &["east", "west"]),
            model: pick(rng, &["H100"]),
            job: pick(rng, &["j1", "j2"]),
        },
        risk,
        state: if rng.below(10) == 0 {
            HealthState::Silent
        } else {
            HealthState::from_risk(risk)
        },
        kind: Kind::HbmEccTrend,
        components: [0.0; KINDS],
        anomaly_grade: 0.0,
        eta_hours: None,
        reasons: Vec::new(),
        confirmed: 0,
    }
}

fn random_table(seed: u64) -> State {
    let mut rng = Rng(seed);
    let s = SharedState::new();
    let gpus = 1 + rng.below(400);
    for round in 0..(1 + rng.below(6)) {
        let batch: Vec<Assessment> = (0..rng.below(600))
            .map(|_| {
                let g = format!("GPU-{:x}", rng.below(gpus));
                assessment(&mut rng, &g, round as i64 * 60_000)
            })
            .collect();
        s.publish(&batch);
    }
    s
}

/// The handler as it was: copy every view, filter, sort, page.
fn by_sorting(
    s: &State,
    filter: &[(&str, &str)],
    sort_gpu: bool,
    offset: usize,
    limit: usize,
) -> Value {
    let want = |k: &str| filter.iter().find(|(f, _)| *f == k).map(|(_, v)| *v);
    let eq = |k: &str, have: &Option<std::sync::Arc<str>>| {
        want(k).is_none_or(|w| have.as_deref() == Some(w))
    };
    let views = s.gpus.views().expect("lock");
    let mut hits: Vec<&GpuView> = views
        .iter()
        .map(|v| &**v)
        .filter(|v| {
            let a = &v.latest;
            want("state").is_none_or(|w| a.state.as_str() == w)
                && eq("cluster", &a.topo.cluster)
                && eq("rack", &a.topo.rack)
                && eq("host", &a.topo.host)
                && eq("job", &a.topo.job)
                && eq("model", &a.topo.model)
        })
        .collect();
    if sort_gpu {
        hits.sort_by(|a, b| a.latest.gpu.cmp(&b.latest.gpu));
    } else {
        hits.sort_by(|a, b| {
            b.latest
                .risk
                .total_cmp(&a.latest.risk)
                .then_with(|| a.latest.gpu.cmp(&b.latest.gpu))
        });
    }
    let total = hits.len();
    let items: Vec<GpuSummary> = hits
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(summary)
        .collect();
    json!({ "total": total, "offset": offset, "limit": limit, "items": items })
}

#[tokio::test]
async fn pages_from_the_kept_orders_equal_the_full_sort() {
    let filters: [&[(&str, &str)]; 6] = [
        &[],
        &[("rack", "r01")],
        &[("state", "healthy")],
        &[("cluster", "east"), ("host", "h2")],
        &[("job", "j1"), ("model", "H100")],
        &[("state", "failing"), ("rack", "r02")],
    ];
    let mut rng = Rng(7);
    for seed in 0..40 {
        let s = random_table(seed);
        let router = app(s.clone());
        for _ in 0..12 {
            let filter = filters[rng.below(filters.len() as u64) as usize];
            let sort_gpu = rng.below(3) == 0;
            let offset = [0, 0, 1, 7, 50, 1_000][rng.below(6) as usize];
            let limit = [1, 5, 50, 100, 10_000][rng.below(5) as usize];
            let mut uri = format!(
                "/v1/gpus?sort={}&offset={offset}&limit={limit}",
                if sort_gpu { "gpu" } else { "risk" }
            );
            for (k, v) in filter {
                uri.push_str(&format!("&{k}={v}"));
            }
            let resp = router
                .clone()
                .oneshot(Request::get(&uri).body(Body::empty()).expect("request"))
                .await
                .expect("response");
            assert_eq!(resp.status(), StatusCode::OK, "{uri}");
            let got = to_bytes(resp.into_body(), 64 << 20).await.expect("body");
            let want =
                serde_json::to_vec(&by_sorting(&s, filter, sort_gpu, offset, limit)).expect("json");
            assert!(got == want, "seed {seed}: {uri} differs from the full sort");
        }
    }
}

#[test]
fn removed_gpus_leave_every_order() {
    let s = random_table(3);
    let all = s.gpus.views().expect("lock");
    let gone: Vec<features::GpuId> = all
        .iter()
        .step_by(2)
        .map(|v| v.latest.gpu.clone())
        .collect();
    s.gpus.remove(&gone).expect("remove");
    let left = all.len() - gone.len();
    assert_eq!(s.gpus.len().expect("lock"), left);
    for order in [
        crate::risk_table::Order::Risk,
        crate::risk_table::Order::Gpu,
    ] {
        let (total, page) = s.gpus.page(order, None, 0, usize::MAX).expect("lock");
        assert_eq!((total, page.len()), (left, left));
        assert!(page.iter().all(|v| !gone.contains(&v.latest.gpu)));
    }
}
