//! Remote-write throughput: Prometheus-shaped requests (2,000 values each,
//! Prometheus's default `max_samples_per_send`; dcgm-exporter series of
//! 33 fields per GPU, the label set of a real exporter plus Prometheus's
//! `instance` and `job`) posted to a running `forewarn serve` with
//! `[source] type = "remote_write"` by `--senders` concurrent senders (as
//! Prometheus's queue shards), retrying 503s after a short pause as
//! Prometheus would. Reports values/s taken (204) and GPU samples/s into
//! the pipeline (`forewarn_samples_ingested_total`), and the decode alone
//! in-process.
//!
//! ```sh
//! FOREWARN_API_TOKEN=t forewarn serve --config rw.toml &   # type = "remote_write"
//! cargo run --release -p detector --example remote_write_load -- \
//!     --base http://127.0.0.1:8080 --token t --gpus 1000 --ticks 120 --senders 4
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use detector::sources::remote_write::decode_request;
use detector::sources::remote_write::proto::{Label, Sample, TimeSeries, WriteRequest};
use features::decode::DecodeOutput;
use prost::Message;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

/// Values per request: Prometheus's default `max_samples_per_send`.
const PER_REQUEST: usize = 2_000;

/// Compressed requests for `gpus` GPUs × `ticks` scrapes 30 s apart,
/// ending now: series in GPU order within a tick, cut every 2,000 values.
fn requests(gpus: usize, ticks: usize) -> (Vec<Vec<u8>>, usize) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let fields = &features::Field::ALL[..33.min(features::Field::ALL.len())];
    let mut series = Vec::new();
    for t in 0..ticks {
        let ts = now - (ticks - t) as i64 * 30_000;
        for g in 0..gpus {
            for (i, f) in fields.iter().enumerate() {
                let labels = [
                    ("__name__", f.name().to_string()),
                    ("DCGM_FI_DRIVER_VERSION", "550.90.07".into()),
                    ("Hostname", format!("node-{:04}", g / 8)),
                    (
                        "UUID",
                        format!("GPU-{g:08x}-5a4e-4c1e-9b0e-{:012x}", g * 7919),
                    ),
                    ("device", format!("nvidia{}", g % 8)),
                    ("gpu", (g % 8).to_string()),
                    ("instance", format!("node-{:04}:9400", g / 8)),
                    ("job", "dcgm".into()),
                    ("modelName", "NVIDIA H100 80GB HBM3".into()),
                    (
                        "pci_bus_id",
                        format!("00000000:{:02X}:00.0", 0x18 + (g % 8) * 0x10),
                    ),
                ];
                series.push(TimeSeries {
                    labels: labels
                        .into_iter()
                        .map(|(n, v)| Label {
                            name: n.into(),
                            value: v,
                        })
                        .collect(),
                    samples: vec![Sample {
                        value: (g + i) as f64 % 90.0,
                        timestamp: ts,
                    }],
                });
            }
        }
    }
    let values = series.len();
    let mut enc = snap::raw::Encoder::new();
    let bodies = series
        .chunks(PER_REQUEST)
        .map(|c| {
            let req = WriteRequest {
                timeseries: c.to_vec(),
            };
            enc.compress_vec(&req.encode_to_vec()).unwrap_or_default()
        })
        .collect();
    (bodies, values)
}

fn ingested(text: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix("forewarn_samples_ingested_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let base = arg("--base", "http://127.0.0.1:8080");
    let token = arg("--token", "t");
    let gpus: usize = arg("--gpus", "1000").parse()?;
    let ticks: usize = arg("--ticks", "120").parse()?;
    let senders: usize = arg("--senders", "4").parse()?;
    let (bodies, values) = requests(gpus, ticks);
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    eprintln!(
        "{} requests of {PER_REQUEST} values ({values} values, {} KB compressed on average)",
        bodies.len(),
        bytes / bodies.len().max(1) / 1024
    );

    // The decode alone, one thread.
    let t = Instant::now();
    let mut samples = 0usize;
    for b in &bodies {
        let mut out = DecodeOutput::default();
        decode_request(b, &mut out)?;
        samples += out.samples.len();
    }
    let s = t.elapsed().as_secs_f64();
    eprintln!(
        "decode alone: {:.0} values/s ({samples} GPU samples in {s:.2} s)",
        values as f64 / s
    );
    if arg("--decode-only", "no") != "no" {
        return Ok(());
    }

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let metrics = format!("{base}/metrics");
    let before = ingested(&client.get(&metrics).send().await?.text().await?);
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicU64::new(0));
    let retries = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..senders {
        let (client, bodies, next, retries) = (
            client.clone(),
            bodies.clone(),
            next.clone(),
            retries.clone(),
        );
        let url = format!("{base}/api/v1/write");
        let token = token.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Relaxed) as usize;
                let Some(body) = bodies.get(i) else { break };
                loop {
                    let resp = client
                        .post(&url)
                        .bearer_auth(&token)
                        .header("content-type", "application/x-protobuf")
                        .header("content-encoding", "snappy")
                        .header("x-prometheus-remote-write-version", "0.1.0")
                        .body(body.clone())
                        .send()
                        .await;
                    match resp.map(|r| r.status().as_u16()) {
                        Ok(204) => break,
                        Ok(503) | Err(_) => {
                            retries.fetch_add(1, Relaxed);
                            tokio::time::sleep(Duration::from_millis(30)).await;
                        }
                        Ok(code) => panic!("request {i}: HTTP {code}"),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let sent = t.elapsed().as_secs_f64();
    // The assembly wait holds the newest groups back: wait for them.
    let mut after = before;
    for _ in 0..200 {
        after = ingested(&client.get(&metrics).send().await?.text().await?);
        if after - before >= (gpus * ticks) as f64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "posted {values} values in {sent:.2} s: {:.0} values/s taken, {} retries (503); {:.0} GPU samples into the pipeline ({:.0} samples/s over the posting time)",
        values as f64 / sent,
        retries.load(Relaxed),
        after - before,
        (after - before) / sent
    );
    Ok(())
}
