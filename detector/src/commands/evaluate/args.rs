//! The flags of `forewarn evaluate`, apart from the command so that the
//! scenario suite and the model report can both read them.

use std::path::PathBuf;

use clap::Args;

/// Evaluate a failure model on feature exports, or (`--scenario`) the
/// whole pipeline on the scenario suite.
#[derive(Args, Debug)]
pub struct EvaluateArgs {
    /// The model artifact (`forewarn train --out …`). With `--scenario`:
    /// optional, loaded into the pipeline as `backtest --model` does.
    #[arg(long, required_unless_present = "scenario")]
    pub model: Option<PathBuf>,
    /// Feature exports to evaluate on (never used for training).
    #[arg(long, required_unless_present = "scenario", num_args = 1..)]
    pub data: Vec<PathBuf>,
    #[command(flatten)]
    pub scenarios: ScenarioArgs,
    /// Failure labels, one per data file or one for all.
    #[arg(long, num_args = 1..)]
    pub labels: Vec<PathBuf>,
    /// Report directory (report.md and PNGs; with `--scenario` also
    /// summary.json and each scenario's alerts).
    #[arg(long, default_value = "evaluation")]
    pub out: PathBuf,
    /// Fraction of negative rows sampled for row-level figures.
    #[arg(long, default_value_t = 0.05)]
    pub negative_rate: f64,
    /// Seed of the negative sampling; with `--scenario`, the suite seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
}

/// The scenario mode's flags (`--model`, `--out`, `--seed` are shared).
#[derive(Args, Debug, Default)]
pub struct ScenarioArgs {
    /// Run the scenario suite instead: a scenario name, a comma-separated
    /// list, or `all` (see `datasets::scenarios::NAMES`).
    #[arg(long)]
    pub scenario: Option<String>,
    /// Reduced sizes (64 GPUs, shorter runs): the CI gate.
    #[arg(long)]
    pub reduced: bool,
    /// Config file (pipeline, features, alert policy), as for `backtest`.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Shard threads (overrides the config).
    #[arg(long)]
    pub shards: Option<usize>,
    /// Report only: exit 0 even when a target is missed.
    #[arg(long)]
    pub report_only: bool,
}
