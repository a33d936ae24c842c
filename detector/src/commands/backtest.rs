//! `forewarn backtest`: the live pipeline, identical, on files in event time
//! as fast as the CPU allows. Alert events go to a JSON-lines file in the
//! alert contract's shape; a summary goes to stderr.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use alerts::{AlertEngine, AlertEvent, Status};
use anyhow::Context;
use clap::Args;
use features::Sample;
use models::failure::FailureModel;

use crate::config::{Config, RawConfig};
use crate::pipeline::alerting::AlertStage;
use crate::pipeline::{AlertSink, Pipeline, PipelineConfig, Summary};
use crate::sources::{DeadLetters, file};
use crate::state::{SharedState, State};

/// Run the pipeline on telemetry files and write the alerts it would send.
///
/// Inputs may be native JSON lines, Parquet (`forewarn simulate --format
/// parquet`), dcgm-exporter text or nvidia-smi CSV; `-` reads stdin; a
/// directory stands for its files in scrape-time order. Samples should be
/// roughly in event-time order (small reorders are absorbed). Exits
/// non-zero when nothing could be decoded, or nothing scored (every GPU
/// seen fewer than three times: a snapshot, not telemetry).
#[derive(Debug, Args)]
pub struct BacktestArgs {
    /// Telemetry files or directories, read in order.
    #[arg(long, required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Scrape time of a dcgm-exporter scrape without timestamps (RFC 3339
    /// or unix ms); default: a time in the file's name, else its
    /// modification time.
    #[arg(long, value_parser = file::parse_scrape_time)]
    pub scrape_time: Option<i64>,
    /// Where alert events go (JSON lines, alert contract).
    #[arg(long, default_value = "alerts.jsonl")]
    pub alerts_out: PathBuf,
    /// Config file (pipeline, features and alert policy; sources are
    /// ignored). Default: the built-in settings.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Failure model artifact (`forewarn train --out …`); without one,
    /// risk comes from rules, trends and the anomaly forest.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Shard threads (overrides the config).
    #[arg(long)]
    pub shards: Option<usize>,
    /// Undecodable records go here with their reason (JSON lines).
    #[arg(long)]
    pub dead_letter: Option<PathBuf>,
}

/// Writes every alert event as a contract JSON line.
pub struct FileEventSink {
    out: BufWriter<File>,
    pub firing: BTreeMap<(&'static str, String), u64>,
}

impl FileEventSink {
    pub fn create(path: &std::path::Path) -> anyhow::Result<Self> {
        let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(FileEventSink {
            out: BufWriter::new(f),
            firing: BTreeMap::new(),
        })
    }
}

impl AlertSink for FileEventSink {
    fn deliver(&mut self, events: &[AlertEvent], _now_ms: i64) -> anyhow::Result<()> {
        for e in events {
            serde_json::to_writer(&mut self.out, e)?;
            self.out.write_all(b"\n")?;
            if e.status == Status::Firing {
                *self
                    .firing
                    .entry((e.severity.as_str(), e.kind.clone()))
                    .or_default() += 1;
            }
        }
        Ok(())
    }

    fn finish(&mut self, _now_ms: i64) -> anyhow::Result<()> {
        self.out.flush()?;
        let mut lines = Vec::new();
        for ((sev, kind), n) in &self.firing {
            lines.push(format!("  {sev:<8} {kind:<22} {n}"));
        }
        if !lines.is_empty() {
            eprintln!(
                "alerts fired (severity, kind, count):\n{}",
                lines.join("\n")
            );
        }
        Ok(())
    }
}

pub fn run(args: &BacktestArgs) -> anyhow::Result<()> {
    let mut cfg = RawConfig::load(args.config.as_deref())?;
    if let Some(n) = args.shards {
        anyhow::ensure!((1..=256).contains(&n), "--shards must be between 1 and 256");
        cfg.shards = n;
    }
    let sink = FileEventSink::create(&args.alerts_out)?;
    let model = crate::commands::train::load_model(args.model.as_deref())?;
    let mut dead = DeadLetters::open(args.dead_letter.as_deref())?;
    let started = Instant::now();
    // Text and JSON inputs have no row count up front: a counter with its rate.
    let pb = crate::progress::counter("samples");
    let opts = file::ReadOptions {
        scrape_time_ms: args.scrape_time,
    };
    let mut read = 0u64;
    let summary = run_pipeline(
        &cfg,
        model,
        Box::new(sink),
        Some(dead.clone()),
        |state, send| {
            read = file::read_inputs_with(&args.input, &opts, state, &mut dead, |batch| {
                pb.inc(batch.len() as u64);
                send(batch)
            })?;
            Ok(())
        },
    )?;
    pb.finish_and_clear();
    if read == 0 {
        anyhow::bail!(nothing_decoded(
            &args.input,
            &dead,
            args.dead_letter.as_deref()
        ));
    }
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "backtest: {} samples of {} GPUs in {secs:.2} s ({:.0} samples/s); {} undecodable, {} rejected; {} alert events → {}; model state {:.1} KB/GPU",
        summary.samples,
        summary.gpus,
        summary.samples as f64 / secs.max(1e-9),
        // Dead letters hold the refused samples too.
        dead.count().saturating_sub(summary.rejected),
        summary.rejected,
        summary.alert_events,
        args.alerts_out.display(),
        summary.state_bytes as f64 / 1024.0 / summary.gpus.max(1) as f64,
    );
    if summary.assessments == 0 {
        anyhow::bail!(nothing_scored(&args.input, read, &dead));
    }
    Ok(())
}

/// The inputs' names and the dead letters' counts by reason, for messages.
fn inputs_and_reasons(inputs: &[PathBuf], dead: &DeadLetters) -> (Vec<String>, Vec<String>) {
    let names: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
    let reasons: Vec<String> = dead
        .by_reason()
        .iter()
        .map(|(r, n)| format!("{n} {r}"))
        .collect();
    (names, reasons)
}

/// Why a run that decoded samples but scored none fails: every sample was
/// refused, usually because no GPU reached the third sample the admission
/// gate waits for (a capture file or a single scrape is one snapshot of
/// each GPU, not telemetry).
fn nothing_scored(inputs: &[PathBuf], read: u64, dead: &DeadLetters) -> String {
    let (names, reasons) = inputs_and_reasons(inputs, dead);
    format!(
        "nothing was scored from {}: {read} samples decoded, all refused ({}). A GPU is scored from its third sample on, so a snapshot (an nvidia-smi capture, a single scrape) is not enough: record a series, e.g. `nvidia-smi --query-gpu=… --format=csv -l 30` or dcgm-exporter's /metrics scraped over time (docs/inputs/files.md)",
        names.join(", "),
        if reasons.is_empty() {
            "no reason recorded".to_owned()
        } else {
            reasons.join(", ")
        },
    )
}

/// Why a run that decoded nothing fails: how many records were
/// undecodable, by reason, and where their dead letters went.
pub fn nothing_decoded(
    inputs: &[PathBuf],
    dead: &DeadLetters,
    dead_letter: Option<&std::path::Path>,
) -> String {
    let (names, reasons) = inputs_and_reasons(inputs, dead);
    let reasons = if reasons.is_empty() {
        "the input is empty".to_owned()
    } else {
        format!("{} undecodable ({})", dead.count(), reasons.join(", "))
    };
    let to = match dead_letter {
        Some(p) => format!("dead letters in {}", p.display()),
        None => "pass --dead-letter FILE to keep them with their reasons".to_owned(),
    };
    format!(
        "nothing could be decoded from {}: 0 samples, {reasons}; {to}",
        names.join(", ")
    )
}

/// The backtest pipeline on any feed of samples: fresh shards under `cfg`
/// (pipeline, features, alert policy) and `model`, alert events to `sink`.
/// `feed` pushes batches, in event-time order, through the `send` it is
/// given; the pipeline is drained when it returns. `backtest` feeds files,
/// `evaluate --scenario` the simulator: both run exactly this.
pub fn run_pipeline(
    cfg: &Config,
    model: Option<Arc<FailureModel>>,
    sink: Box<dyn AlertSink>,
    dead: Option<DeadLetters>,
    feed: impl FnOnce(&State, &mut dyn FnMut(Vec<Sample>) -> anyhow::Result<()>) -> anyhow::Result<()>,
) -> anyhow::Result<Summary> {
    let state = SharedState::new();
    let pcfg = PipelineConfig {
        shards: cfg.shards,
        features: cfg.features.clone(),
        seed: cfg.seed,
        failure_model: model,
    };
    let mut pipeline = Pipeline::start(
        pcfg.new_shards()?,
        AlertStage::new(AlertEngine::new(cfg.alerts.engine.clone())),
        sink,
        state.clone(),
        None,
    )?;
    pipeline.set_max_gpus(cfg.max_gpus);
    if let Some(d) = dead {
        pipeline.set_dead_letters(d);
    }
    feed(&state, &mut |batch| pipeline.send(batch))?;
    let (summary, _) = pipeline.finish()?;
    Ok(summary)
}
