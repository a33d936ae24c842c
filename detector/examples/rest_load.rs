//! Open-loop load generator for the REST API: requests at a fixed rate
//! (not "as fast as replies come back"), latency measured from each
//! request's *scheduled* send time, so a stall shows up in the tail instead
//! of silently lowering the rate (no coordinated omission).
//!
//! ```sh
//! cargo run --release -p detector --example rest_load -- \
//!     --base http://127.0.0.1:8080 --rate 5000 --seconds 30
//! ```
//! Rotates `GET /v1/gpus/{uuid}` over the GPUs `GET /v1/gpus` lists.

use std::sync::Arc;
use std::time::{Duration, Instant};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = arg("--base", "http://127.0.0.1:8080");
    let rate: f64 = arg("--rate", "5000").parse()?;
    let seconds: f64 = arg("--seconds", "30").parse()?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .timeout(Duration::from_secs(5))
        .build()?;
    let list: serde_json::Value = client
        .get(format!("{base}/v1/gpus?limit=10000&sort=gpu"))
        .send()
        .await?
        .json()
        .await?;
    let gpus: Vec<String> = list["items"]
        .as_array()
        .ok_or("no items in /v1/gpus")?
        .iter()
        .filter_map(|i| i["gpu"].as_str().map(str::to_string))
        .collect();
    if gpus.is_empty() {
        return Err("the service knows no GPUs yet".into());
    }
    let urls: Arc<Vec<String>> =
        Arc::new(gpus.iter().map(|g| format!("{base}/v1/gpus/{g}")).collect());
    let total = (rate * seconds) as usize;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u64, bool)>();
    let start = Instant::now();
    let gap = Duration::from_secs_f64(1.0 / rate);
    for i in 0..total {
        let due = start + gap.mul_f64(i as f64);
        let now = Instant::now();
        if due > now {
            tokio::time::sleep(due - now).await;
        }
        let (client, urls, tx) = (client.clone(), urls.clone(), tx.clone());
        tokio::spawn(async move {
            let url = &urls[i % urls.len()];
            let ok = match client.get(url).send().await {
                Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                Err(_) => false,
            };
            let _ = tx.send((due.elapsed().as_micros() as u64, ok));
        });
    }
    drop(tx);
    let mut lat = Vec::with_capacity(total);
    let mut errors = 0usize;
    while let Some((us, ok)) = rx.recv().await {
        lat.push(us);
        if !ok {
            errors += 1;
        }
    }
    let wall = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)] as f64 / 1000.0;
    println!(
        "{} requests in {wall:.1} s ({:.0}/s) over {} GPUs, {errors} errors; latency ms p50 {:.2} p90 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
        lat.len(),
        lat.len() as f64 / wall,
        urls.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        q(0.999),
        q(1.0)
    );
    Ok(())
}
