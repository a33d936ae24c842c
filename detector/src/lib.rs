//! # detector
//!
//! The glue crate and the `forewarn` binary: command line, configuration,
//! sources (Kafka, files, stdin, the built-in simulator), the sharded
//! pipeline, checkpoints, the REST API, metrics and tracing. It is the only
//! crate that knows rdkafka and serves HTTP.
//!
//! Layout, leaves first (`scripts/check-cycles.sh` keeps it acyclic):
//! - [`coverage`], [`metrics`], [`checkpoint`], [`priority`], [`health`]:
//!   depend on nothing else in the crate (health only on checkpoint's wall
//!   clock, metrics on coverage: which input signals the telemetry has).
//! - [`risk_table`] and [`state`]: the shared data REST reads (risk table,
//!   alert view, metrics, model status).
//! - [`export`]: Parquet exports of what the pipeline saw and decided.
//! - [`reload`]: loading failure models and handing them to the shards.
//! - [`pipeline`]: the sharded feature → model → alert stage and its handle.
//! - [`sources`]: simulator, files and Kafka, all decoding through
//!   `features::decode::Decoder`.
//! - [`config`]: the typed TOML configuration and its validation.
//! - [`api`]: the axum routes, with the OpenAPI document generated from them.
//! - [`cli`], [`commands`], [`progress`]: the command line, one module per
//!   command, progress bars that only draw on a terminal.
//!
//! Risk fusion and the hard-failure rules are `models::assess`; scenario
//! scoring and its plots are the `evaluation` crate.

pub mod api;
pub mod checkpoint;
pub mod cli;
pub mod commands;
pub mod config;
pub mod coverage;
pub mod export;
pub mod faults;
pub mod fleet;
pub mod gpu_view;
pub mod health;
pub mod metrics;
pub mod pipeline;
pub mod priority;
pub mod progress;
pub mod reload;
pub mod risk_index;
pub mod risk_table;
pub mod silence_file;
pub mod sources;
pub mod state;

/// Risk fusion and the hard-failure rules live in `models`; re-exported so
/// `crate::assess::…` paths keep working.
pub use models::assess;

/// Runs one parsed command line.
pub fn run_cli(cli: cli::Cli) -> anyhow::Result<()> {
    cli::init_tracing(&cli.global)?;
    match &cli.command {
        cli::Command::Simulate(args) => commands::simulate::run(args),
        cli::Command::Backtest(args) => commands::backtest::run(args),
        cli::Command::Serve(args) => commands::serve::run(args),
        cli::Command::Score(args) => commands::score::run(args),
        cli::Command::Features(args) => commands::features::run(args),
        cli::Command::Replay(args) => commands::replay::run(args),
        cli::Command::Train(args) => commands::train::run(args),
        cli::Command::Evaluate(args) => commands::evaluate::run(args),
        cli::Command::Config(args) => commands::config::run(args),
        cli::Command::Promote(args) => commands::promote::run(args),
    }
}
