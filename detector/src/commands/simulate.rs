//! `forewarn simulate`: runs the seeded fleet simulator and writes its
//! telemetry (Parquet, JSON lines or dcgm-exporter text) plus ground-truth
//! labels, for backtests, training and demos. With `--serve-metrics` it
//! writes nothing and instead serves the fleet as dcgm-exporter would: a
//! timestamp-less `/metrics` page of the GPUs' latest readings, the
//! simulation advancing `--speed` times faster than real time, for
//! Prometheus (remote-write tests) and scrape mode to scrape.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use datasets::parquet::{TelemetryWriter, WriterOptions};
use datasets::simulator::{SimConfig, Simulator};
use features::Sample;
use features::time::parse_timestamp;

/// Output encodings of `simulate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SimFormat {
    /// Native JSON, one sample per line (the Kafka message format).
    Jsonl,
    /// Apache Parquet, one row per sample (the training format).
    Parquet,
    /// dcgm-exporter text, one scrape per host per interval.
    Prom,
}

impl SimFormat {
    pub(crate) fn extension(self) -> &'static str {
        match self {
            SimFormat::Jsonl => "jsonl",
            SimFormat::Parquet => "parquet",
            SimFormat::Prom => "prom",
        }
    }
}

/// Write a simulated fleet's telemetry and its ground-truth labels.
///
/// Writes `<out>/telemetry.<format>`, `<out>/labels.csv` (the contract's
/// `gpu,ts,kind`) and `<out>/labels.parquet` (with precursor onset and
/// topology). The same seed and flags always give the same bytes.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Number of GPUs (hosts grouped into racks and clusters).
    #[arg(long, default_value_t = 1_000)]
    pub gpus: usize,
    /// GPUs per host: 8 (HGX / DGX servers), 4 for many PCIe servers.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=16))]
    pub gpus_per_host: u8,
    /// Simulated duration in hours.
    #[arg(long, default_value_t = 24.0)]
    pub hours: f64,
    /// Seconds between two samples of one GPU.
    #[arg(long, default_value_t = 30)]
    pub interval: u32,
    /// Seed of every random choice: same seed, same fleet, same failures.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output directory (created if missing).
    #[arg(long, default_value = "out")]
    pub out: PathBuf,
    /// Telemetry encoding.
    #[arg(long, value_enum, default_value_t = SimFormat::Parquet)]
    pub format: SimFormat,
    /// Event time of the first sample (RFC 3339).
    #[arg(long, default_value = "2026-11-01T00:00:00Z")]
    pub start: String,
    /// Mix in dirty data: dropped samples, duplicates, small reorders and
    /// (in jsonl and prom) malformed messages.
    #[arg(long)]
    pub dirty: bool,
    /// Failures per GPU-day, before the power-law propensity spreads them.
    #[arg(long)]
    pub failure_rate: Option<f64>,
    /// Add one scenario of the detection suite (`forewarn evaluate
    /// --scenario`) to this fleet: its events (e.g. `rack_cooling`: one
    /// rack's inlet air heats for 1-2 h) at this size, seed and duration,
    /// with the scenario's failure rate unless --failure-rate is given.
    /// Files only (not with --serve-metrics). The fleet `evaluate` scores
    /// for a scenario and seed is another draw (each scenario mixes its
    /// name into the seed): `evaluate --telemetry` writes that one.
    #[arg(long, value_name = "NAME")]
    pub scenario: Option<String>,
    /// Plant one rack cooling incident (one rack's inlet air 8-14 °C
    /// warmer for 1-2 h, from 30-60 % into the run) besides the fleet's
    /// failures: a run with both, for end-to-end tests.
    #[arg(long)]
    pub rack_incident: bool,
    /// Leave the job label out of every sample (a dcgm-exporter with no
    /// scheduler mapping).
    #[arg(long)]
    pub no_job_labels: bool,
    /// Name jobs `job-…` instead of `train-…` / `infer-…` (labels that say
    /// nothing of the workload, as Slurm job ids and many pod names).
    #[arg(long, conflicts_with = "no_job_labels")]
    pub opaque_job_names: bool,
    /// Mean size of healthy GPUs' background error bursts: 1 logs them one
    /// at a time (Poisson counts); 8 in bursts of 8 on average at the same
    /// long-run rate (overdispersed counts, as PCIe link retrains and weak
    /// memory cells give). Precursors are untouched.
    #[arg(long, default_value_t = 1.0, value_name = "MEAN")]
    pub background_burst: f64,
    /// Each host reports at its own offset within the interval, up to a
    /// second early or late each time, as Prometheus spreads its scrapes
    /// (default: every sample at its tick's time). Files only: a served
    /// endpoint is stamped by whoever scrapes it.
    #[arg(long, conflicts_with = "serve_metrics")]
    pub spread_scrapes: bool,
    /// Serve the fleet as a dcgm-exporter `/metrics` endpoint on this
    /// address (e.g. 127.0.0.1:9400) instead of writing files; `--start`
    /// defaults to now. Runs until killed.
    #[arg(long, value_name = "ADDR")]
    pub serve_metrics: Option<std::net::SocketAddr>,
    /// With `--serve-metrics`: simulated seconds per wall second.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// With `--serve-metrics`: advance one tick per scrape instead of by
    /// the clock, and stamp each value with its simulated time (`--start`
    /// defaults to `--hours` ago), so a scraper sees every tick once:
    /// hours of fleet history in minutes, the same telemetry as the files.
    #[arg(long)]
    pub tick_per_scrape: bool,
}

/// Where samples go, whatever the format.
/// Where `simulate` (and `evaluate --telemetry`) writes a fleet's ticks.
pub(crate) enum Sink {
    Jsonl(BufWriter<File>),
    Parquet(Box<TelemetryWriter<BufWriter<File>>>),
    Prom(BufWriter<File>),
}

impl Sink {
    pub(crate) fn open(path: &Path, format: SimFormat) -> anyhow::Result<Sink> {
        let f = BufWriter::with_capacity(
            1 << 20,
            File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        Ok(match format {
            SimFormat::Jsonl => Sink::Jsonl(f),
            SimFormat::Prom => Sink::Prom(f),
            SimFormat::Parquet => Sink::Parquet(Box::new(TelemetryWriter::new(
                f,
                &WriterOptions::default(),
            )?)),
        })
    }

    pub(crate) fn write_tick(
        &mut self,
        samples: &[Sample],
        malformed: &[Vec<u8>],
    ) -> anyhow::Result<()> {
        match self {
            Sink::Parquet(w) => {
                for s in samples {
                    w.push(s)?;
                }
            }
            Sink::Jsonl(w) => {
                for s in samples {
                    serde_json::to_writer(&mut *w, s)?;
                    w.write_all(b"\n")?;
                }
                for m in malformed {
                    w.write_all(m)?;
                    w.write_all(b"\n")?;
                }
            }
            Sink::Prom(w) => {
                for s in samples {
                    write_prom(w, s)?;
                }
                for m in malformed {
                    w.write_all(m)?;
                    w.write_all(b"\n")?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> anyhow::Result<()> {
        match self {
            Sink::Parquet(w) => w.finish()?.flush()?,
            Sink::Jsonl(mut w) | Sink::Prom(mut w) => w.flush()?,
        }
        Ok(())
    }
}

/// Writes a simulated fleet's ground truth as `<dir>/<stem>.csv` (the
/// contract's `gpu,ts,kind`) and `<dir>/<stem>.parquet` (with precursor
/// onset and topology, for `train`); returns how many labels.
pub(crate) fn write_labels(sim: &Simulator, dir: &Path, stem: &str) -> anyhow::Result<usize> {
    let labels: Vec<datasets::Label> = sim.labels().iter().map(datasets::Label::from).collect();
    datasets::labels::write_csv(&dir.join(format!("{stem}.csv")), &labels)?;
    datasets::labels::write_parquet(&dir.join(format!("{stem}.parquet")), &labels)?;
    Ok(labels.len())
}

/// One sample as dcgm-exporter would print it, with explicit timestamps.
fn write_prom(w: &mut impl Write, s: &Sample) -> std::io::Result<()> {
    let t = &s.topo;
    let mut labels = format!("UUID=\"{}\"", s.gpu);
    for (k, v) in [
        ("Hostname", &t.host),
        ("modelName", &t.model),
        ("rack", &t.rack),
        ("cluster", &t.cluster),
        ("hpc_job", &t.job),
    ] {
        if let Some(v) = v {
            labels.push_str(&format!(",{k}=\"{v}\""));
        }
    }
    for (f, v) in s.metrics.iter() {
        writeln!(w, "{}{{{labels}}} {v} {}", f.name(), s.ts_ms)?;
    }
    Ok(())
}

pub fn run(args: &SimulateArgs) -> anyhow::Result<()> {
    if let Some(addr) = args.serve_metrics {
        anyhow::ensure!(
            args.scenario.is_none(),
            "--scenario writes files; it does not go with --serve-metrics"
        );
        return serve_metrics::run(args, addr);
    }
    let start_ms = parse_timestamp(&args.start)
        .with_context(|| format!("--start {:?} is not an RFC 3339 time", args.start))?;
    let mut cfg = SimConfig {
        gpus: args.gpus,
        gpus_per_host: usize::from(args.gpus_per_host),
        hours: args.hours,
        interval_s: args.interval,
        seed: args.seed,
        start_ms,
        dirty: args.dirty,
        rack_incident: args.rack_incident,
        job_labels: !args.no_job_labels,
        opaque_job_names: args.opaque_job_names,
        background_burst: args.background_burst,
        spread_scrapes: args.spread_scrapes,
        ..SimConfig::default()
    };
    if let Some(name) = &args.scenario {
        let run = datasets::scenarios::scenario(name, args.seed, false).with_context(|| {
            format!(
                "--scenario {name:?} is not a scenario; one of: {}",
                datasets::scenarios::NAMES.join(", ")
            )
        })?;
        cfg.scenario = run.config.scenario;
        cfg.failure_rate_per_gpu_day = run.config.failure_rate_per_gpu_day;
        cfg.racks_per_cluster = run.config.racks_per_cluster;
    }
    if let Some(rate) = args.failure_rate {
        cfg.failure_rate_per_gpu_day = rate;
    }
    let mut sim = Simulator::new(cfg).context("invalid simulation settings")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let path = args
        .out
        .join(format!("telemetry.{}", args.format.extension()));
    let mut sink = Sink::open(&path, args.format)?;

    let ticks = (args.hours * 3600.0 / f64::from(args.interval.max(1))).ceil() as u64;
    let pb = crate::progress::bar(ticks * args.gpus as u64, "samples");
    let started = std::time::Instant::now();
    let mut buf = Vec::with_capacity(args.gpus);
    let mut total = 0u64;
    while sim.next_tick(&mut buf).is_some() {
        let malformed = if args.dirty {
            sim.malformed()
        } else {
            Vec::new()
        };
        sink.write_tick(&buf, &malformed)?;
        total += buf.len() as u64;
        pb.inc(buf.len() as u64);
        buf.clear();
    }
    sink.finish()
        .with_context(|| format!("writing {}", path.display()))?;
    pb.finish_and_clear();

    let labels = write_labels(&sim, &args.out, "labels")?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "wrote {total} samples of {} GPUs over {} h to {} in {secs:.2} s ({:.0} samples/s); {} labels",
        args.gpus,
        args.hours,
        path.display(),
        total as f64 / secs.max(1e-9),
        labels
    );
    Ok(())
}

mod serve_metrics;
