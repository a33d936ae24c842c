//! The REST guard rails of issue 26, measured in one process: the real
//! server ([`detector::api::Server`], default `[api]` settings unless told)
//! over a risk table of `--gpus` GPUs that a publisher thread keeps
//! republishing (`--publish` assessments a second, the ingest stand-in),
//! then three phases:
//!
//! 1. `GET /v1/gpus?sort=risk&limit=50` open-loop at `--rate` req/s for
//!    `--seconds` (latency from each request's scheduled send time, so a
//!    stall shows in the tail);
//! 2. slowloris: `--slow` clients that send a header line a second and
//!    never end their headers; how long until each is dropped;
//! 3. `--idle` idle connections opened and held, then `/healthz` asked
//!    `--probes` times (a new connection each time, and on one keep-alive
//!    connection).
//!
//! `--serve-for S` instead only serves (table and publisher running) for S
//! seconds on `--port` (default: any free one, printed), for an outside
//! load generator (wrk).
//!
//! ```sh
//! cargo run --profile release -p detector --example rest_guard -- --gpus 100000
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use detector::api::{AppState, Server, ServerSettings, app};
use detector::assess::{Assessment, HealthState, KINDS, Kind};
use detector::state::{SharedState, State};
use features::Topology;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*: the publisher's risks.
fn next(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn assessment(g: usize, risk: f64, ts_ms: i64) -> Assessment {
    let name = |p: &str, n: usize| Some(Arc::<str>::from(format!("{p}{n:04}")));
    Assessment {
        ts_ms,
        gpu: format!("GPU-{g:08x}").into(),
        topo: Topology {
            host: name("node-", g / 8),
            rack: name("r", g / 256),
            cluster: name("c", g / 25_000),
            model: Some("H100".into()),
            job: name("job-", g / 64),
        },
        risk,
        state: HealthState::from_risk(risk),
        kind: Kind::HbmEccTrend,
        components: [0.0; KINDS],
        anomaly_grade: 0.0,
        eta_hours: None,
        reasons: Vec::new(),
        confirmed: 0,
    }
}

/// Fills the table, then republishes random GPUs at `per_s` a second in
/// batches of 1,000 until `stop`.
fn publisher(state: State, gpus: usize, per_s: u64, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let risk = |s: &mut u64| (next(s) % 1_000) as f64 / 1_000.0;
    let mut ts = 0i64;
    let start = Instant::now();
    let mut sent = 0u64;
    while !stop.load(Ordering::Relaxed) {
        ts += 1_000;
        let batch: Vec<Assessment> = (0..1_000)
            .map(|_| {
                let g = (next(&mut seed) % gpus as u64) as usize;
                assessment(g, risk(&mut seed), ts)
            })
            .collect();
        state.publish(&batch);
        sent += batch.len() as u64;
        done.store(sent, Ordering::Relaxed);
        let due = start + Duration::from_secs_f64(sent as f64 / per_s.max(1) as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
}

fn quantiles(mut us: Vec<u64>) -> String {
    if us.is_empty() {
        return "no samples".into();
    }
    us.sort_unstable();
    let q = |p: f64| us[((us.len() as f64 * p) as usize).min(us.len() - 1)] as f64 / 1000.0;
    format!(
        "n {} ms p50 {:.2} p90 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
        us.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        q(1.0)
    )
}

/// Phase 1: the ranked page, open-loop.
async fn list_load(addr: SocketAddr, rate: f64, seconds: f64) -> String {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let url = format!("http://{addr}/v1/gpus?sort=risk&limit=50");
    let total = (rate * seconds) as usize;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, bool)>();
    let start = Instant::now();
    let gap = Duration::from_secs_f64(1.0 / rate);
    for i in 0..total {
        let due = start + gap.mul_f64(i as f64);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        let (client, url, tx) = (client.clone(), url.clone(), tx.clone());
        tokio::spawn(async move {
            let ok = match client.get(&url).send().await {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            };
            let _ = tx.send((due.elapsed().as_micros() as u64, ok));
        });
    }
    drop(tx);
    let (mut lat, mut errors) = (Vec::with_capacity(total), 0);
    while let Some((us, ok)) = rx.recv().await {
        lat.push(us);
        errors += usize::from(!ok);
    }
    let wall = start.elapsed().as_secs_f64();
    format!(
        "{:.0} req/s offered, {:.0}/s done, {errors} errors; {}",
        rate,
        lat.len() as f64 / wall,
        quantiles(lat)
    )
}

/// Phase 2: clients that never finish their headers.
async fn slowloris(addr: SocketAddr, clients: usize) -> String {
    let mut tasks = Vec::new();
    for i in 0..clients {
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let mut c = TcpStream::connect(addr).await.ok()?;
            c.write_all(b"GET /v1/fleet HTTP/1.1\r\nHost: x\r\n")
                .await
                .ok()?;
            let mut buf = [0u8; 512];
            for n in 0..600 {
                tokio::select! {
                    r = c.read(&mut buf) => {
                        // An answer (408) or the end: dropped.
                        let _ = r;
                        return Some(start.elapsed());
                    }
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                let line = format!("X-Slow-{i}-{n}: 1\r\n");
                if c.write_all(line.as_bytes()).await.is_err() {
                    return Some(start.elapsed());
                }
            }
            None
        }));
    }
    let mut times = Vec::new();
    for t in tasks {
        if let Ok(Some(d)) = t.await {
            times.push(d.as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    format!(
        "{} of {clients} dropped after {:.2}–{:.2} s",
        times.len(),
        times.first().copied().unwrap_or(f64::NAN),
        times.last().copied().unwrap_or(f64::NAN)
    )
}

async fn healthz_once(c: &mut TcpStream) -> Option<()> {
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .ok()?;
    let mut buf = [0u8; 1024];
    let mut got = 0;
    // The JSON body's closing brace is the last of the answer.
    while !buf[..got].ends_with(b"}") {
        let n = c.read(&mut buf[got..]).await.ok()?;
        if n == 0 || got + n == buf.len() {
            return None;
        }
        got += n;
    }
    Some(())
}

/// Phase 3: `/healthz` with `idle` connections held open.
async fn idle_then_probe(addr: SocketAddr, idle: usize, probes: usize) -> String {
    let opened = Instant::now();
    let mut held = Vec::with_capacity(idle);
    for _ in 0..idle {
        match TcpStream::connect(addr).await {
            Ok(c) => held.push(c),
            Err(e) => {
                eprintln!("opened {} idle connections, then: {e}", held.len());
                break;
            }
        }
    }
    let open_s = opened.elapsed().as_secs_f64();
    let (mut fresh, mut kept, mut failed) = (Vec::new(), Vec::new(), 0);
    let mut keep = TcpStream::connect(addr).await.expect("probe connection");
    for _ in 0..probes {
        let t = Instant::now();
        let ok = match TcpStream::connect(addr).await {
            Ok(mut c) => healthz_once(&mut c).await.is_some(),
            Err(_) => false,
        };
        if ok {
            fresh.push(t.elapsed().as_micros() as u64);
        } else {
            failed += 1;
        }
        let t = Instant::now();
        if healthz_once(&mut keep).await.is_some() {
            kept.push(t.elapsed().as_micros() as u64);
        } else {
            failed += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let probe_s = opened.elapsed().as_secs_f64() - open_s;
    format!(
        "{} idle connections opened in {open_s:.2} s, held during {probe_s:.2} s of probes, {failed} failed probes\n  new connection: {}\n  keep-alive:     {}",
        held.len(),
        quantiles(fresh),
        quantiles(kept)
    )
}

fn main() {
    let gpus: usize = arg("--gpus", 100_000);
    let per_s: u64 = arg("--publish", 20_000);
    let rate: f64 = arg("--rate", 200.0);
    let seconds: f64 = arg("--seconds", 20.0);
    let slow: usize = arg("--slow", 20);
    let idle: usize = arg("--idle", 5_000);
    let probes: usize = arg("--probes", 500);
    let serve_for: f64 = arg("--serve-for", 0.0);
    let port: u16 = arg("--port", 0);
    let mut settings: ServerSettings = detector::config::RawApi::default()
        .validate()
        .expect("default [api]");
    let header_s: f64 = arg(
        "--header-timeout",
        settings.header_read_timeout.as_secs_f64(),
    );
    settings.header_read_timeout = Duration::from_secs_f64(header_s);

    let state = SharedState::new();
    let t = Instant::now();
    for chunk in (0..gpus).collect::<Vec<_>>().chunks(5_000) {
        let batch: Vec<Assessment> = chunk
            .iter()
            .map(|&g| assessment(g, (g % 997) as f64 / 997.0, 0))
            .collect();
        state.publish(&batch);
    }
    println!("table: {gpus} GPUs in {:.2} s", t.elapsed().as_secs_f64());
    // The publisher's cost per assessment, flat out, before any load.
    let mut seed = 7u64;
    let t = Instant::now();
    for round in 0..100 {
        let batch: Vec<Assessment> = (0..1_000)
            .map(|_| {
                let g = (next(&mut seed) % gpus as u64) as usize;
                assessment(g, (next(&mut seed) % 1_000) as f64 / 1_000.0, round)
            })
            .collect();
        state.publish(&batch);
    }
    println!(
        "publish flat out: {:.2} µs per assessment (batch building included)",
        t.elapsed().as_secs_f64() * 1e6 / 100_000.0
    );
    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicU64::new(0));
    let pub_thread = {
        let (st, sp, d) = (state.clone(), stop.clone(), published.clone());
        std::thread::spawn(move || publisher(st, gpus, per_s, sp, d))
    };

    // The server's runtime as `serve` builds it: two workers.
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let shutdown = CancellationToken::new();
    let addr = server_rt.block_on(async {
        let server = Server::bind(
            SocketAddr::from(([127, 0, 0, 1], port)),
            &settings,
            app(AppState::new(state.clone())),
        )
        .await
        .expect("bind");
        let addr = server.local_addr().expect("address");
        tokio::spawn(server.run(shutdown.clone()));
        addr
    });
    println!("serving on http://{addr} with {settings:?}");
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let t = Instant::now();
    if serve_for > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(serve_for));
    } else {
        println!(
            "list: {}",
            client_rt.block_on(list_load(addr, rate, seconds))
        );
        println!("slowloris: {}", client_rt.block_on(slowloris(addr, slow)));
        println!(
            "healthz: {}",
            client_rt.block_on(idle_then_probe(addr, idle, probes))
        );
    }
    let n = published.load(Ordering::Relaxed);
    println!(
        "publisher: {n} assessments in {:.1} s ({:.0}/s)",
        t.elapsed().as_secs_f64(),
        n as f64 / t.elapsed().as_secs_f64()
    );
    stop.store(true, Ordering::Relaxed);
    shutdown.cancel();
    let _ = pub_thread.join();
}
