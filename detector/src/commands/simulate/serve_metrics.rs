//! `forewarn simulate --serve-metrics ADDR`: the simulated fleet as a
//! dcgm-exporter endpoint. A thread steps the simulator, paced at
//! `--speed`× real time, and keeps the latest tick; `GET /metrics` renders
//! it in dcgm-exporter's shape (HELP and TYPE per metric, the labels `gpu`,
//! `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`,
//! `DCGM_FI_DRIVER_VERSION`, no timestamps). The simulator's rack and
//! cluster go along as `rack` and `cluster` labels, as target labels would
//! in Prometheus; its job as `hpc_job`. A GPU that stopped reporting in the
//! simulation leaves the page, as it would leave the exporter's.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use datasets::simulator::{SimConfig, Simulator};
use features::{FieldKind, Sample};

use super::SimulateArgs;

/// The page of the latest tick, rendered once per tick.
type Page = Arc<RwLock<String>>;

pub fn run(args: &SimulateArgs, addr: SocketAddr) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.speed > 0.0 && args.speed.is_finite(),
        "--speed must be a number above 0"
    );
    let start_ms = if args.start == "2026-11-01T00:00:00Z" {
        let back = if args.tick_per_scrape {
            (args.hours * 3_600_000.0) as i64
        } else {
            0
        };
        crate::checkpoint::wall_ms() - back
    } else {
        features::time::parse_timestamp(&args.start)
            .with_context(|| format!("--start {:?} is not an RFC 3339 time", args.start))?
    };
    let sim = Simulator::new(sim_config(args, start_ms)).context("invalid simulation settings")?;
    let page: Page = Arc::default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let per_scrape = if args.tick_per_scrape {
            Some(Arc::new(Mutex::new(PerScrape {
                sim,
                last: String::new(),
            })))
        } else {
            // The clock drives the simulation.
            let (p, interval, speed) = (page.clone(), args.interval, args.speed);
            std::thread::Builder::new()
                .name("simulator".into())
                .spawn(move || step(sim, interval, speed, &p))?;
            None
        };
        eprintln!("serving dcgm-exporter metrics on http://{addr}/metrics");
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let text = match &per_scrape {
                    Some(p) => p.lock().map(|mut p| p.next()).unwrap_or_default(),
                    None => page.read().map(|p| p.clone()).unwrap_or_default(),
                };
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        text,
                    )
                }
            }),
        );
        axum::serve(listener, app).await.context("serving /metrics")
    })
}

fn sim_config(args: &SimulateArgs, start_ms: i64) -> SimConfig {
    let mut cfg = SimConfig {
        gpus: args.gpus,
        hours: args.hours,
        interval_s: args.interval,
        seed: args.seed,
        start_ms,
        dirty: false,
        background_burst: args.background_burst,
        ..SimConfig::default()
    };
    if let Some(rate) = args.failure_rate {
        cfg.failure_rate_per_gpu_day = rate;
    }
    cfg
}

/// `--tick-per-scrape`: each scrape takes the next tick; after the last,
/// the last page again (the same timestamps: a scraper drops them as
/// duplicates).
struct PerScrape {
    sim: Simulator,
    last: String,
}

impl PerScrape {
    fn next(&mut self) -> String {
        let mut buf = Vec::new();
        if self.sim.next_tick(&mut buf).is_some() {
            self.last = render_at(&buf, true);
        }
        self.last.clone()
    }
}

/// Steps the simulator at `speed`× real time, publishing each tick; the
/// last tick stays on the page once the simulation is over.
fn step(mut sim: Simulator, interval_s: u32, speed: f64, page: &Page) {
    let started = Instant::now();
    let mut buf = Vec::new();
    let mut ticks = 0u64;
    while sim.next_tick(&mut buf).is_some() {
        let text = render_at(&buf, false);
        if let Ok(mut p) = page.write() {
            *p = text;
        }
        buf.clear();
        ticks += 1;
        let due = Duration::from_secs_f64(ticks as f64 * f64::from(interval_s) / speed);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    eprintln!("the simulation is over: serving its last tick");
}

/// One tick as dcgm-exporter prints it: grouped by metric, with no
/// timestamps unless `stamped`.
pub fn render_at(samples: &[Sample], stamped: bool) -> String {
    let mut labels = Vec::with_capacity(samples.len());
    let mut slot_of_host: std::collections::HashMap<&str, usize> = Default::default();
    for s in samples {
        let host = s.topo.host.as_deref().unwrap_or("localhost");
        let slot = slot_of_host.entry(host).or_default();
        let t = &s.topo;
        let mut l = format!(
            "gpu=\"{slot}\",UUID=\"{}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{slot}\",modelName=\"{}\",Hostname=\"{host}\",DCGM_FI_DRIVER_VERSION=\"550.90.07\"",
            s.gpu,
            0x18 + *slot * 0x10,
            t.model.as_deref().unwrap_or("NVIDIA H100 80GB HBM3"),
        );
        for (k, v) in [
            ("rack", &t.rack),
            ("cluster", &t.cluster),
            ("hpc_job", &t.job),
        ] {
            if let Some(v) = v {
                let _ = write!(l, ",{k}=\"{v}\"");
            }
        }
        *slot += 1;
        labels.push(l);
    }
    let mut out = String::with_capacity(samples.len() * 40 * 200);
    for field in features::Field::ALL {
        let mut head = false;
        for (s, l) in samples.iter().zip(&labels) {
            let Some(v) = s.metrics.get(*field) else {
                continue;
            };
            if !head {
                let kind = match field.kind() {
                    FieldKind::Counter => "counter",
                    FieldKind::Gauge | FieldKind::State => "gauge",
                };
                let _ = writeln!(out, "# HELP {} {}.", field.name(), field.name());
                let _ = writeln!(out, "# TYPE {} {kind}", field.name());
                head = true;
            }
            if stamped {
                let _ = writeln!(out, "{}{{{l}}} {v} {}", field.name(), s.ts_ms);
            } else {
                let _ = writeln!(out, "{}{{{l}}} {v}", field.name());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use features::decode::{DecodeOutput, prom};

    #[test]
    fn the_page_decodes_back_to_the_tick_with_the_scrape_time() {
        let mut sim = Simulator::new(SimConfig {
            gpus: 16,
            hours: 1.0,
            ..SimConfig::default()
        })
        .expect("sim");
        let mut tick = Vec::new();
        sim.next_tick(&mut tick).expect("a tick");
        let page = render_at(&tick, false);
        assert!(page.contains("# TYPE DCGM_FI_DEV_GPU_TEMP gauge"), "{page}");
        assert!(
            !page
                .lines()
                .any(|l| !l.starts_with('#') && l.ends_with('}'))
        );
        let mut out = DecodeOutput::default();
        prom::decode_into(page.as_bytes(), 42, &mut out);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(out.samples.len(), tick.len());
        for (got, want) in out.samples.iter().zip(&tick) {
            assert_eq!((&got.gpu, got.ts_ms), (&want.gpu, 42));
            assert_eq!(got.topo, want.topo);
            assert_eq!(got.metrics.len(), want.metrics.len());
        }
    }
}
