//! `forewarn evaluate --scenario NAME|all`: runs scenarios of the suite
//! (`datasets::scenarios`) through exactly the pipeline `backtest` runs
//! ([`crate::commands::backtest::run_pipeline`]), fed straight from the
//! simulator in event time, then scores the alerts against the ground
//! truth ([`evaluation::score`]) and checks the targets
//! ([`evaluation::summary`]). This module is the glue: arguments, the run,
//! what is printed.
//!
//! Dirty scenarios carry malformed messages: they go through the same
//! decoder the file source uses and are counted as undecodable (a message
//! that still decodes joins the stream, as it would from a file).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use alerts::AlertEvent;
use anyhow::Context;
use datasets::scenarios::{self, ScenarioRun};
use datasets::simulator::Simulator;
use evaluation::score::{self, Truth};
use evaluation::{Outcome, summary};

use super::args::EvaluateArgs;
use crate::commands::backtest::run_pipeline;
use crate::commands::simulate::{SimFormat, Sink, write_labels};
use crate::config::RawConfig;
use crate::pipeline::AlertSink;

/// Collects alert events in memory for scoring.
struct Collect(Arc<Mutex<Vec<AlertEvent>>>);

impl AlertSink for Collect {
    fn deliver(&mut self, events: &[AlertEvent], _now_ms: i64) -> anyhow::Result<()> {
        self.0
            .lock()
            .map_err(|_| anyhow::anyhow!("alert collector poisoned"))?
            .extend_from_slice(events);
        Ok(())
    }
}

pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    let sa = &args.scenarios;
    let spec = sa.scenario.as_deref().unwrap_or("all");
    let runs: Vec<ScenarioRun> = if spec == "all" {
        scenarios::suite(args.seed, sa.reduced)
    } else {
        spec.split(',')
            .map(|n| {
                scenarios::scenario(n.trim(), args.seed, sa.reduced).with_context(|| {
                    format!(
                        "unknown scenario {n:?}; known: all, {}",
                        scenarios::NAMES.join(", ")
                    )
                })
            })
            .collect::<anyhow::Result<_>>()?
    };
    let mut cfg = RawConfig::load(sa.config.as_deref())?;
    if let Some(n) = sa.shards {
        anyhow::ensure!((1..=256).contains(&n), "--shards must be between 1 and 256");
        cfg.shards = n;
    }
    let model = crate::commands::train::load_model(args.model.as_deref())?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let omit = sa
        .omit_field
        .iter()
        .map(|n| {
            features::Field::from_name(n.trim()).with_context(|| {
                format!(
                    "--omit-field: unknown DCGM field {n:?} (e.g. DCGM_FI_DEV_ECC_SBE_VOL_TOTAL)"
                )
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut outcomes = Vec::new();
    for mut run in runs {
        run.config.job_labels = !sa.no_job_labels;
        run.config.opaque_job_names = sa.opaque_job_names;
        run.config.dirty |= sa.dirty;
        if let Some(n) = sa.gpus_per_host {
            run.config.gpus_per_host = usize::from(n);
        }
        if let Some(n) = sa.hosts_per_rack {
            run.config.hosts_per_rack = usize::from(n);
        }
        if let Some(i) = sa.interval {
            run.config.interval_s = i;
        }
        if let Some(b) = sa.background_burst {
            run.config.background_burst = b;
        }
        run.config.spread_scrapes |= sa.spread_scrapes;
        run.config.relative_precursors |= sa.relative_precursors;
        let started = Instant::now();
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut sim =
            Simulator::new(run.config.clone()).with_context(|| format!("scenario {}", run.name))?;
        let truth = Truth::of(&sim, crate::pipeline::shard::WARM_UP_MS);
        let mut telemetry = if sa.telemetry {
            Some(telemetry_files(&args.out, &run, &sim)?)
        } else {
            None
        };
        let (mut undecodable, mut samples) = (0u64, 0u64);
        let summary = run_pipeline(
            &cfg,
            model.clone(),
            Box::new(Collect(events.clone())),
            None,
            |_, send| {
                let mut buf = Vec::new();
                let mut batch = Vec::with_capacity(crate::sources::BATCH + 512);
                while sim.next_tick(&mut buf).is_some() {
                    for s in &mut buf {
                        for f in &omit {
                            s.metrics.clear(*f);
                        }
                    }
                    let malformed = sim.malformed();
                    if let Some(t) = telemetry.as_mut() {
                        t.write_tick(&buf, &malformed)?;
                    }
                    batch.append(&mut buf);
                    for m in malformed {
                        let out = features::decode(&m, 0);
                        undecodable += out.errors.len() as u64;
                        batch.extend(out.samples);
                    }
                    if batch.len() >= crate::sources::BATCH {
                        samples += batch.len() as u64;
                        send(std::mem::take(&mut batch))?;
                    }
                }
                if !batch.is_empty() {
                    samples += batch.len() as u64;
                    send(batch)?;
                }
                Ok(())
            },
        )?;
        if let Some(t) = telemetry {
            t.finish()
                .with_context(|| format!("writing scenario {}'s telemetry", run.name))?;
        }
        let events = std::mem::take(
            &mut *events
                .lock()
                .map_err(|_| anyhow::anyhow!("alert collector poisoned"))?,
        );
        write_alerts(
            &args.out.join(format!("alerts-{}.jsonl", run.name)),
            &events,
        )?;
        let score = score::score(&truth, &events);
        let scored = args.out.join(format!("outcomes-{}.json", run.name));
        std::fs::write(
            &scored,
            serde_json::to_vec_pretty(&(&score.failures, &score.incidents))?,
        )
        .with_context(|| format!("writing {}", scored.display()))?;
        let wall_s = started.elapsed().as_secs_f64();
        eprintln!(
            "{}: {} samples, {} alert events, {} pages ({} false), {wall_s:.1} s",
            run.name,
            samples,
            events.len(),
            score.pages,
            score.false_pages
        );
        outcomes.push(Outcome {
            run,
            truth,
            score,
            samples,
            undecodable,
            rejected: summary.rejected,
            wall_s,
        });
    }
    let report = summary::Report::build(args.seed, sa.reduced, &outcomes);
    print!("{}", report.table());
    report.write(&args.out, &outcomes)?;
    eprintln!(
        "wrote {} and {}",
        args.out.join("report.md").display(),
        args.out.join("summary.json").display()
    );
    if !report.pass {
        let missed: Vec<&str> = report
            .targets
            .iter()
            .filter(|t| t.pass == Some(false))
            .map(|t| t.name)
            .collect();
        if sa.report_only {
            eprintln!("targets missed (report only): {}", missed.join(", "));
        } else {
            anyhow::bail!("targets missed: {}", missed.join(", "));
        }
    }
    Ok(())
}

/// `--telemetry`: the scenario's labels, and the file its ticks go to.
fn telemetry_files(
    out: &std::path::Path,
    run: &ScenarioRun,
    sim: &Simulator,
) -> anyhow::Result<Sink> {
    write_labels(sim, out, &format!("labels-{}", run.name))?;
    // Malformed messages have no Parquet row: a dirty run keeps its lines.
    let format = if run.config.dirty {
        SimFormat::Jsonl
    } else {
        SimFormat::Parquet
    };
    let name = format!("telemetry-{}.{}", run.name, format.extension());
    Sink::open(&out.join(name), format)
}

fn write_alerts(path: &std::path::Path, events: &[AlertEvent]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    for e in events {
        serde_json::to_writer(&mut w, e)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    Ok(())
}
