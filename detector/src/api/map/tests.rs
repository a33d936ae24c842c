//! The map's endpoints through `app(state).oneshot(..)`, and the cache's
//! versioning directly.

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode, header};
use features::Topology;
use tower::ServiceExt;

use super::cache::MapCache;
use super::frame;
use crate::api::app;
use crate::assess::{Assessment, HealthState, KINDS, Kind};
use crate::state::{SharedState, State};

fn assessment(
    gpu: &str,
    risk: f64,
    cluster: &str,
    rack: &str,
    host: &str,
    job: &str,
) -> Assessment {
    Assessment {
        ts_ms: 1_000,
        gpu: gpu.into(),
        topo: Topology {
            host: Some(host.into()),
            rack: Some(rack.into()),
            cluster: Some(cluster.into()),
            model: Some("NVIDIA H100 80GB HBM3".into()),
            job: (!job.is_empty()).then(|| job.into()),
        },
        risk,
        state: HealthState::from_risk(risk),
        kind: Kind::HardFailure,
        components: [0.0; KINDS],
        anomaly_grade: 0.0,
        eta_hours: None,
        reasons: vec![],
        confirmed: 0,
    }
}

fn fleet() -> State {
    let s = SharedState::new();
    s.publish(&[
        assessment("GPU-d", 0.95, "west-1", "r01", "node-0009", "train-2"),
        assessment("GPU-b", 0.1, "east-1", "r02", "node-0003", "train-1"),
        assessment("GPU-a", 0.4, "east-1", "r01", "node-0001", ""),
        assessment("GPU-c", 0.7, "east-1", "r01", "node-0001", "train-1"),
    ]);
    s
}

/// One request to `router` (clone one router for requests that must share
/// the map's cache, as a server's do).
async fn get(router: &axum::Router, uri: &str) -> (StatusCode, String, String) {
    let (status, ctype, bytes) = get_bytes(router, uri).await;
    (status, ctype, String::from_utf8_lossy(&bytes).into_owned())
}

async fn get_bytes(router: &axum::Router, uri: &str) -> (StatusCode, String, Vec<u8>) {
    let resp = router
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
        .await
        .expect("response");
    let status = resp.status();
    let ctype = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = to_bytes(resp.into_body(), 1 << 22).await.expect("body");
    (status, ctype, bytes.to_vec())
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_from_the_binary() {
    let s = app(fleet());
    let (st, ctype, html) = get(&s, "/").await;
    assert_eq!(st, StatusCode::OK);
    assert!(ctype.starts_with("text/html"), "{ctype}");
    assert!(
        html.contains("<canvas id=\"map\""),
        "one canvas for the fleet"
    );
    for asset in ["/ui/app.js", "/ui/live.js", "/ui/panel.js", "/ui/style.css"] {
        assert!(html.contains(asset), "page links {asset}");
        let (st, _, body) = get(&s, asset).await;
        assert_eq!(st, StatusCode::OK, "{asset}");
        // Offline: nothing may be fetched from another origin.
        for external in ["http://", "https://", "//fonts.", "@import"] {
            assert!(!body.contains(external), "{asset} references {external}");
        }
    }
    assert!(!html.contains("http://") && !html.contains("https://"));
}

#[tokio::test]
async fn layout_orders_cells_cluster_rack_host_and_states_follow_it() {
    let s = app(fleet());
    let (st, ctype, body) = get_bytes(&s, "/v1/map").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(ctype, "application/octet-stream");
    let (l, cols) = frame::decode(&body);
    let ends = &cols["gpu_id_end"];
    let bytes: Vec<u8> = cols["gpu_id_bytes"].iter().map(|&b| b as u8).collect();
    let ids: Vec<&str> = (0..ends.len())
        .map(|k| {
            let from = if k == 0 { 0 } else { ends[k - 1] as usize };
            std::str::from_utf8(&bytes[from..ends[k] as usize]).expect("utf-8 id")
        })
        .collect();
    assert_eq!(ids, ["GPU-a", "GPU-c", "GPU-b", "GPU-d"]);
    assert_eq!(l["n"], 4);
    assert_eq!(l["clusters"], serde_json::json!(["east-1", "west-1"]));
    // r01 exists in both clusters: two racks, each in its own cluster.
    assert_eq!(l["rack_names"], serde_json::json!(["r01", "r02", "r01"]));
    assert_eq!(l["rack_cluster"], serde_json::json!([0, 0, 1]));
    assert_eq!(cols["gpu_host"], [0, 0, 1, 2]);
    assert_eq!(cols["gpu_model"], [0, 0, 0, 0]);
    assert_eq!(l["host_rack"], serde_json::json!([0, 1, 2]));

    let (_, _, body) = get_bytes(&s, "/v1/map/states?since=0").await;
    let (d, cols) = frame::decode(&body);
    assert_eq!(d["full"], true);
    assert_eq!(d["n"], 4);
    assert!(!cols.contains_key("idx"), "a full answer is in cell order");
    assert_eq!(d["layout_version"], l["layout_version"]);
    // watch, degraded, healthy, failing
    assert_eq!(cols["state"], [1, 2, 0, 3]);
    assert_eq!(cols["risk"], [40, 70, 10, 95]);
    let jobs: Vec<String> = serde_json::from_value(d["jobs"].clone()).expect("jobs");
    let job_of = |k: usize| jobs[cols["job"][k] as usize].clone();
    assert_eq!(
        (job_of(0), job_of(1), job_of(3)),
        ("".into(), "train-1".into(), "train-2".into())
    );

    // Nothing changed since: an empty delta with its index column.
    let v = d["version"].as_u64().expect("version");
    let (_, _, body) = get_bytes(&s, &format!("/v1/map/states?since={v}")).await;
    let (d, cols) = frame::decode(&body);
    assert_eq!(d["full"], false);
    assert_eq!(d["n"], 0);
    assert_eq!(cols["idx"], Vec::<u64>::new());

    let (st, _, _) = get(&s, "/v1/map/states?since=x").await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _, _) = get(&s, "/v1/map/states?sincee=1").await;
    assert_eq!(
        st,
        StatusCode::BAD_REQUEST,
        "unknown parameters are refused"
    );
}

fn refresh(cache: &mut MapCache, s: &State) {
    cache.refresh(&s.gpus, true).expect("refresh");
}

#[test]
fn deltas_carry_only_changed_cells_and_new_gpus_change_the_layout() {
    let s = fleet();
    let mut cache = MapCache::default();
    refresh(&mut cache, &s);
    let v1 = cache.version();
    let layout1 = cache.layout().layout_version;
    assert_eq!(
        cache.delta(v1).idx,
        Vec::<u32>::new(),
        "nothing changed yet"
    );

    // Same risk again: no change, no new version.
    s.publish(&[assessment(
        "GPU-b",
        0.1,
        "east-1",
        "r02",
        "node-0003",
        "train-1",
    )]);
    refresh(&mut cache, &s);
    assert_eq!(cache.version(), v1);

    // GPU-b fails and moves to a new job: one cell, one new job name.
    s.publish(&[assessment(
        "GPU-b",
        0.9,
        "east-1",
        "r02",
        "node-0003",
        "train-9",
    )]);
    refresh(&mut cache, &s);
    let d = cache.delta(v1);
    assert!(!d.full);
    assert_eq!(d.idx, vec![2]);
    assert_eq!(d.state, vec![3]);
    assert_eq!(d.risk, vec![90]);
    assert_eq!(d.jobs.len(), 1);
    assert_eq!(&*d.jobs[0], "train-9");
    assert_eq!(d.job, vec![d.jobs_from]);
    assert_eq!(d.layout_version, layout1, "same GPUs, same layout");

    // A version the server never gave (e.g. before a restart): everything.
    let d = cache.delta(cache.version() + 5);
    assert!(d.full);
    assert_eq!(d.state.len(), 4);
    assert!(d.idx.is_empty(), "full answers are in cell order");

    // A new GPU: new layout, every cell re-sent after the rebuild.
    s.publish(&[assessment("GPU-e", 0.0, "east-1", "r01", "node-0002", "")]);
    refresh(&mut cache, &s);
    assert!(cache.layout().layout_version > layout1);
    assert_eq!(cache.layout().gpu_ids.len(), 5);
    assert_eq!(&*cache.layout().gpu_ids[2], "GPU-e");
    assert_eq!(cache.delta(v1).idx.len(), 5);
}

#[test]
fn a_snapshot_keeps_its_cells_while_the_cache_moves_on() {
    let s = fleet();
    let mut cache = MapCache::default();
    refresh(&mut cache, &s);
    let (layout, held) = cache.snapshot();
    let v1 = held.version;
    s.publish(&[assessment("GPU-a", 0.9, "east-1", "r01", "node-0001", "")]);
    refresh(&mut cache, &s);
    assert_eq!(held.version, v1, "the held snapshot did not change");
    assert_eq!(held.code[0], 1, "GPU-a still watch in the held snapshot");
    let (layout2, now) = cache.snapshot();
    assert!(now.version > v1);
    assert_eq!(now.code[0], 3, "GPU-a failing now");
    assert_eq!(layout, layout2, "same GPUs, same encoded layout");
}

#[tokio::test]
async fn requests_answer_from_a_snapshot_and_a_refresh_behind_it_sees_changes() {
    let state = fleet();
    let s = app(state.clone());
    let (_, _, body) = get_bytes(&s, "/v1/map/states?since=0").await;
    let (d, _) = frame::decode(&body);
    let v = d["version"].as_u64().expect("version");
    state.publish(&[assessment("GPU-a", 0.9, "east-1", "r01", "node-0001", "")]);
    // The first answers may come from the older snapshot; each one past
    // MIN_REFRESH starts a refresh, so the change arrives within a few polls.
    let mut seen = None;
    for _ in 0..200 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let (st, _, body) = get_bytes(&s, &format!("/v1/map/states?since={v}")).await;
        assert_eq!(st, StatusCode::OK);
        let (d, cols) = frame::decode(&body);
        if d["n"] != 0 {
            seen = Some(cols);
            break;
        }
    }
    let cols = seen.expect("the change reached the map within 10 s");
    assert_eq!(cols["idx"], [0], "GPU-a is cell 0");
    assert_eq!(cols["state"], [3], "failing");
    assert_eq!(cols["risk"], [90]);
}
