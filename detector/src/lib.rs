//! # detector
//!
//! The glue crate and the `forewarn` binary: command line, configuration,
//! sources (Kafka, files, stdin, the built-in simulator), the sharded
//! pipeline, checkpoints, the REST API, metrics and tracing. It is the only
//! crate that knows rdkafka and serves HTTP.
//!
//! Layout:
//! - [`cli`]: the clap command tree; one `Args` struct per command.
//! - [`commands`]: one module per command (`simulate`, …), each a `run(&Args)`.
//! - [`progress`]: progress bars that only draw on a terminal.

pub mod api;
pub mod checkpoint;
pub mod cli;
pub mod commands;
pub mod config;
pub mod export;
pub mod metrics;
pub mod pipeline;
pub mod priority;
pub mod progress;
pub mod reload;
pub mod risk_table;
pub mod sources;
pub mod state;
pub mod stats;

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
    }
}
