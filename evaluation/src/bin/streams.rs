//! `streams`: the stream benchmark of the anomaly grade (see
//! `evaluation::streams`). Generates the labelled corpus for the tuning and
//! the held-out seeds, runs every detector, picks one global threshold per
//! profile on the tuning seeds and reports it on the held-out ones.
//!
//! ```text
//! cargo run --release -p evaluation --bin streams -- --out DIR
//!     [--tune-seeds 1,2,3] [--holdout-seeds 101,102] [--per-family 6] [--search] [--unseen]
//!     [--fresh] [--third] [--fourth] [--fifth] [--sixth] [--seventh] [--eighth] [--no-differences] [--no-recurrence]
//!     [--no-known] [--lower X] [--companions N]
//! ```
//!
//! Writes `DIR/streams.md` (the tables) and `DIR/streams.json`. `--search`
//! also tunes the grader's settings on the tuning seeds (coordinate search
//! over the forest scores, which do not depend on them) and prints the best.
//! `--unseen` also scores the families no setting was tuned on
//! (`streams::unseen`) on the held-out seeds, at the thresholds chosen on
//! the tuning seeds, into `DIR/streams-unseen.md` and `.json`.
//! `--fresh` scores a second set no choice has looked at (`streams::fresh`)
//! into `DIR/streams-fresh.md` and `.json`; `--third` a third such set
//! (`streams::third`) into `DIR/streams-third.md`, `--fourth` a fourth
//! (`streams::fourth`, scored once after the memory of recurrences) into
//! `DIR/streams-fourth.md`, `--fifth` a fifth (`streams::fifth`, scored once
//! on 2026-12-07 with the grader unchanged) into `DIR/streams-fifth.md`,
//! `--sixth` a sixth (`streams::sixth`, written before the known states and
//! scored once after them, 2026-12-07) into `DIR/streams-sixth.md`,
//! `--seventh` a seventh (`streams::seventh`, whole-number and repeating
//! streams, written before the stuck values and scored once after them)
//! into `DIR/streams-seventh.md`, `--eighth` an eighth (`streams::eighth`,
//! unscored until the grade's next change is final) into
//! `DIR/streams-eighth.md`. `--no-differences` grades the
//! forest of the levels alone (the grader before 2026-12-06; `forewarn
//! score --no-differences`); `--no-recurrence` flags events that repeat a
//! recent one's shape too (`forewarn score --recurrence 0`, the grader
//! before 2026-12-06's second change); `--no-known` leaves out the known
//! states (`forewarn score --known-horizon 0`, the grader before
//! 2026-12-07); `--no-stuck` the stuck values (`forewarn score
//! --stuck-run 0`, before e7746f4).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use evaluation::streams::corpus::Stream;
use evaluation::streams::scoring::{self, PROFILES, Windows};
use evaluation::streams::{
    Line, Scored, best_threshold, companions, compare, corpus, detect, eighth, fifth, fourth,
    fresh, per_family, seventh, sixth, third, tune_thresholds, unseen,
};
use models::grading::GraderConfig;

const USAGE: &str = "usage: streams --out DIR [--tune-seeds 1,2,3] [--holdout-seeds 101,102] [--per-family 6] [--search] [--unseen] [--fresh] [--third] [--fourth] [--fifth] [--sixth] [--seventh] [--eighth]
               [--no-differences] [--no-recurrence] [--no-known] [--no-stuck] [--lower X]
               [--companions N]

The anomaly grade's stream benchmark: a labelled corpus of synthetic and
fleet-simulator streams, every detector run over it, one global threshold
per cost profile chosen on the tuning seeds and scored on the held-out ones.

  --out DIR          where streams.md and streams.json go (required)
  --tune-seeds S,..  seeds whose streams choose the thresholds (1,2,3)
  --holdout-seeds .. seeds scored at those thresholds (101,102)
  --per-family N     streams of each synthetic family per seed (6)
  --search           also tune the grader's settings on the tuning seeds
  --unseen           also score families no setting was tuned on
                     (streams-unseen.md and .json)
  --fresh            also score a second set of families no choice looked at
                     (streams-fresh.md and .json)
  --third            also score a third such set (streams-third.md and .json)
  --fourth           also score a fourth (streams-fourth.md and .json)
  --fifth            also score a fifth (streams-fifth.md and .json)
  --sixth            also score a sixth (streams-sixth.md and .json)
  --seventh          also score a seventh (streams-seventh.md and .json)
  --eighth           also score an eighth (streams-eighth.md and .json)
  --no-differences   the grade's forest sees each value alone, without its
                     change since the row before (forewarn score's
                     --no-differences)
  --no-recurrence    flag events that open on the shape of a recent one
                     too (forewarn score's --recurrence 0)
  --no-known         no memory of exact raw inputs: a row that repeats a
                     normal one may still open or hold an event (forewarn
                     score's --known-horizon 0)
  --no-stuck         no stuck values: a metric repeating its value far longer
                     than ever before opens no event (forewarn score's
                     --stuck-run 0)
  --lower X          the standing that opens an event, in deviations
                     (forewarn score's --lower; 2.5)
  --companions N     put N normal metrics beside every stream (a noisy sine,
                     a slow walk, in turn) and score the rows as forewarn score
                     scores several metrics: one forest, single rows (0)";

/// A corpus: `per_family` streams of each family for a seed.
type Corpus = fn(u64, usize) -> Vec<Stream>;

/// The sets never tuned on, in report order: flag, output name, corpus.
const SETS: [(&str, &str, Corpus); 8] = [
    ("--unseen", "streams-unseen", unseen::corpus),
    ("--fresh", "streams-fresh", fresh::corpus),
    ("--third", "streams-third", third::corpus),
    ("--fourth", "streams-fourth", fourth::corpus),
    ("--fifth", "streams-fifth", fifth::corpus),
    ("--sixth", "streams-sixth", sixth::corpus),
    ("--seventh", "streams-seventh", seventh::corpus),
    ("--eighth", "streams-eighth", eighth::corpus),
];

struct Args {
    out: PathBuf,
    tune: Vec<u64>,
    holdout: Vec<u64>,
    per_family: usize,
    search: bool,
    /// The later sets asked for, by flag (`SETS`).
    sets: Vec<&'static str>,
    no_differences: bool,
    no_recurrence: bool,
    no_known: bool,
    /// The grader's `lower` (standing that opens an event), when not the default.
    lower: Option<f64>,
    /// Normal companions beside every stream (0: the stream alone).
    companions: usize,
    no_stuck: bool,
}

fn seeds(flag: &str, v: Option<String>) -> Result<Vec<u64>, String> {
    let v = v.ok_or(format!("{flag} needs a value"))?;
    v.split(',')
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| format!("{flag}: not a seed: {s:?}"))
        })
        .collect()
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        out: PathBuf::new(),
        tune: vec![1, 2, 3],
        holdout: vec![101, 102],
        per_family: 6,
        search: false,
        sets: Vec::new(),
        no_differences: false,
        no_recurrence: false,
        no_known: false,
        lower: None,
        companions: 0,
        no_stuck: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if let Some(set) = SETS.iter().find(|s| s.0 == flag) {
            a.sets.push(set.0);
            continue;
        }
        match flag.as_str() {
            "--out" => a.out = it.next().ok_or("--out needs a directory")?.into(),
            "--tune-seeds" => a.tune = seeds(&flag, it.next())?,
            "--holdout-seeds" => a.holdout = seeds(&flag, it.next())?,
            "--per-family" => {
                a.per_family = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--per-family needs a number")?
            }
            "--search" => a.search = true,
            "--companions" => {
                a.companions = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--companions needs a number")?
            }
            "--no-differences" => a.no_differences = true,
            "--no-recurrence" => a.no_recurrence = true,
            "--no-known" => a.no_known = true,
            "--no-stuck" => a.no_stuck = true,
            "--lower" => {
                a.lower = Some(
                    it.next()
                        .and_then(|v| v.parse().ok())
                        .ok_or("--lower needs a number")?,
                )
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.out.as_os_str().is_empty() {
        return Err("--out DIR is required".into());
    }
    Ok(a)
}

fn run_seeds(
    seeds: &[u64],
    args: &Args,
    grading: &GraderConfig,
    make: Corpus,
) -> Result<Vec<Scored>, String> {
    let mut out = Vec::new();
    let n = args.companions;
    for &seed in seeds {
        for (i, stream) in make(seed, args.per_family).into_iter().enumerate() {
            let windows = Windows::of(stream.values.len(), &stream.events);
            let rows =
                companions::rows(&stream, n, seed.wrapping_mul(1_000).wrapping_add(i as u64));
            let outputs = detect::run_rows(&rows, 1 + n, windows.probation, grading)
                .map_err(|e| format!("{}: {e}", stream.name))?;
            out.push(Scored {
                stream,
                windows,
                outputs,
            });
        }
    }
    Ok(out)
}

/// Sum over the profiles of the best normalised score of `config`'s grades.
fn objective(runs: &[Scored], config: &GraderConfig) -> f64 {
    let grades: Vec<Vec<f64>> = runs
        .iter()
        .map(|r| detect::regrade(&r.outputs.normalised_scores, config))
        .collect();
    let outs: Vec<&[f64]> = grades.iter().map(Vec::as_slice).collect();
    let ws: Vec<&Windows> = runs.iter().map(|r| &r.windows).collect();
    PROFILES
        .iter()
        .map(|p| best_threshold(&outs, &ws, p).1)
        .sum()
}

/// Coordinate search over the grader's settings from the defaults.
fn search(runs: &[Scored]) -> GraderConfig {
    let mut best = GraderConfig::default();
    let mut best_score = objective(runs, &best);
    println!("search: defaults {best_score:.2}");
    type Set = fn(&mut GraderConfig, f64);
    let axes: [(&str, Set, &[f64]); 7] = [
        ("lower", |c, v| c.lower = v, &[2.0, 2.5, 3.0, 3.5, 4.0, 5.0]),
        (
            "upper_gap",
            |c, v| c.upper = c.lower + v,
            &[2.0, 4.0, 6.0, 10.0, 16.0],
        ),
        (
            "release",
            |c, v| c.release = v,
            &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5],
        ),
        (
            "repeat_rise",
            |c, v| c.repeat_rise = v,
            &[0.5, 1.0, 2.0, 4.0, 8.0, 1e9],
        ),
        (
            "score_decay",
            |c, v| c.score_decay = v,
            &[
                1.0 / 256.0,
                1.0 / 512.0,
                1.0 / 1024.0,
                1.0 / 2048.0,
                1.0 / 4096.0,
            ],
        ),
        (
            "min_deviation",
            |c, v| c.min_deviation = v,
            &[0.0, 0.02, 0.05, 0.1, 0.2],
        ),
        (
            "min_score",
            |c, v| c.min_score = v,
            &[0.0, 0.8, 1.0, 1.2, 1.5],
        ),
    ];
    for round in 0..2 {
        for (name, set, values) in &axes {
            for &v in *values {
                let mut c = best.clone();
                set(&mut c, v);
                if c.release > c.lower || c.validate().is_err() {
                    continue;
                }
                let s = objective(runs, &c);
                if s > best_score + 1e-9 {
                    println!("search round {round}: {name} = {v} -> {s:.2}");
                    best_score = s;
                    best = c;
                }
            }
        }
    }
    println!("search: best {best_score:.2} with {best:?}");
    best
}

fn main() -> ExitCode {
    if std::env::args().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("streams: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("streams: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    // Each `--no-…` flag turns its rule off; the rest are the defaults.
    let d = GraderConfig::default();
    let grading = GraderConfig {
        differences: !args.no_differences,
        recurrence: if args.no_recurrence {
            0.0
        } else {
            d.recurrence
        },
        lower: args.lower.unwrap_or(d.lower),
        known_horizon: if args.no_known { 0 } else { d.known_horizon },
        stuck_run: if args.no_stuck { 0 } else { d.stuck_run },
        ..d
    };
    let started = Instant::now();
    let tune = run_seeds(&args.tune, args, &grading, corpus::corpus)?;
    let holdout = run_seeds(&args.holdout, args, &grading, corpus::corpus)?;
    let rows: usize = tune
        .iter()
        .chain(&holdout)
        .map(|r| r.stream.values.len())
        .sum();
    println!(
        "{} tuning and {} held-out streams, {rows} rows, scored in {:.1} s",
        tune.len(),
        holdout.len(),
        started.elapsed().as_secs_f64()
    );
    if args.search {
        search(&tune);
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let tuned = tune_thresholds(&tune);
    let lines = compare(&tuned, &holdout);
    write(args, "streams", &lines, &render(&lines, &holdout))?;
    // The sets never tuned on, at the same thresholds.
    for (_, name, make) in SETS.iter().filter(|s| args.sets.contains(&s.0)) {
        let runs = run_seeds(&args.holdout, args, &grading, *make)?;
        let lines = compare(&tuned, &runs);
        write(args, name, &lines, &render(&lines, &runs))?;
    }
    println!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The tables of `lines` and, per family of `runs`, the standard profile's.
fn render(lines: &[Line], runs: &[Scored]) -> String {
    let mut md = String::from(
        "| detector | profile | threshold (tuning seeds) | tuning score | held-out score | held-out, own best threshold | held-out windows detected | held-out false positives |\n|---|---|---|---|---|---|---|---|\n",
    );
    for l in lines {
        md.push_str(&format!(
            "| {} | {} | {:.3} | {:.1} | {:.1} | {:.1} | {}/{} | {} |\n",
            l.detector,
            l.profile,
            l.threshold,
            l.tune_score,
            l.holdout_score,
            l.holdout_best,
            l.holdout_detected,
            l.holdout_windows,
            l.holdout_false_positives
        ));
    }
    md.push_str("\nPer family, held-out seeds, standard profile at the tuning threshold (detected/windows, false positives, score):\n\n| family |");
    for d in detect::DETECTORS {
        md.push_str(&format!(" {d} |"));
    }
    md.push_str("\n|---|---|---|---|\n");
    let standard: Vec<f64> = detect::DETECTORS
        .iter()
        .map(|d| {
            lines
                .iter()
                .find(|l| l.detector == *d && l.profile == "standard")
                .map_or(1.0, |l| l.threshold)
        })
        .collect();
    let fams: Vec<Vec<(String, scoring::Tally, usize)>> = detect::DETECTORS
        .iter()
        .zip(&standard)
        .map(|(d, th)| per_family(runs, d, *th))
        .collect();
    for (i, (family, _, n)) in fams[0].iter().enumerate() {
        md.push_str(&format!("| {family} |"));
        for f in &fams {
            let t = &f[i].1;
            let score = scoring::normalised(t, *n, &PROFILES[0]);
            md.push_str(&format!(
                " {}/{}, {}, {score:.1} |",
                t.detected, n, t.fp_count
            ));
        }
        md.push('\n');
    }
    md
}

/// Prints `md` and writes it and `lines` as `DIR/NAME.md` and `.json`.
fn write(args: &Args, name: &str, lines: &[Line], md: &str) -> Result<(), String> {
    print!("{md}");
    let md_path = args.out.join(format!("{name}.md"));
    std::fs::write(&md_path, md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    let json_path = args.out.join(format!("{name}.json"));
    let json = serde_json::to_string_pretty(lines).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json).map_err(|e| format!("{}: {e}", json_path.display()))?;
    println!("wrote {} and {}", md_path.display(), json_path.display());
    Ok(())
}
