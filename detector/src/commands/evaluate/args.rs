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
    #[arg(long, required_unless_present_any = ["scenario", "challenger"])]
    pub model: Option<PathBuf>,
    /// Feature exports to evaluate on (never used for training): `forewarn
    /// features` files, or the service's export root / feature table.
    #[arg(long, required_unless_present = "scenario", num_args = 1..)]
    pub data: Vec<PathBuf>,
    #[command(flatten)]
    pub scenarios: ScenarioArgs,
    #[command(flatten)]
    pub compare: CompareArgs,
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

/// Champion / challenger (`--challenger`): compare a new artifact with the
/// one in service on the same held-back window and write a verdict.
#[derive(Args, Debug, Default)]
pub struct CompareArgs {
    /// The new artifact to judge against the champion.
    #[arg(long, conflicts_with_all = ["model", "scenario"])]
    pub challenger: Option<PathBuf>,
    /// The champion artifact. Default: the newest in --models-dir, else
    /// the built-in pipeline (its scores read from the export's scores
    /// table).
    #[arg(long, requires = "challenger")]
    pub champion: Option<PathBuf>,
    /// The service's `models.dir`: its newest artifact is the champion.
    #[arg(long, requires = "challenger")]
    pub models_dir: Option<PathBuf>,
    /// Window start: a time, a date or a duration before the newest export
    /// hour. Default: the challenger's held-out start (its time cut).
    #[arg(long, value_parser = crate::commands::train::read::parse_bound, requires = "challenger")]
    pub since: Option<crate::commands::train::read::TimeBound>,
    /// Window end (same forms). Default: the end of the data.
    #[arg(long, value_parser = crate::commands::train::read::parse_bound, requires = "challenger")]
    pub until: Option<crate::commands::train::read::TimeBound>,
    /// Operator labels (the service's `api.labels_file`).
    #[arg(long)]
    pub operator_labels: Option<PathBuf>,
    /// Do not take failure labels from the export's alerts table.
    #[arg(long)]
    pub no_alert_labels: bool,
    /// Where the verdict (JSON) goes.
    #[arg(long, default_value = "verdict.json")]
    pub verdict: PathBuf,
    /// PR-AUC gain the challenger needs (a tie keeps the champion).
    #[arg(long, default_value_t = 0.0)]
    pub min_gain: f64,
    /// Share of failures alarmed ≥ 1 h ahead the challenger may lose.
    #[arg(long, default_value_t = 0.05)]
    pub max_recall_loss: f64,
    /// Alarms per 1,000 GPU-days the challenger may raise, as a multiple
    /// of the champion's.
    #[arg(long, default_value_t = 1.5)]
    pub max_alarm_ratio: f64,
    /// Fraction of negative rows sampled for the PR-AUC.
    #[arg(long, default_value_t = 0.05)]
    pub compare_negative_rate: f64,
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
    /// Simulate telemetry without job labels (a dcgm-exporter with no
    /// scheduler mapping): how detection holds up with no job peers.
    #[arg(long)]
    pub no_job_labels: bool,
    /// Simulate job labels that name no workload (`job-…`, as Slurm job
    /// ids and many pod names do): workload phases then come from the
    /// load alone, while the job peers remain.
    #[arg(long, conflicts_with = "no_job_labels")]
    pub opaque_job_names: bool,
    /// Seconds between two samples of one GPU in the simulated fleets
    /// (default: each scenario's own, 30 s): how detection holds up at
    /// another exporter's cadence.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub interval: Option<u32>,
    /// Leave these DCGM fields out of every simulated sample (names as
    /// dcgm-exporter writes them, comma-separated or repeated): how
    /// detection holds up on a counters list without them, e.g.
    /// dcgm-exporter's default, which has no ECC or NVLink error counts.
    #[arg(long, value_delimiter = ',', value_name = "FIELD")]
    pub omit_field: Vec<String>,
    /// Mix dirty data into every scenario (as `simulate --dirty`: dropped
    /// samples, duplicates, small reorders, malformed messages), not only
    /// into `dirty_stream`.
    #[arg(long)]
    pub dirty: bool,
    /// Also write each scenario's telemetry exactly as the pipeline was fed
    /// it and its ground truth (`<out>/labels-<scenario>.csv` and
    /// `.parquet`, as `simulate` writes them, for `train`): `forewarn
    /// backtest --input` on that file gives the scenario's alerts again, to
    /// look into a result. Parquet (`telemetry-<scenario>.parquet`, ~35 B
    /// a sample: 93 MB for the full `random_precursors`); JSON lines for a
    /// dirty run, whose malformed messages have no row (`.jsonl`, ~1.4 KB
    /// a sample: 4 GB for the full `random_precursors --dirty`).
    #[arg(long)]
    pub telemetry: bool,
    /// GPUs per host in the simulated fleets (default 8; 4 for many PCIe
    /// servers): fewer GPUs share a host's air and its job.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=16))]
    pub gpus_per_host: Option<u8>,
    /// Hosts per rack in the simulated fleets (default 4: four 8-GPU
    /// servers, 32 GPUs to a rack). With `--gpus-per-host 1`, 32 keeps a
    /// rack's GPUs as many.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub hosts_per_rack: Option<u8>,
    /// Healthy GPUs' background errors in bursts of this mean size (as
    /// `simulate --background-burst`; default 1, one at a time): how the
    /// change tests hold up when healthy counts are overdispersed.
    #[arg(long, value_name = "MEAN")]
    pub background_burst: Option<f64>,
    /// Each host reports at its own offset within the interval, a little
    /// early or late each time (as `simulate --spread-scrapes`).
    #[arg(long)]
    pub spread_scrapes: bool,
    /// `random_precursors` only: each counter precursor grows from its
    /// GPU's own background to 5–500 times it at the failure, instead of to
    /// an absolute rate (a quiet GPU's precursor stays small in absolute
    /// terms): how detection holds on precursors that scale the GPU's own
    /// rate.
    #[arg(long)]
    pub relative_precursors: bool,
}
