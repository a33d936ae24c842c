//! `forewarn replay`: produces recorded telemetry into Kafka, in the
//! telemetry contract's native JSON, keyed by GPU UUID so each GPU's
//! samples stay ordered in one partition. By default one host's samples of
//! one instant travel as one JSON array (the efficient way, per the
//! contract); `--group rack` packs a whole rack's instant into one array
//! (for brokers that pay per record), `--group gpu` (or `--per-gpu`) sends
//! one sample per message. `--speed N` paces event time at N× real time
//! (0 = as fast as the broker takes it).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use features::Sample;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use crate::sources::{DeadLetters, file};
use crate::state::SharedState;

/// How samples are packed into messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Grouping {
    Gpu,
    Host,
    Rack,
}

/// Produce telemetry files into a Kafka topic.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Telemetry files (Parquet from `forewarn simulate`, JSON lines,
    /// dcgm-exporter text, nvidia-smi CSV); `-` is stdin.
    #[arg(long, required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Bootstrap brokers, host:port[,host:port].
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// Topic to produce to.
    #[arg(long, default_value = "telemetry")]
    pub topic: String,
    /// Event time per wall second (0 = as fast as possible).
    #[arg(long, default_value_t = 0.0)]
    pub speed: f64,
    /// What one message carries: `host` (one array per host and instant,
    /// what an exporter per host ships), `rack` (one array per rack and
    /// instant: fewer, larger records, for brokers whose cost is per
    /// record) or `gpu` (one sample per message).
    #[arg(long, value_enum, default_value_t = Grouping::Host)]
    pub group: Grouping,
    /// Same as `--group gpu`.
    #[arg(long, conflicts_with = "group")]
    pub per_gpu: bool,
    /// Extra librdkafka producer options, `key=value` (repeatable).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
}

pub fn run(args: &ReplayArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.speed >= 0.0 && args.speed.is_finite(),
        "--speed must be a finite number >= 0"
    );
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", &args.brokers)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "200000")
        .set("message.timeout.ms", "60000");
    for o in &args.options {
        let (k, v) = o
            .split_once('=')
            .with_context(|| format!("--option {o:?} is not key=value"))?;
        cfg.set(k, v);
    }
    let producer: ThreadedProducer<DefaultProducerContext> =
        cfg.create().context("creating the Kafka producer")?;
    let state = SharedState::new();
    let mut dead = DeadLetters::open(None)?;
    let progress = crate::progress::counter("samples produced");
    let started = Instant::now();
    let mut first_ts: Option<i64> = None;
    let (mut messages, mut samples) = (0u64, 0u64);
    let mut buf = Vec::with_capacity(64 * 1024);
    let grouping = if args.per_gpu {
        Grouping::Gpu
    } else {
        args.group
    };
    // A host's (rack's) arrays always carry the key of the first GPU seen
    // on it, so it stays in one partition even when an instant's samples
    // are split over two messages.
    let mut group_keys: std::collections::HashMap<String, String> = Default::default();
    file::read_inputs(&args.input, &state, &mut dead, |batch| {
        for group in group(batch, grouping) {
            let ts = group[0].ts_ms;
            if args.speed > 0.0 {
                let t0 = *first_ts.get_or_insert(ts);
                let due = Duration::from_secs_f64((ts - t0).max(0) as f64 / 1000.0 / args.speed);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            buf.clear();
            if group.len() == 1 {
                serde_json::to_writer(&mut buf, &group[0])?;
            } else {
                serde_json::to_writer(&mut buf, &group)?;
            }
            let key = match group_of(&group[0], grouping) {
                Some(g) => group_keys
                    .entry(g.to_owned())
                    .or_insert_with(|| group[0].gpu.to_string())
                    .as_str(),
                None => &group[0].gpu,
            };
            send(&producer, &args.topic, key.as_bytes(), &buf)?;
            messages += 1;
            samples += group.len() as u64;
            progress.set_position(samples);
        }
        Ok(())
    })?;
    producer
        .flush(Duration::from_secs(60))
        .context("flushing the producer (is the broker up?)")?;
    progress.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "produced {samples} samples in {messages} messages to {} in {secs:.1} s ({:.0} samples/s); {} undecodable records skipped",
        args.topic,
        samples as f64 / secs.max(1e-9),
        dead.count()
    );
    Ok(())
}

/// Sends, waiting while the local queue is full.
fn send(
    p: &ThreadedProducer<DefaultProducerContext>,
    topic: &str,
    key: &[u8],
    payload: &[u8],
) -> anyhow::Result<()> {
    let mut rec = BaseRecord::<[u8], [u8]>::to(topic)
        .key(key)
        .payload(payload);
    loop {
        match p.send(rec) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                rec = r;
                std::thread::sleep(Duration::from_millis(5));
            }
            Err((e, _)) => return Err(e).context("producing a message"),
        }
    }
}

/// The host or rack a sample travels with (`None`: alone).
fn group_of(s: &Sample, grouping: Grouping) -> Option<&str> {
    match grouping {
        Grouping::Gpu => None,
        Grouping::Host => s.topo.host.as_deref(),
        Grouping::Rack => s.topo.rack.as_deref(),
    }
}

/// Splits a batch into messages: per host (or rack) and instant, as
/// arrays, or per GPU.
fn group(batch: Vec<Sample>, grouping: Grouping) -> Vec<Vec<Sample>> {
    if grouping == Grouping::Gpu {
        return batch.into_iter().map(|s| vec![s]).collect();
    }
    let mut out: Vec<Vec<Sample>> = Vec::new();
    let mut open: BTreeMap<(i64, String), usize> = BTreeMap::new();
    for s in batch {
        match group_of(&s, grouping) {
            None => out.push(vec![s]),
            Some(g) => {
                let k = (s.ts_ms, g.to_owned());
                match open.get(&k) {
                    Some(&i) => out[i].push(s),
                    None => {
                        open.insert(k, out.len());
                        out.push(vec![s]);
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(gpu: &str, host: &str, rack: &str, ts_ms: i64) -> Sample {
        let mut s = Sample::new(gpu, ts_ms);
        s.topo.host = Some(host.into());
        s.topo.rack = Some(rack.into());
        s
    }

    #[test]
    fn samples_are_packed_per_instant_by_the_chosen_group() {
        let batch = || {
            vec![
                sample("GPU-a", "h1", "r1", 0),
                sample("GPU-b", "h1", "r1", 0),
                sample("GPU-c", "h2", "r1", 0),
                sample("GPU-d", "h3", "r2", 0),
                sample("GPU-a", "h1", "r1", 30_000),
            ]
        };
        let sizes = |g| group(batch(), g).iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(sizes(Grouping::Gpu), vec![1, 1, 1, 1, 1]);
        assert_eq!(sizes(Grouping::Host), vec![2, 1, 1, 1]);
        assert_eq!(sizes(Grouping::Rack), vec![3, 1, 1]);
    }
}
