//! The remote-write receiver: decoding bodies, and the endpoint's answers
//! through `app(state).oneshot(request)` (no socket).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use features::Field;
use features::decode::DecodeOutput;
use prost::Message;
use tower::ServiceExt;

use super::RemoteWrite;
use super::proto::{Label, Sample, TimeSeries, WriteRequest};
use super::*;
use crate::api::{Admin, AppState, app};
use crate::sources::DeadLetters;
use crate::state::SharedState;

/// A dcgm-exporter-like series as Prometheus would send it.
fn series(name: &str, gpu: &str, host: &str, value: f64, ts: i64) -> TimeSeries {
    let mut labels: Vec<Label> = [
        ("__name__", name),
        ("Hostname", host),
        ("UUID", gpu),
        ("gpu", "0"),
        ("instance", "n1:9400"),
        ("job", "dcgm"),
        ("modelName", "NVIDIA H100 80GB HBM3"),
    ]
    .iter()
    .map(|(n, v)| Label {
        name: (*n).into(),
        value: (*v).into(),
    })
    .collect();
    labels.sort_by(|a, b| a.name.cmp(&b.name));
    TimeSeries {
        labels,
        samples: vec![Sample {
            value,
            timestamp: ts,
        }],
    }
}

fn body(req: &WriteRequest) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(&req.encode_to_vec())
        .expect("snappy")
}

#[test]
fn a_request_becomes_one_sample_per_gpu_and_timestamp() {
    let req = WriteRequest {
        timeseries: vec![
            series("DCGM_FI_DEV_GPU_TEMP", "GPU-a", "n1", 61.0, 1_000),
            series("DCGM_FI_DEV_POWER_USAGE", "GPU-a", "n1", 300.0, 1_000),
            series("DCGM_FI_DEV_GPU_TEMP", "GPU-b", "n1", 55.0, 1_000),
            series("DCGM_FI_DEV_GPU_TEMP", "GPU-a", "n1", 62.0, 31_000),
        ],
    };
    let mut out = DecodeOutput::default();
    let seen = decode_request(&body(&req), &mut out).expect("decodes");
    assert_eq!(
        seen,
        super::Request {
            series: 4,
            values: 4
        }
    );
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let got: Vec<(&str, i64, usize)> = out
        .samples
        .iter()
        .map(|s| (&*s.gpu, s.ts_ms, s.metrics.len()))
        .collect();
    assert_eq!(
        got,
        [
            ("GPU-a", 1_000, 2),
            ("GPU-b", 1_000, 1),
            ("GPU-a", 31_000, 1)
        ]
    );
    assert_eq!(out.samples[0].metrics.get(Field::PowerUsage), Some(300.0));
    assert_eq!(out.samples[0].topo.host.as_deref(), Some("n1"));
}

#[test]
fn bodies_that_cannot_be_decoded_say_why() {
    let mut out = DecodeOutput::default();
    let e = decode_request(b"not snappy at all", &mut out).expect_err("garbage");
    assert!(matches!(e, BodyError::Snappy(_)), "{e}");
    let e = decode_request(
        &snap::raw::Encoder::new()
            .compress_vec(b"\xff\xff\xff")
            .expect("snappy"),
        &mut out,
    )
    .expect_err("not protobuf");
    assert_eq!(e.reason(), "remote_write_protobuf");
    // A tiny body claiming a huge uncompressed size is refused up front.
    let mut huge = Vec::new();
    let mut n = MAX_DECODED as u64 + 1;
    while n >= 0x80 {
        huge.push((n as u8) | 0x80);
        n >>= 7;
    }
    huge.push(n as u8);
    let e = decode_request(&huge, &mut out).expect_err("too large");
    assert!(matches!(e, BodyError::TooLarge { .. }), "{e}");
}

async fn post(
    app: axum::Router,
    body: Vec<u8>,
    content_type: &str,
) -> (StatusCode, Option<String>) {
    let req = Request::builder()
        .method("POST")
        .uri("/api/v1/write")
        .header("authorization", "Bearer t")
        .header("content-type", content_type)
        .header("content-encoding", "snappy")
        .body(Body::from(body))
        .expect("request");
    let resp = app.oneshot(req).await.expect("response");
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap_or("").to_owned());
    (resp.status(), retry)
}

#[tokio::test]
async fn the_endpoint_takes_retries_when_full_and_refuses_what_it_cannot_decode() {
    let state = SharedState::new();
    let admin = Admin {
        token: Some("t".into()),
        ..Admin::default()
    };
    let st = AppState::new(state.clone()).with_admin(admin);
    let metrics = std::sync::Arc::new(RemoteWriteMetrics::default());
    let (ingest, rx) = queue(metrics.clone());
    let dead = DeadLetters::open(None).expect("dead letters");
    let router = app(st).layer(axum::Extension(RemoteWrite {
        ingest,
        dead: dead.clone(),
    }));
    let ok = body(&WriteRequest {
        timeseries: vec![series("DCGM_FI_DEV_GPU_TEMP", "GPU-a", "n1", 61.0, 1_000)],
    });
    let proto = "application/x-protobuf";
    assert_eq!(
        post(router.clone(), ok.clone(), proto).await.0,
        StatusCode::NO_CONTENT
    );
    let got = rx.try_recv().expect("queued");
    assert_eq!(got.len(), 1);

    // Full: 503 with Retry-After (retried by Prometheus), never a 4xx.
    for _ in 0..QUEUE {
        let _ = post(router.clone(), ok.clone(), proto).await;
    }
    let (status, retry) = post(router.clone(), ok.clone(), proto).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retry.as_deref(), Some("1"));

    // Garbage: 400, dead-lettered with the reason.
    let (status, _) = post(router.clone(), b"garbage".to_vec(), proto).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(dead.by_reason().get("remote_write_snappy"), Some(&1));
    assert_eq!(
        state.metrics.decode_errors_by_reason(),
        [("remote_write_snappy", 1)]
    );

    // Remote-write 2.0 is refused as unsupported, not dropped as garbage.
    let v2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
    assert_eq!(
        post(router.clone(), ok.clone(), v2).await.0,
        StatusCode::UNSUPPORTED_MEDIA_TYPE
    );
    assert_eq!(metrics.requests(204), 1 + QUEUE as u64);
    assert_eq!(metrics.requests(503), 1);
    let page = crate::metrics::SourceMetrics::render(&*metrics);
    assert!(
        page.contains("forewarn_remote_write_requests_total{code=\"503\"} 1"),
        "{page}"
    );

    // Without the source: 404 saying how to enable it.
    let plain = app(AppState::new(state.clone()).with_admin(Admin {
        token: Some("t".into()),
        ..Admin::default()
    }));
    assert_eq!(post(plain, ok, proto).await.0, StatusCode::NOT_FOUND);
}
