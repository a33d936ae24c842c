//! Scrape mode: target spelling, `file_sd` files, and scraping a local
//! endpoint that answers, then stops.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::*;
use crate::metrics::SourceMetrics;
use crate::state::SharedState;

#[test]
fn targets_are_host_port_or_urls() {
    assert_eq!(
        target_url("10.0.0.1:9400", "http", "/metrics").expect("ok"),
        (
            "10.0.0.1:9400".into(),
            "http://10.0.0.1:9400/metrics".into()
        )
    );
    assert_eq!(
        target_url("https://h:9400/m", "http", "/metrics")
            .expect("ok")
            .1,
        "https://h:9400/m"
    );
    for bad in ["", "h", "ftp://h:1", "h:1/metrics"] {
        assert!(target_url(bad, "http", "/metrics").is_err(), "{bad}");
    }
}

#[test]
fn file_sd_json_and_yaml_give_targets_with_labels() {
    let json =
        r#"[{"targets": ["a:9400", "b:9400"], "labels": {"rack": "r1"}}, {"targets": ["c:9400"]}]"#;
    let t = file_sd::parse(Path::new("sd.json"), json, "http", "/metrics").expect("json");
    assert_eq!(t.len(), 3);
    assert_eq!(t[0].url, "http://a:9400/metrics");
    assert_eq!(t[1].labels.get("rack").map(String::as_str), Some("r1"));
    assert!(t[2].labels.is_empty());
    let yaml = "- targets: ['a:9400']\n  labels:\n    cluster: east\n";
    let t = file_sd::parse(Path::new("sd.yml"), yaml, "http", "/metrics").expect("yaml");
    assert_eq!(t[0].labels.get("cluster").map(String::as_str), Some("east"));
    assert!(file_sd::parse(Path::new("sd.json"), "[{", "http", "/metrics").is_err());
}

#[test]
fn a_changed_file_sd_file_is_read_again_and_a_broken_one_keeps_the_targets() {
    let dir = std::env::temp_dir().join(format!("forewarn-sd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("targets.json");
    std::fs::write(&path, r#"[{"targets": ["a:1"]}]"#).expect("write");
    let mut w = file_sd::Watch::new(path.clone(), "http".into(), "/metrics".into());
    assert_eq!(w.targets().len(), 1);
    std::fs::write(&path, r#"[{"targets": ["a:1", "b:2"]}]"#).expect("write");
    assert_eq!(w.targets().len(), 2, "size changed: read again");
    std::fs::write(&path, "[{ broken").expect("write");
    assert_eq!(w.targets().len(), 2, "kept");
    std::fs::remove_dir_all(&dir).ok();
}

/// A tiny `/metrics` endpoint on 127.0.0.1 answering one fixed page.
async fn endpoint(page: &'static str) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let app =
        axum::Router::new().route("/metrics", axum::routing::get(move || async move { page }));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (port, task)
}

#[tokio::test]
async fn scrapes_stamp_the_scrape_time_and_a_dead_target_yields_nothing() {
    let page = "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"n1\"} 61\nDCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"GPU-b\",Hostname=\"n1\"} 62\n";
    let (port, server) = endpoint(page).await;
    let name = format!("127.0.0.1:{port}");
    let settings = ScrapeSettings {
        targets: vec![target_url(&name, "http", "/metrics").expect("target")],
        file_sd: None,
        interval: Duration::from_millis(200),
        timeout: Duration::from_millis(150),
        scheme: "http".into(),
        metrics_path: "/metrics".into(),
    };
    let state = SharedState::new();
    let metrics = Arc::new(ScrapeMetrics::default());
    let (tx, rx) = std::sync::mpsc::sync_channel(16);
    let stop = CancellationToken::new();
    let before = crate::checkpoint::wall_ms();
    let task = tokio::spawn(run(
        settings,
        state.clone(),
        DeadLetters::open(None).expect("dead"),
        tx,
        metrics.clone(),
        stop.clone(),
    ));
    let first = tokio::task::spawn_blocking(move || {
        let b = rx.recv_timeout(Duration::from_secs(5)).expect("a scrape");
        (b, rx)
    })
    .await
    .expect("join");
    let (batch, rx) = first;
    let gpus: Vec<&str> = batch.iter().map(|s| &*s.gpu).collect();
    assert_eq!(gpus, ["GPU-a", "GPU-b"]);
    assert!(
        batch.iter().all(|s| s.ts_ms >= before),
        "the scrape time is ts"
    );
    assert_eq!(metrics.up(&name), Some(true));

    server.abort();
    let _ = server.await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while metrics.up(&name) != Some(false) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(metrics.up(&name), Some(false), "marked down");
    while rx.try_recv().is_ok() {}
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(rx.try_recv().is_err(), "a dead target yields no samples");
    let text = metrics.render();
    assert!(
        text.contains(&format!("forewarn_scrape_target_up{{target=\"{name}\"}} 0")),
        "{text}"
    );
    assert!(text.contains("forewarn_scrape_failures_total"), "{text}");
    stop.cancel();
    task.await.expect("join").expect("run");
    let _ = BTreeMap::<String, String>::new();
}

fn source(text: &str) -> Result<crate::config::SourceKind, String> {
    crate::config::RawConfig::from_toml(text)
        .and_then(|r| r.validate())
        .map(|c| c.source)
        .map_err(|e| e.to_string())
}

#[test]
fn the_config_names_what_is_wrong() {
    use crate::config::SourceKind;
    assert_eq!(
        source("[source]\ntype = \"remote_write\"\n"),
        Ok(SourceKind::RemoteWrite)
    );
    let Ok(SourceKind::Scrape(s)) = source(
        "[source]\ntype = \"scrape\"\ntargets = [\"h:9400\"]\nfile_sd = \"sd.yml\"\ninterval = \"15s\"\ntimeout = \"1m\"\n",
    ) else {
        panic!("a scrape source")
    };
    assert_eq!(
        s.targets,
        [("h:9400".into(), "http://h:9400/metrics".into())]
    );
    assert_eq!(s.interval, Duration::from_secs(15));
    assert_eq!(s.timeout, Duration::from_secs(15), "capped at the interval");
    for (text, key) in [
        ("type = \"scrape\"\n", "source.targets"),
        ("type = \"scrape\"\ntargets = [\"h\"]\n", "source.targets"),
        (
            "type = \"scrape\"\ntargets = [\"h:1\"]\ninterval = \"1ms\"\n",
            "source.interval",
        ),
        (
            "type = \"scrape\"\ntargets = [\"h:1\"]\nscheme = \"ftp\"\n",
            "source.scheme",
        ),
        (
            "type = \"remote_write\"\nbrokers = \"x\"\n",
            "source.brokers",
        ),
    ] {
        let e = source(&format!("[source]\n{text}")).expect_err(text);
        assert!(e.contains(key), "{text}: {e}");
    }
}
