//! The command tree. Each command's flags live with the command
//! (`commands::*::…Args`); this file only assembles them and holds the flags
//! every command shares (logging).

use clap::{Args, Parser, Subcommand};

/// forewarn watches a GPU fleet's DCGM telemetry and tells operators which
/// GPUs are failing or about to fail — early enough to drain them, quietly
/// enough that nobody mutes it.
#[derive(Debug, Parser)]
#[command(name = "forewarn", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every command.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Log filter in `tracing` syntax, e.g. `info` or `detector=debug,warn`.
    #[arg(long, global = true, env = "FOREWARN_LOG", default_value = "info")]
    pub log: String,
    /// Write logs as JSON lines (for log shippers) instead of text.
    #[arg(long, global = true)]
    pub log_json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service; with no config, on the built-in simulated fleet.
    Serve(crate::commands::serve::ServeArgs),
    /// Write a simulated GPU fleet's telemetry and ground-truth failure labels.
    Simulate(crate::commands::simulate::SimulateArgs),
    /// Score a CSV of metric streams with a random cut forest: grade, score, attribution per row.
    Score(crate::commands::score::ScoreArgs),
    /// Export workload-aware feature vectors of telemetry files to Parquet.
    Features(crate::commands::features::FeaturesArgs),
    /// Run the pipeline on telemetry files and write the alerts it would send.
    Backtest(crate::commands::backtest::BacktestArgs),
    /// Produce telemetry files into a Kafka topic (keyed by GPU UUID).
    Replay(crate::commands::replay::ReplayArgs),
    /// Train the failure model from feature exports and labels.
    Train(crate::commands::train::TrainArgs),
    /// Evaluate a failure model on feature exports (report and plots), or a
    /// challenger against the model in service (`--challenger`: a verdict).
    Evaluate(crate::commands::evaluate::EvaluateArgs),
    /// Check a config file and print the effective configuration.
    Config(crate::commands::config::ConfigArgs),
    /// Copy a challenger that won `evaluate --challenger` into the models directory.
    Promote(crate::commands::promote::PromoteArgs),
}

/// Sets up `tracing` to stderr, text or JSON.
pub fn init_tracing(g: &GlobalArgs) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&g.log)
        .map_err(|e| anyhow::anyhow!("--log {:?} is not a valid filter: {e}", g.log))?;
    // Colours only on a terminal: a log file or journald gets plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let result = if g.log_json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    // A second init (tests running several commands) keeps the first.
    drop(result);
    Ok(())
}
