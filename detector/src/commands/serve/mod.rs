//! `forewarn serve`: the service. Sources feed the sharded pipeline; the
//! alert thread routes state changes through the durable outbox to the
//! receivers; REST serves the published risk table. With no config it runs
//! the embedded demo: a simulated fleet streaming faster than real time,
//! REST on 127.0.0.1:8080, alerts to the console and `forewarn-alerts.jsonl`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use alerts::{AlertRouter, AlertSystem};
use anyhow::Context;
use clap::Args;
use datasets::simulator::SimConfig;
use tokio_util::sync::CancellationToken;

use crate::api::{Admin, AppState, Delivery};
use crate::checkpoint::Offsets;
use crate::config::{Config, RawConfig, SourceKind};
use crate::pipeline::Pipeline;
use crate::reload::ModelSlot;
use crate::sources::{DeadLetters, file, kafka, remote_write, simulator};

use crate::state::{SharedState, State};

mod fleet;
mod restore;
mod sink;
mod supervise;
use restore::restore_or_new;

/// Run the service (with no config: the built-in simulated fleet demo).
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Config file (see docs/forewarn.example.toml). Default: the demo.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Failure model artifact (`forewarn train --out …`); without one,
    /// risk comes from rules, trends and the anomaly forest.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// REST listen address (overrides the config).
    #[arg(long)]
    pub listen: Option<String>,
    /// Simulated fleet: event time per wall second (overrides the config).
    #[arg(long)]
    pub speed: Option<f64>,
    /// Simulated fleet: number of GPUs (overrides the config).
    #[arg(long)]
    pub gpus: Option<usize>,
    /// Shadow mode: run everything, but record the notifications every
    /// route would send in `alerts.shadow_file` (default
    /// `forewarn-shadow.jsonl`) instead of sending them. A single route can
    /// be shadowed in the config with `shadow = true`.
    #[arg(long)]
    pub shadow: bool,
}

fn load(args: &ServeArgs) -> anyhow::Result<Config> {
    let mut cfg = RawConfig::load(args.config.as_deref())?;
    if let Some(l) = &args.listen {
        cfg.listen = l
            .parse()
            .with_context(|| format!("--listen {l:?} is not an address:port"))?;
    }
    if let SourceKind::Simulator { speed, gpus, .. } = &mut cfg.source {
        if let Some(s) = args.speed {
            anyhow::ensure!(s >= 0.0 && s.is_finite(), "--speed must be >= 0");
            *speed = s;
        }
        if let Some(n) = args.gpus {
            anyhow::ensure!(
                (1..=200_000).contains(&n),
                "--gpus must be between 1 and 200000"
            );
            *gpus = n;
        }
    }
    Ok(cfg)
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let mut cfg = load(args)?;
    if let Some(m) = &args.model {
        cfg.model_file = Some(m.clone());
    }
    crate::priority::set_pipeline_nice(cfg.nice);
    if args.shadow {
        cfg.alerts.route.set_shadow_all();
        tracing::info!(
            file = %cfg.alerts.shadow_file.display(),
            "shadow mode: notifications are recorded, not sent"
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(serve(cfg))
}

pub(super) fn router_snapshot(r: &AlertRouter) -> anyhow::Result<Vec<u8>> {
    crate::checkpoint::to_cbor(&r.snapshot(), "the alert router")
}

async fn serve(mut cfg: Config) -> anyhow::Result<()> {
    // The REST port, then the source's own check, before anything else:
    // either failing stops the service before it has created anything on
    // disk (outbox, checkpoints, exports, dead letters, locks).
    let listener = crate::api::server::bind_listener(cfg.listen)
        .await
        .context("binding the REST port")?;
    if let SourceKind::Kafka(k) = &mut cfg.source {
        kafka::preflight(k).context("checking the Kafka source")?;
    }
    let admin = Admin::from_env(
        &cfg.token_env,
        cfg.read_token_env.as_deref(),
        cfg.labels_file.clone(),
    )?;
    let state = SharedState::new();
    let slot = Arc::new(ModelSlot::new(
        cfg.model_file.clone(),
        cfg.model_dir.clone(),
    ));
    let model = slot.initial(&state)?;
    // The one stop signal: SIGINT / SIGTERM cancel it; REST stops
    // accepting, the source returns at its next check, the pipeline drains
    // as its input closes (shards, then the alert stage and its sink), and
    // the delivery workers stop; what they had not sent yet stays in the
    // durable outbox for the next start.
    let shutdown = CancellationToken::new();
    let sys = AlertSystem::open(&cfg.alerts).context("opening the alert outbox and receivers")?;
    let receivers: Vec<String> = sys.sinks.iter().map(|s| s.name().to_owned()).collect();
    let workers: Vec<_> = sys
        .spawn_delivery(&shutdown)
        .into_iter()
        .zip(&receivers)
        .map(|(w, r)| supervise::watch_worker(state.clone(), r.clone(), w))
        .collect();
    let failure = supervise::Failure::default();
    tokio::spawn(supervise::supervise(
        state.clone(),
        sys.outbox.clone(),
        receivers.clone(),
        shutdown.clone(),
        failure.clone(),
    ));
    let delivery = Delivery {
        outbox: sys.outbox.clone(),
        receivers: receivers.clone().into(),
    };
    let unit_settings = crate::pipeline::PipelineConfig {
        shards: cfg.shards,
        features: cfg.features.clone(),
        seed: cfg.seed,
        failure_model: model.clone(),
    };
    let start = restore_or_new(&cfg, &sys, model)?;
    let resume = start.resume;
    let restored_seq = start.restored_seq;
    state.set_silences(start.stage.engine.silences().to_vec());
    if let Ok(mut rules) = state.inhibit_rules.write() {
        *rules = cfg.alerts.engine.inhibit_rules.clone();
    }
    state.set_clock(start.stage.clock_ms());
    // With a fleet topic the fleet's alert stage delivers, not this
    // instance's alert thread (docs/scaling.md).
    let fleet_topic = match &cfg.source {
        SourceKind::Kafka(k) => k.fleet_topic.clone().map(|t| (k.clone(), t)),
        _ => None,
    };
    let local_sink: Box<dyn crate::pipeline::AlertSink> = match &fleet_topic {
        Some(_) => Box::new(fleet::Nothing),
        None => Box::new(sink::router_sink(start.router, &state, &shutdown)),
    };
    let mut pipeline = Pipeline::start_with(
        start.shards,
        start.stage,
        local_sink,
        state.clone(),
        start.store,
        cfg.export.as_ref(),
    )?;
    pipeline.set_max_gpus(cfg.max_gpus);
    let mut fleet_threads = Vec::new();
    // Partition-aligned state (Kafka with checkpoints): docs/scaling.md.
    let units = match &cfg.partition_store {
        Some(root) => {
            use crate::checkpoint::partitions;
            let writer = partitions::instance_id(
                cfg.checkpoint_dir
                    .as_deref()
                    .unwrap_or(std::path::Path::new(".")),
            );
            let store = Arc::new(std::sync::Mutex::new(
                crate::checkpoint::PartitionStore::open_url(root)?
                    .with_writer(writer.clone())
                    .with_lease_ttl(partitions::lease_ttl(cfg.checkpoint_every)),
            ));
            pipeline.set_partition_store(store.clone());
            if let Some((k, topic)) = &fleet_topic {
                fleet_threads = fleet::start(
                    &cfg,
                    k,
                    topic,
                    &sys,
                    store.clone(),
                    &writer,
                    &state,
                    &mut pipeline,
                    &shutdown,
                )?;
            }
            tracing::info!(store = %root, "partition-aligned state: each Kafka partition's state is checkpointed and restored on its own");
            Some(kafka::PartitionUnits::new(
                store,
                unit_settings,
                restored_seq,
            ))
        }
        None => None,
    };
    // Kafka is live telemetry: nothing may be ahead of the wall clock. The
    // simulator runs ahead of it on purpose (--speed), files are history.
    pipeline.set_live(matches!(
        cfg.source,
        SourceKind::Kafka(_) | SourceKind::RemoteWrite | SourceKind::Scrape(_)
    ));
    let dead = DeadLetters::open(cfg.dead_letter_file.as_deref())?;
    let wired = remote_write::wire::wire(&cfg.source, &state, &dead, &shutdown);
    pipeline.set_dead_letters(dead.clone());
    let handle = pipeline.handle();
    let app = AppState {
        shared: state.clone(),
        admin: Arc::new(admin),
        pipeline: Some(handle.clone()),
        models: Some(slot.clone()),
        delivery: Some(delivery),
    };
    if let Some(every) = cfg.model_watch_every {
        let (st, sd) = (state.clone(), shutdown.clone());
        state.health.register(MODEL_WATCHER, false);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = sd.cancelled() => break,
                }
                let (slot, st2, h) = (slot.clone(), st.clone(), handle.clone());
                // A refused artifact is reported by the slot itself (model
                // status); a panic while loading must not end the watcher.
                match tokio::task::spawn_blocking(move || slot.poll(&st2, &h)).await {
                    Ok(()) => st.health.up(MODEL_WATCHER),
                    Err(e) => st
                        .health
                        .degraded(MODEL_WATCHER, format!("a reload panicked: {e}")),
                }
            }
        });
    }
    tokio::spawn(cancel_on_signal(shutdown.clone()));

    state.health.register(SOURCE, true);
    let source = {
        let (sd, state, cfg) = (shutdown.clone(), state.clone(), cfg.clone());
        let rx = wired.rx;
        std::thread::Builder::new()
            .name("source".into())
            .spawn(move || -> anyhow::Result<()> {
                crate::priority::apply_to_current_thread();
                let _guard = crate::health::PanicGuard {
                    health: &state.health,
                    name: SOURCE.to_owned(),
                };
                let mut dead = dead;
                let result = run_source(
                    &cfg,
                    resume,
                    units,
                    &state,
                    &sd,
                    &mut dead,
                    &mut pipeline,
                    rx,
                )
                .and_then(|()| {
                    let (summary, _) = pipeline.finish()?;
                    tracing::info!(
                        samples = summary.samples,
                        gpus = summary.gpus,
                        alert_events = summary.alert_events,
                        "source finished"
                    );
                    Ok(())
                });
                if let Err(e) = &result {
                    // The supervisor sees this and stops the service.
                    state.health.down(SOURCE, format!("{e:#}"));
                }
                result
            })?
    };
    if !matches!(cfg.source, SourceKind::Kafka(_)) {
        // Kafka readiness follows consumer lag (the source sets it).
        state.set_ready(true);
    }

    state.health.register(REST, true);
    let mut router = crate::api::app(app);
    if let Some(rw) = wired.api {
        router = router.layer(axum::Extension(rw));
    }
    let served = crate::api::server::serve(listener, &cfg.api, router, shutdown.clone())
        .await
        .context("serving REST");
    if let Err(e) = &served {
        state.health.down(REST, format!("{e:#}"));
    }
    // REST may also have failed on its own: stop the rest with it.
    shutdown.cancel();
    let joined = tokio::task::spawn_blocking(move || source.join())
        .await
        .context("joining the source")?;
    let _ = tokio::task::spawn_blocking(move || {
        for t in fleet_threads {
            let _ = t.join();
        }
    })
    .await;
    for w in workers {
        let _ = w.await;
    }
    served?;
    let source_result = match joined {
        Ok(r) => r,
        Err(_) => Err(anyhow::anyhow!("the source thread panicked")),
    };
    let failed = failure.lock().ok().and_then(|f| f.clone());
    match (source_result, failed) {
        (Err(e), _) => Err(e),
        (Ok(()), Some(why)) => Err(anyhow::anyhow!("stopped because a component failed: {why}")),
        (Ok(()), None) => Ok(()),
    }
}

/// Component names in health (`crate::health`).
const SOURCE: &str = "source";
const REST: &str = "rest";
const MODEL_WATCHER: &str = "model_watcher";

/// Cancels `shutdown` on Ctrl-C or SIGTERM.
async fn cancel_on_signal(shutdown: CancellationToken) {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted: shutting down"),
        () = term => tracing::info!("terminated: shutting down"),
        () = shutdown.cancelled() => return,
    }
    shutdown.cancel();
}

#[allow(clippy::too_many_arguments)]
fn run_source(
    cfg: &Config,
    resume: Offsets,
    units: Option<kafka::PartitionUnits>,
    state: &State,
    shutdown: &CancellationToken,
    dead: &mut DeadLetters,
    pipeline: &mut Pipeline,
    queue: Option<std::sync::mpsc::Receiver<Vec<features::Sample>>>,
) -> anyhow::Result<()> {
    match &cfg.source {
        SourceKind::Simulator {
            gpus,
            seed,
            speed,
            interval_s,
        } => {
            let sim = SimConfig {
                gpus: *gpus,
                hours: 24.0 * 365.0,
                interval_s: *interval_s,
                seed: *seed,
                failure_rate_per_gpu_day: DEMO_FAILURE_RATE,
                ..SimConfig::default()
            };
            simulator::run(sim, *speed, &|| shutdown.is_cancelled(), |batch| {
                state
                    .metrics
                    .samples_in
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
                pipeline.send(batch)
            })?;
        }
        SourceKind::Files(paths) => {
            file::read_inputs(paths, state, dead, |batch| pipeline.send(batch))?;
        }
        SourceKind::Kafka(k) => {
            let policy = cfg
                .checkpoint_dir
                .as_ref()
                .map(|_| kafka::CheckpointPolicy {
                    every: cfg.checkpoint_every,
                    resume,
                    units,
                });
            kafka::run(k, policy, state, shutdown, dead, pipeline)?;
        }
        SourceKind::RemoteWrite | SourceKind::Scrape(_) => {
            let rx = queue.context("the source's queue was not set up")?;
            let assemble = matches!(cfg.source, SourceKind::RemoteWrite)
                .then_some(remote_write::ASSEMBLY_WAIT_MS);
            remote_write::drain(&rx, state, shutdown, pipeline, assemble)?;
        }
    }
    Ok(())
}

/// The demo fleet fails more often than a real one, so that a few minutes
/// of watching show every kind of alert.
const DEMO_FAILURE_RATE: f64 = 0.15;
