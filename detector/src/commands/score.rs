//! `forewarn score`: offline anomaly scoring of a telemetry CSV with the random
//! cut forest and its calibration (models::rcf), one output row per input row.
//!
//! Reads a header plus rows (file or stdin), streams `timestamp,grade,score,
//! attribution` to stdout or a file. Bad rows never stop the run: they are
//! reported on stderr with their line number and scored as missing values.
//! The CSV reader is hand-written (quoted fields with `""` escapes, no
//! multi-line fields) to keep the binary's dependencies unchanged.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use models::calibration::ThresholderConfig;
use models::rcf::{Direction, Forest, ThresholdedForest, reason_label};

/// Bad rows reported individually before only counting them.
const MAX_REPORTED_BAD_ROWS: usize = 100;
/// Rows per batch handed from the reader thread to the scorer; progress is
/// updated once per batch (updating per row would cost more than scoring).
const BATCH_ROWS: usize = 4096;
/// Batches parsed ahead of the scorer.
const BATCHES_AHEAD: usize = 4;

/// Score a CSV of telemetry: one `timestamp,grade,score,attribution` line per row.
///
/// Output columns: `grade` is the calibrated anomaly grade in [0, 1] (0 during
/// warm-up and for ordinary rows; > 0 means flagged), `score` the raw forest
/// score (about 1 for ordinary rows, 0 during warm-up) and `attribution` the
/// metric and direction that explain most of the score, written
/// `<column>_high` or `<column>_low` (empty during warm-up).
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
    /// Target fraction of ordinary rows flagged.
    #[arg(long, default_value_t = 0.005)]
    pub false_positive_rate: f64,
    /// Scores seen before anything is flagged.
    #[arg(long, default_value_t = 256)]
    pub warmup: usize,
    /// Recent scores the threshold quantile is computed over.
    #[arg(long, default_value_t = 2048)]
    pub window: usize,
    /// Scores at or below this are never flagged.
    #[arg(long, default_value_t = 0.0)]
    pub min_score: f64,
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
        BufReader::with_capacity(1 << 16, input),
        BufWriter::with_capacity(1 << 16, output),
        &mut io::stderr().lock(),
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

/// Rows parsed by the reader thread, in input order.
#[derive(Debug, Default)]
struct Batch {
    /// Timestamps, already quoted for output, back to back.
    ts: String,
    /// End of each row's timestamp in `ts`.
    ts_end: Vec<usize>,
    /// `metrics` values per row (NaN for missing or bad fields).
    values: Vec<f64>,
    /// Bad rows: index in the batch, line number, problem.
    bad: Vec<(usize, u64, String)>,
    /// Input bytes the batch covers (for the progress bar).
    bytes: u64,
}

/// Reads and parses rows on its own thread so that scoring, the bottleneck,
/// runs beside it (on the calling thread and the forest's tree-group threads).
fn read_batches<R: BufRead>(
    mut input: R,
    time_col: usize,
    cols: &[usize],
    tx: &mpsc::SyncSender<Result<Batch>>,
) {
    let mut line = String::new();
    let mut fields = Vec::new();
    let mut values = vec![0.0f64; cols.len()];
    let mut line_no: u64 = 1;
    loop {
        let mut batch = Batch::default();
        while batch.ts_end.len() < BATCH_ROWS {
            line.clear();
            let n = match input.read_line(&mut line).context("failed to read input") {
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            if n == 0 {
                break;
            }
            line_no += 1;
            batch.bytes += n as u64;
            let text = trim_newline(&line);
            if let Some(problem) = parse_row(text, &mut fields, time_col, cols, &mut values) {
                batch.bad.push((batch.ts_end.len(), line_no, problem));
            }
            let ts = fields.get(time_col).map(String::as_str).unwrap_or("");
            batch.ts.push_str(&quote_if_needed(ts));
            batch.ts_end.push(batch.ts.len());
            batch.values.extend_from_slice(&values);
        }
        let last = batch.ts_end.len() < BATCH_ROWS;
        if !batch.ts_end.is_empty() && tx.send(Ok(batch)).is_err() {
            return;
        }
        if last {
            return;
        }
    }
}

/// Scores every row of `input` to `output`; bad rows are reported to `errors`.
pub fn score_csv<R: BufRead + Send, W: Write>(
    args: &ScoreArgs,
    mut input: R,
    mut output: W,
    errors: &mut dyn Write,
    progress: Option<&ProgressBar>,
) -> Result<ScoreSummary> {
    let mut line = String::new();
    if input
        .read_line(&mut line)
        .context("failed to read the header")?
        == 0
    {
        bail!("input is empty: a header row is required");
    }
    let mut fields = Vec::new();
    split_csv(trim_newline(&line), &mut fields).context("failed to parse the header")?;
    let header: Vec<String> = fields.clone();
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
    writeln!(output, "timestamp,grade,score,attribution")?;

    let m = cols.len();
    let mut summary = ScoreSummary::default();
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = mpsc::sync_channel(BATCHES_AHEAD);
        let cols = &cols;
        scope.spawn(move || read_batches(input, time_col, cols, &tx));
        for batch in rx {
            let batch = batch?;
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
                writeln!(
                    output,
                    "{},{:.4},{:.4},{}",
                    &batch.ts[ts_start..ts_end],
                    verdict.grade,
                    verdict.score,
                    reason
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
    let shingle = args.shingle.unwrap_or(if metrics == 1 { 4 } else { 1 });
    let mut builder = Forest::builder()
        .trees(args.trees)
        .sample_size(args.sample_size)
        .input_dimensions(metrics)
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
    let calibration = ThresholderConfig {
        false_positive_rate: args.false_positive_rate,
        window: args.window,
        warmup: args.warmup,
        min_score: args.min_score,
    };
    ThresholdedForest::new(forest, calibration).context("invalid calibration parameters")
}

/// Parses one data row into `values` (NaN for missing or bad fields). Returns
/// a description of the problem if the row is bad.
fn parse_row(
    text: &str,
    fields: &mut Vec<String>,
    time_col: usize,
    cols: &[usize],
    values: &mut [f64],
) -> Option<String> {
    if let Err(e) = split_csv(text, fields) {
        values.fill(f64::NAN);
        fields.clear();
        return Some(e.to_string());
    }
    let needed = cols.iter().copied().chain([time_col]).max().unwrap_or(0);
    if fields.len() <= needed {
        values.fill(f64::NAN);
        return Some(format!(
            "expected at least {} fields, found {}",
            needed + 1,
            fields.len()
        ));
    }
    let mut problem = None;
    for (v, &c) in values.iter_mut().zip(cols) {
        let f = fields[c].trim();
        *v = if f.is_empty() {
            f64::NAN
        } else {
            match f.parse::<f64>() {
                Ok(x) => x,
                Err(_) => {
                    problem
                        .get_or_insert_with(|| format!("field {} is not a number: {f:?}", c + 1));
                    f64::NAN
                }
            }
        };
    }
    problem
}

fn trim_newline(s: &str) -> &str {
    s.strip_suffix('\n')
        .map(|s| s.strip_suffix('\r').unwrap_or(s))
        .unwrap_or(s)
}

/// Splits one CSV line into `out`, handling `"quoted, fields"` and `""`.
fn split_csv(line: &str, out: &mut Vec<String>) -> Result<()> {
    let mut i = 0;
    let mut n = 0;
    let bytes = line.as_bytes();
    loop {
        if out.len() <= n {
            out.push(String::new());
        }
        let field = &mut out[n];
        field.clear();
        n += 1;
        if bytes.get(i) == Some(&b'"') {
            i += 1;
            loop {
                match memchr_quote(&bytes[i..]) {
                    Some(j) => {
                        field.push_str(&line[i..i + j]);
                        i += j + 1;
                        if bytes.get(i) == Some(&b'"') {
                            field.push('"');
                            i += 1;
                        } else {
                            break;
                        }
                    }
                    None => bail!("unterminated quoted field"),
                }
            }
            match bytes.get(i) {
                None => break,
                Some(b',') => i += 1,
                Some(_) => bail!("unexpected text after a quoted field"),
            }
        } else {
            match bytes[i..].iter().position(|&b| b == b',') {
                Some(j) => {
                    field.push_str(&line[i..i + j]);
                    i += j + 1;
                }
                None => {
                    field.push_str(&line[i..]);
                    break;
                }
            }
        }
    }
    out.truncate(n);
    Ok(())
}

fn memchr_quote(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'"')
}

fn resolve_column(header: &[String], spec: &str) -> Result<usize> {
    if let Some(i) = header.iter().position(|h| h.trim() == spec) {
        return Ok(i);
    }
    match spec.parse::<usize>() {
        Ok(i) if i < header.len() => Ok(i),
        Ok(i) => bail!(
            "column index {i} is out of range: the header has {} columns",
            header.len()
        ),
        Err(_) => bail!("no column named {spec:?} in the header"),
    }
}

fn quote_if_needed(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ScoreArgs,
    }

    fn args(extra: &[&str]) -> ScoreArgs {
        let mut argv = vec!["score"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args
    }

    #[test]
    fn splits_quoted_fields() {
        let mut out = Vec::new();
        split_csv(r#"a,"b,c","d""e",,f"#, &mut out).expect("valid line");
        assert_eq!(out, vec!["a", "b,c", "d\"e", "", "f"]);
        assert!(split_csv(r#"a,"b"#, &mut out).is_err());
    }

    #[test]
    fn one_output_line_per_row_and_bad_rows_reported() {
        let mut csv = String::from("ts,cpu,\"mem temp\"\n");
        for t in 0..1200 {
            let (cpu, mem) = (
                50.0 + (t as f64 / 9.0).sin(),
                70.0 + (t as f64 / 13.0).cos(),
            );
            match t {
                500 => csv.push_str("500,oops,70\n"),
                501 => csv.push_str("501\n"),
                502 => csv.push_str("502,,70\n"),
                1100 => csv.push_str("1100,50,95\n"),
                _ => csv.push_str(&format!("{t},{cpu},{mem}\n")),
            }
        }
        let mut out = Vec::new();
        let mut err = Vec::new();
        let a = args(&["--trees", "20", "--warmup", "100", "--threads", "1"]);
        let s = score_csv(&a, csv.as_bytes(), &mut out, &mut err, None).expect("scores");
        // The tree groups on three threads write the same bytes.
        let (mut out3, mut err3) = (Vec::new(), Vec::new());
        let a3 = args(&["--trees", "20", "--warmup", "100", "--threads", "3"]);
        score_csv(&a3, csv.as_bytes(), &mut out3, &mut err3, None).expect("scores");
        assert!(out3 == out && err3 == err, "output depends on --threads");
        assert_eq!(s.rows, 1200);
        assert_eq!(s.bad_rows, 2);
        let out = String::from_utf8(out).expect("utf8");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 1201);
        assert_eq!(lines[0], "timestamp,grade,score,attribution");
        assert!(lines[1].starts_with("0,0.0000,0.0000,"));
        let spike = lines[1101];
        assert!(spike.ends_with(",mem temp_high"), "{spike}");
        assert!(!spike.starts_with("1100,0.0000"), "{spike}");
        let err = String::from_utf8(err).expect("utf8");
        assert!(
            err.contains("line 502:") && err.contains("line 503:"),
            "{err}"
        );
    }

    #[test]
    fn column_selection_by_name_and_index() {
        let header: Vec<String> = ["time", "a", "b"].iter().map(|s| s.to_string()).collect();
        assert_eq!(resolve_column(&header, "b").expect("by name"), 2);
        assert_eq!(resolve_column(&header, "1").expect("by index"), 1);
        assert!(resolve_column(&header, "7").is_err());
        assert!(resolve_column(&header, "zzz").is_err());
    }
}
