//! `serve` with a fleet topic (`source.fleet_topic`, see `crate::fleet`):
//! checks the topic, points the pipeline's alert thread at it and starts
//! the two readers every instance runs — the fleet view (REST's data) and
//! the candidate for the fleet alert stage (delivers through this
//! instance's outbox while it owns the stage).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use alerts::{AlertEngine, AlertEvent, AlertSystem};
use anyhow::Context;
use rdkafka::consumer::{BaseConsumer, Consumer};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::fleet::owner::{self, OwnerConfig};
use crate::fleet::publish::Publisher;
use crate::fleet::view;
use crate::pipeline::alerting::AlertStage;
use crate::pipeline::run::SharedPartitionStore;
use crate::pipeline::{AlertSink, Pipeline};
use crate::sources::kafka::KafkaSettings;
use crate::state::State;

/// The local alert thread's sink with a fleet topic: it judges nothing
/// itself (the fleet's alert stage delivers).
pub(super) struct Nothing;

impl AlertSink for Nothing {
    fn deliver(&mut self, _: &[AlertEvent], _: i64) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The stage owner's sink with the Parquet alert export beside it: what
/// the fleet's one alert stage delivers is what `export.alerts` records,
/// in the owner's export directory (a takeover continues in the new
/// owner's; events its predecessor delivered but had not yet confirmed are
/// delivered, and so exported, again).
struct Exporting {
    inner: Box<dyn AlertSink>,
    export: crate::export::AlertExports,
}

impl AlertSink for Exporting {
    fn deliver(&mut self, events: &[AlertEvent], now_ms: i64) -> anyhow::Result<()> {
        self.export.events(events);
        self.inner.deliver(events, now_ms)
    }

    fn finish(&mut self, now_ms: i64) -> anyhow::Result<()> {
        self.inner.finish(now_ms)
    }

    fn snapshot(&self) -> anyhow::Result<Vec<u8>> {
        self.inner.snapshot()
    }

    fn settled(&self) -> bool {
        self.inner.settled()
    }
}

/// Fails start-up unless `topic` exists with exactly one partition.
fn check_topic(kafka: &KafkaSettings, topic: &str) -> anyhow::Result<()> {
    let consumer: BaseConsumer = crate::sources::kafka::client_config(kafka)
        .set("statistics.interval.ms", "0")
        .create()
        .context("creating a client to check the fleet topic")?;
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .with_context(|| format!("reading the fleet topic {topic:?}'s metadata"))?;
    let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
        anyhow::bail!("source.fleet_topic {topic:?} does not exist: create it with one partition");
    };
    if let Some(e) = t.error() {
        anyhow::bail!(
            "source.fleet_topic {topic:?}: {} (create it with one partition)",
            rdkafka::types::RDKafkaErrorCode::from(e)
        );
    }
    anyhow::ensure!(
        t.partitions().len() == 1,
        "source.fleet_topic {topic:?} has {} partitions; the fleet's alert stage needs exactly one",
        t.partitions().len()
    );
    Ok(())
}

/// Starts the fleet view and stage threads; the pipeline publishes to the
/// topic from now on.
#[allow(clippy::too_many_arguments)]
pub(super) fn start(
    cfg: &Config,
    kafka: &KafkaSettings,
    topic: &str,
    sys: &AlertSystem,
    store: SharedPartitionStore,
    instance: &str,
    state: &State,
    pipeline: &mut Pipeline,
    shutdown: &CancellationToken,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    check_topic(kafka, topic)?;
    let publisher = Arc::new(Publisher::open(kafka, topic, instance)?);
    pipeline.set_fleet(publisher.clone());
    let _ = state.metrics.fleet.set(publisher.delivery.clone());
    let mut threads = Vec::new();
    state.health.register(view::FLEET_VIEW, false);
    {
        let (k, t, st, sd) = (
            kafka.clone(),
            topic.to_owned(),
            state.clone(),
            shutdown.clone(),
        );
        threads.push(
            std::thread::Builder::new()
                .name("fleet-view".into())
                .spawn(move || {
                    if let Err(e) = view::run(&k, &t, &st, &sd) {
                        st.health.down(view::FLEET_VIEW, e.to_string());
                        tracing::error!(error = %e, "fleet view stopped");
                    }
                })
                .context("spawning the fleet view")?,
        );
    }
    let engine_cfg = cfg.alerts.engine.clone();
    let make_stage: owner::MakeStage = Box::new(move |bytes| {
        if bytes.is_empty() {
            Ok(AlertStage::new(AlertEngine::new(engine_cfg.clone())))
        } else {
            AlertStage::restore(engine_cfg.clone(), bytes)
        }
    });
    let (alerts_cfg, sinks, outbox) = (cfg.alerts.clone(), sys.sinks.clone(), sys.outbox.clone());
    let (st, sd) = (state.clone(), shutdown.clone());
    // The alert export under its own writer id (and lock): the pipeline's
    // alert writer stays idle with a fleet topic.
    let export = cfg.export.clone().map(|mut x| {
        x.instance = format!("{}-fleet", x.instance);
        x
    });
    let make_sink: owner::MakeSink = Box::new(move |bytes| {
        let router = super::restore::router_from(&alerts_cfg, &sinks, &outbox, bytes)?;
        let sink = Box::new(super::sink::router_sink(router, &st, &sd)) as Box<dyn AlertSink>;
        let Some(x) = &export else {
            return Ok(sink);
        };
        let mut w = crate::export::AlertExports::open(x)?;
        w.report_to(st.clone());
        Ok(Box::new(Exporting {
            inner: sink,
            export: w,
        }) as Box<dyn AlertSink>)
    });
    let oc = OwnerConfig {
        kafka: kafka.clone(),
        topic: topic.to_owned(),
        store,
        every: cfg.checkpoint_every,
        publisher: publisher.clone(),
        state: state.clone(),
        make_stage,
        make_sink,
    };
    let (st, sd) = (state.clone(), shutdown.clone());
    threads.push(
        std::thread::Builder::new()
            .name("fleet-stage".into())
            .spawn(move || {
                if let Err(e) = owner::run(oc, &sd) {
                    st.health.down(owner::FLEET_STAGE, format!("{e:#}"));
                    tracing::error!(error = format!("{e:#}"), "fleet alert stage stopped");
                }
                publisher.flush();
            })
            .context("spawning the fleet alert stage")?,
    );
    tracing::info!(
        topic,
        "fleet topic: one alert stage and one view for the whole group"
    );
    Ok(threads)
}
