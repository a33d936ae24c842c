//! `forewarn score`: offline anomaly scoring of a telemetry CSV with the random
//! cut forest and its thresholded grader (models::rcf, models::grading), one
//! output row per input row.
//!
//! Reads a header plus rows (file or stdin), streams `timestamp,grade,score,
//! attribution,state` to stdout or a file. Bad rows never stop the run: they are
//! reported on stderr with their line and column and scored as missing
//! values. [`reader`] parses the input (with the `csv` crate) on its own
//! thread; this module scores and writes.

mod reader;
#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use models::grading::GraderConfig;
use models::rcf::{Direction, Forest, ThresholdedForest, reason_label};

use reader::{Batch, csv_reader, quote_if_needed, read_batches, read_header, resolve_column};

/// Bad rows reported individually before only counting them.
const MAX_REPORTED_BAD_ROWS: usize = 100;
/// Batches parsed ahead of the scorer.
const BATCHES_AHEAD: usize = 4;

/// Score a CSV of telemetry: one `timestamp,grade,score,attribution,state`
/// line per row.
///
/// Output columns: `grade` is the anomaly grade, 0 for ordinary rows and in
/// [0.5, 1] for a flagged row (0.5 at `--lower` deviations above the running
/// mean score, 1 at `--upper`); it means the same on every stream, so one
/// threshold on it suits them all (on the stream benchmark the best single
/// cut was a grade of about 0.7: on white noise about 12 rows in 1,000 are
/// flagged, 0.1 in 1,000 at 0.7 or more). `score` is the raw forest score of the
/// normalised row (about 1 for ordinary rows, 0 while the forest fills) and
/// `attribution` the metric and direction that explain most of the score,
/// written `<column>_high` or `<column>_low` (empty during warm-up). `state`
/// is `warmup` (nothing is graded yet), `anomaly` (flagged: a new event, a
/// clear rise in one, or a metric stuck at one value far longer than it
/// ever sat before: grade 1, see `--stuck-run`), `event` (a repeat of an
/// open event, or the rest of a stuck run: grade 0),
/// `recurrence` (an event that opened on the shape of a recent one: a normal
/// pattern coming back, not flagged; see `--recurrence`) or `normal`.
///
/// Defaults suit server and sensor telemetry sampled every few seconds: AWS's
/// random-cut-forest defaults (50 trees, 256 samples, time decay
/// 1/(10*sample size), output after sample size/4), a shingle of 4 rows for a
/// single metric (so shape changes show) and 1 row for several metrics (the
/// metrics' joint values carry the signal; raise it for temporal patterns).
#[derive(clap::Args, Debug)]
pub struct ScoreArgs {
    /// Input CSV with a header row; `-` or absent reads stdin.
    #[arg(long, value_name = "PATH")]
    pub input: Option<PathBuf>,
    /// Output CSV; absent writes stdout.
    #[arg(long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Timestamp column, by header name or 0-based index.
    #[arg(long, value_name = "NAME|INDEX", default_value = "0")]
    pub time_col: String,
    /// Metric columns, comma-separated names or 0-based indices [default: every
    /// column except the timestamp].
    #[arg(long, value_name = "A,B,..", value_delimiter = ',')]
    pub cols: Vec<String>,
    /// Number of trees.
    #[arg(long, default_value_t = 50)]
    pub trees: usize,
    /// Points each tree keeps.
    #[arg(long, default_value_t = 256)]
    pub sample_size: usize,
    /// Rows per shingle [default: 4 for one metric, 1 for several].
    #[arg(long)]
    pub shingle: Option<usize>,
    /// Recency weighting rate of the samples [default: 1/(10*sample size)].
    #[arg(long)]
    pub time_decay: Option<f64>,
    /// Points stored before scores are reported [default: sample size/4].
    #[arg(long)]
    pub output_after: Option<usize>,
    // The grader's defaults are `GraderConfig::default()`'s, the settings
    // the stream benchmark chose and measures (one source for both).
    /// Scores graded before anything is flagged.
    #[arg(long, default_value_t = GraderConfig::default().warmup)]
    pub warmup: usize,
    /// Deviations above the running mean score that open an event (grade 0.5).
    #[arg(long, default_value_t = GraderConfig::default().lower)]
    pub lower: f64,
    /// Deviations above the running mean score for grade 1.
    #[arg(long, default_value_t = GraderConfig::default().upper)]
    pub upper: f64,
    /// Deviations below which an open event closes (hysteresis).
    #[arg(long, default_value_t = GraderConfig::default().release)]
    pub release: f64,
    /// Scores at or below this are never flagged.
    #[arg(long, default_value_t = GraderConfig::default().min_score)]
    pub min_score: f64,
    /// Decay of the running statistics of the scores and of each input
    /// [default: 1/1024].
    #[arg(long)]
    pub decay: Option<f64>,
    /// Feed the forest raw values instead of each metric normalised by its
    /// running mean and deviation.
    #[arg(long)]
    pub no_normalize: bool,
    /// Feed the forest each metric alone, without its change since the
    /// row before beside it (the default, which finds a jump on a
    /// wandering level; without it the forest has half the inputs and
    /// `score` ran 15–25 % faster on three metrics).
    #[arg(long)]
    pub no_differences: bool,
    /// An event that opens on the shape of one opened in the last
    /// `--recurrence-horizon` rows, within this mean distance (deviations
    /// per forest input), is a normal pattern coming back (a counter's
    /// reset, a daily job, a switch between known states) and is not
    /// flagged; 0 flags every event [default: 0.25].
    #[arg(long)]
    pub recurrence: Option<f64>,
    /// Rows an opened event's shape is remembered [default: 3000].
    #[arg(long)]
    pub recurrence_horizon: Option<u64>,
    /// Rows each raw input (the rows of a shingle, before normalisation)
    /// is remembered exactly: a row that repeats one seen on a normal row
    /// ends an open event, one that repeats an earlier event's row opens
    /// none (on a stream that sat at one value, the first other value
    /// moves the normaliser and the old value then reads as new); 0 turns
    /// it off [default: 3000; at most 100000].
    #[arg(long)]
    pub known_horizon: Option<u64>,
    /// A metric that repeats its last value for at least this many rows,
    /// and for `--stuck-factor` times its longest earlier run, is stuck (a
    /// frozen sensor reports ordinary values: only the run is new): an
    /// event at grade 1, attributed to that metric, held while the value
    /// holds. A metric that has changed value fewer than 16 times is never
    /// stuck; 0 turns it off [default: 8].
    #[arg(long)]
    pub stuck_run: Option<u32>,
    /// How many times its longest earlier run a metric must repeat a value
    /// to be stuck [default: 2].
    #[arg(long)]
    pub stuck_factor: Option<f64>,
    /// Tree nodes holding at least this many distinct points cache their
    /// bounding box (more memory, fewer leaf scans; scores do not change).
    #[arg(long, default_value_t = 6)]
    pub box_cache_min_mass: usize,
    /// Random seed; the same seed and input give identical output.
    #[arg(long, default_value_t = 17)]
    pub seed: u64,
    /// Threads the trees are split over [default: the machine's cores]. The
    /// output is identical for any value.
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Counts reported at the end of a run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScoreSummary {
    pub rows: u64,
    pub bad_rows: u64,
    pub flagged: u64,
}

pub fn run(args: &ScoreArgs) -> Result<()> {
    let (input, total_bytes): (Box<dyn Read + Send>, Option<u64>) = match &args.input {
        Some(p) if p.as_os_str() != "-" => {
            let f =
                File::open(p).with_context(|| format!("failed to open input {}", p.display()))?;
            let len = f.metadata().ok().map(|m| m.len());
            (Box::new(f), len)
        }
        _ => (Box::new(io::stdin()), None),
    };
    let output: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(
            File::create(p).with_context(|| format!("failed to create output {}", p.display()))?,
        ),
        None => Box::new(io::stdout().lock()),
    };
    let progress = io::stderr()
        .is_terminal()
        .then(|| progress_bar(total_bytes));
    let summary = score_csv(
        args,
        input,
        BufWriter::with_capacity(1 << 16, output),
        // Locked per report, not for the run: a lock held throughout
        // would block any other thread's write to stderr until the end.
        &mut io::stderr(),
        progress.as_ref(),
    )?;
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    if summary.bad_rows > 0 {
        eprintln!(
            "{} of {} rows were bad and scored as missing",
            summary.bad_rows, summary.rows
        );
    }
    eprintln!(
        "scored {} row{}: {} flagged (state=anomaly)",
        summary.rows,
        if summary.rows == 1 { "" } else { "s" },
        summary.flagged
    );
    Ok(())
}

fn progress_bar(total_bytes: Option<u64>) -> ProgressBar {
    match total_bytes {
        Some(n) => {
            let pb = ProgressBar::new(n);
            let style =
                ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg} ({eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar());
            pb.set_style(style);
            pb
        }
        None => ProgressBar::new_spinner(),
    }
}

/// Scores every row of `input` to `output`; bad rows are reported to `errors`.
pub fn score_csv<R: Read + Send, W: Write>(
    args: &ScoreArgs,
    input: R,
    mut output: W,
    errors: &mut dyn Write,
    progress: Option<&ProgressBar>,
) -> Result<ScoreSummary> {
    let mut rdr = csv_reader(input);
    let header = read_header(&mut rdr)?;
    let time_col = resolve_column(&header, &args.time_col).context("invalid --time-col")?;
    let cols: Vec<usize> = if args.cols.is_empty() {
        (0..header.len()).filter(|&i| i != time_col).collect()
    } else {
        args.cols
            .iter()
            .map(|c| resolve_column(&header, c.trim()))
            .collect::<Result<_>>()
            .context("invalid --cols")?
    };
    if cols.is_empty() {
        bail!("no metric columns: the input has only a timestamp column");
    }
    let mut detector = build_detector(args, cols.len())?;
    let labels: Vec<[String; 2]> = cols
        .iter()
        .map(|&c| {
            let name = &header[c];
            [
                quote_if_needed(&reason_label(name, Direction::High)).into_owned(),
                quote_if_needed(&reason_label(name, Direction::Low)).into_owned(),
            ]
        })
        .collect();
    writeln!(output, "timestamp,grade,score,attribution,state")?;

    let m = cols.len();
    let mut summary = ScoreSummary::default();
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = mpsc::sync_channel(BATCHES_AHEAD);
        let (header, cols) = (&header, &cols);
        scope.spawn(move || read_batches(rdr, header, time_col, cols, &tx));
        for batch in rx {
            let batch: Batch = batch?;
            let rows: Vec<&[f64]> = batch.values.chunks_exact(m).collect();
            let verdicts = detector.process_batch(&rows).context("scoring failed")?;
            let mut bad = batch.bad.iter().peekable();
            let mut ts_start = 0;
            for ((i, &ts_end), verdict) in batch.ts_end.iter().enumerate().zip(verdicts) {
                if let Some((_, line_no, problem)) = bad.next_if(|b| b.0 == i) {
                    summary.bad_rows += 1;
                    if summary.bad_rows <= MAX_REPORTED_BAD_ROWS as u64 {
                        writeln!(errors, "line {line_no}: {problem}; scored as missing")?;
                    }
                }
                summary.rows += 1;
                summary.flagged += u64::from(verdict.is_anomaly);
                let reason = if verdict.score > 0.0 {
                    verdict
                        .explanation()
                        .map(|e| {
                            labels[e.metric][usize::from(e.direction == Direction::Low)].as_str()
                        })
                        .unwrap_or("")
                } else {
                    ""
                };
                let state = if verdict.warming_up {
                    "warmup"
                } else if verdict.is_anomaly {
                    "anomaly"
                } else if verdict.in_event && verdict.event_grade == 0.0 {
                    // Open but never flagged: a recurrence.
                    "recurrence"
                } else if verdict.in_event {
                    "event"
                } else {
                    "normal"
                };
                writeln!(
                    output,
                    "{},{:.4},{:.4},{},{}",
                    &batch.ts[ts_start..ts_end],
                    verdict.grade,
                    verdict.score,
                    reason,
                    state
                )?;
                ts_start = ts_end;
            }
            if let Some(pb) = progress {
                pb.inc(batch.bytes);
                pb.set_message(format!(
                    "{} rows, {} flagged",
                    summary.rows, summary.flagged
                ));
            }
        }
        Ok(())
    })?;
    output.flush().context("failed to write output")?;
    Ok(summary)
}

fn build_detector(args: &ScoreArgs, metrics: usize) -> Result<ThresholdedForest> {
    let defaults = GraderConfig::default();
    let grading = GraderConfig {
        normalize_inputs: !args.no_normalize,
        differences: !args.no_differences,
        input_decay: args.decay.unwrap_or(defaults.input_decay),
        score_decay: args.decay.unwrap_or(defaults.score_decay),
        warmup: args.warmup,
        lower: args.lower,
        upper: args.upper,
        release: args.release,
        min_score: args.min_score,
        recurrence: args.recurrence.unwrap_or(defaults.recurrence),
        recurrence_horizon: args
            .recurrence_horizon
            .unwrap_or(defaults.recurrence_horizon),
        known_horizon: args.known_horizon.unwrap_or(defaults.known_horizon),
        stuck_run: args.stuck_run.unwrap_or(defaults.stuck_run),
        stuck_factor: args.stuck_factor.unwrap_or(defaults.stuck_factor),
        ..defaults
    };
    let shingle = args.shingle.unwrap_or(if metrics == 1 { 4 } else { 1 });
    let mut builder = Forest::builder()
        .trees(args.trees)
        .sample_size(args.sample_size)
        .input_dimensions(grading.forest_dimensions(metrics))
        .shingle_size(shingle)
        .box_cache_min_mass(args.box_cache_min_mass)
        .threads(args.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, |n| usize::from(n).min(256))
        }))
        .seed(args.seed);
    if let Some(d) = args.time_decay {
        builder = builder.time_decay(d);
    }
    if let Some(n) = args.output_after {
        builder = builder.output_after(n);
    }
    let forest = builder.build().context("invalid forest parameters")?;
    ThresholdedForest::new(forest, grading).context("invalid grading parameters")
}
