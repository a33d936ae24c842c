//! `forewarn replay`: produces recorded telemetry into Kafka, in the
//! telemetry contract's native JSON, keyed by rack by default (`--key`) so
//! that a rack's GPUs share a partition: each GPU's samples stay ordered,
//! and an instance that owns the partition sees the whole rack (host and
//! rack correlation, rack cooling). By default one host's samples of
//! one instant travel as one JSON array (the efficient way, per the
//! contract); `--group rack` packs a whole rack's instant into one array
//! (for brokers that pay per record), `--group gpu` (or `--per-gpu`) sends
//! one sample per message. `--speed N` paces event time at N× real time
//! (0 = as fast as the broker takes it).
//!
//! Brokers that do not answer are waited for with one WARN per backoff
//! step, and given up on after `--give-up-after` (exit non-zero, naming
//! them); a broker that refuses the TLS handshake or the credentials from
//! the start is given up on at once. Secret options come from the
//! environment or files (`--option-env`, `--option-file`), never needing
//! the command line.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use features::Sample;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};

use crate::sources::kafka::produce::{Patience, WatchCtx, Watched};
use crate::sources::kafka::{SecretRef, preflight, secrets};
use crate::sources::{DeadLetters, file};
use crate::state::SharedState;

/// The producer, with the context that watches its brokers.
type Prod = ThreadedProducer<WatchCtx>;

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
    /// The message key, which decides the partition: `rack` (the default:
    /// a rack's GPUs share a partition, so one instance judges the whole
    /// rack when forewarn is scaled out), `host`, or `gpu` (the GPU UUID:
    /// spreads load finest, but splits racks over partitions). A sample
    /// without a rack (host) label is keyed by its host (GPU).
    #[arg(long, value_enum, default_value_t = Grouping::Rack)]
    pub key: Grouping,
    /// Extra librdkafka producer options, `key=value` (repeatable).
    #[arg(long = "option", value_name = "KEY=VALUE")]
    pub options: Vec<String>,
    /// A librdkafka option whose value is an environment variable's, e.g.
    /// `sasl.password=KAFKA_PASSWORD` (repeatable).
    #[arg(long = "option-env", value_name = "KEY=VARIABLE")]
    pub option_env: Vec<String>,
    /// A librdkafka option whose value is a file's content (trimmed), e.g.
    /// `sasl.password=/run/secrets/kafka` (repeatable).
    #[arg(long = "option-file", value_name = "KEY=PATH")]
    pub option_file: Vec<String>,
    /// Give up (exit non-zero) when no broker has answered for this long,
    /// e.g. `30s`, `2m`; `0` waits forever.
    #[arg(long, default_value = "2m", value_parser = parse_give_up)]
    pub give_up_after: Duration,
}

fn parse_give_up(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    alerts::time::parse_duration(s).map_err(|e| e.to_string())
}

/// `key=value` of `--option` and its kin.
fn pair<'a>(flag: &str, o: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    o.split_once('=')
        .map(|(k, v)| (k.trim(), v))
        .with_context(|| format!("{flag} {:?} is not key=value", secrets::shown(o, o)))
}

/// The producer's options, secrets resolved, files checked.
fn producer_config(args: &ReplayArgs) -> anyhow::Result<(ClientConfig, BTreeMap<String, String>)> {
    let mut options = BTreeMap::new();
    for o in &args.options {
        let (k, v) = pair("--option", o)?;
        options.insert(k.to_owned(), v.to_owned());
    }
    let mut given = BTreeMap::new();
    for o in &args.option_env {
        let (k, v) = pair("--option-env", o)?;
        given.insert(k.to_owned(), SecretRef::Env { env: v.to_owned() });
    }
    for o in &args.option_file {
        let (k, v) = pair("--option-file", o)?;
        given.insert(k.to_owned(), SecretRef::File { file: v.into() });
    }
    secrets::resolve_into(&mut options, &given).map_err(|e| anyhow::anyhow!("{e}"))?;
    preflight::check_options(&options, "--option").map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut cfg = ClientConfig::new();
    // Messages wait out an outage as long as we do: giving up is decided
    // by broker contact, not by each message's own expiry.
    let expiry = if args.give_up_after.is_zero() {
        0
    } else {
        (args.give_up_after + Duration::from_secs(60)).as_millis()
    };
    cfg.set("bootstrap.servers", &args.brokers)
        .set("linger.ms", "5")
        .set("queue.buffering.max.messages", "200000")
        .set("message.timeout.ms", expiry.to_string())
        .set("statistics.interval.ms", "1000");
    for (k, v) in &options {
        cfg.set(k, v);
    }
    Ok((cfg, options))
}

pub fn run(args: &ReplayArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.speed >= 0.0 && args.speed.is_finite(),
        "--speed must be a finite number >= 0"
    );
    let (cfg, options) = producer_config(args)?;
    let watched = std::sync::Arc::new(Watched::default());
    let producer: Prod = cfg
        .create_with_context(WatchCtx(watched.clone()))
        .map_err(|e| {
            anyhow::anyhow!(
                "creating the Kafka producer: {}",
                secrets::scrub(&e.to_string(), &options)
            )
        })?;
    let give_up = (!args.give_up_after.is_zero()).then_some(args.give_up_after);
    let mut patience = Patience::new(&args.brokers, give_up);
    let mut last_check = Instant::now();
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
            let key = key_of(&group[0], coarser(args.key, grouping));
            send(&producer, &args.topic, key.as_bytes(), &buf, &mut || {
                if last_check.elapsed() < CHECK_EVERY {
                    return Ok(());
                }
                last_check = Instant::now();
                patience.check(&watched).map_err(|e| anyhow::anyhow!(e))
            })?;
            messages += 1;
            samples += group.len() as u64;
            progress.set_position(samples);
        }
        Ok(())
    })?;
    while producer.in_flight_count() > 0 {
        // Times out while the brokers are away; patience decides.
        let _ = producer.flush(CHECK_EVERY);
        patience.check(&watched).map_err(|e| anyhow::anyhow!(e))?;
    }
    progress.finish_and_clear();
    let (failed, why) = watched.failed();
    anyhow::ensure!(
        failed == 0,
        "{failed} of {messages} messages were not delivered to {} (first: {})",
        args.brokers,
        why.as_deref().unwrap_or("unknown")
    );
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "produced {samples} samples in {messages} messages to {} in {secs:.1} s ({:.0} samples/s); {} undecodable records skipped",
        args.topic,
        samples as f64 / secs.max(1e-9),
        dead.count()
    );
    Ok(())
}

/// How often broker contact is looked at while producing.
const CHECK_EVERY: Duration = Duration::from_millis(200);

/// Sends, waiting while the local queue is full; `check` may give up.
fn send(
    p: &Prod,
    topic: &str,
    key: &[u8],
    payload: &[u8],
    check: &mut dyn FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut rec = BaseRecord::<[u8], [u8]>::to(topic)
        .key(key)
        .payload(payload);
    loop {
        check()?;
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

/// The coarser of two levels: a message of one host's GPUs cannot be keyed
/// by GPU, so the key is never finer than the grouping.
fn coarser(a: Grouping, b: Grouping) -> Grouping {
    let rank = |g: Grouping| match g {
        Grouping::Gpu => 0,
        Grouping::Host => 1,
        Grouping::Rack => 2,
    };
    if rank(a) >= rank(b) { a } else { b }
}

/// The message key of a message whose first sample is `s`: its rack,
/// host or GPU, falling back to the next finer one where the label is
/// missing. A message never holds more than one rack (host) when grouped
/// that way, so with a key at least as coarse as the grouping the first
/// sample speaks for all of them.
fn key_of(s: &Sample, key: Grouping) -> &str {
    let rack = s.topo.rack.as_deref().filter(|r| !r.is_empty());
    let host = s.topo.host.as_deref().filter(|h| !h.is_empty());
    match key {
        Grouping::Rack => rack.or(host).unwrap_or(&s.gpu),
        Grouping::Host => host.unwrap_or(&s.gpu),
        Grouping::Gpu => &s.gpu,
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

    #[test]
    fn messages_are_keyed_by_rack_by_default_and_never_finer_than_their_grouping() {
        let s = sample("GPU-a", "h1", "r1", 0);
        assert_eq!(key_of(&s, coarser(Grouping::Rack, Grouping::Host)), "r1");
        assert_eq!(key_of(&s, coarser(Grouping::Host, Grouping::Gpu)), "h1");
        assert_eq!(key_of(&s, coarser(Grouping::Gpu, Grouping::Gpu)), "GPU-a");
        // A host's array cannot be keyed by one of its GPUs.
        assert_eq!(key_of(&s, coarser(Grouping::Gpu, Grouping::Host)), "h1");
        // Missing labels fall back to the next finer key.
        let mut bare = Sample::new("GPU-z", 0);
        bare.topo.host = Some("h9".into());
        assert_eq!(key_of(&bare, Grouping::Rack), "h9");
        bare.topo.host = None;
        assert_eq!(key_of(&bare, Grouping::Rack), "GPU-z");
        // The default is the rack.
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: ReplayArgs,
        }
        let cli = Cli::try_parse_from(["replay", "--input", "x.parquet"]).expect("parses");
        assert_eq!(cli.args.key, Grouping::Rack);
    }
}
