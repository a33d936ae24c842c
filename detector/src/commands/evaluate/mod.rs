//! `forewarn evaluate`: runs a trained failure model (and its logistic
//! baseline) over feature exports it never saw and writes a Markdown report
//! with PNG plots: precision-recall curves, the lead-time histogram and
//! recall per failure kind.
//!
//! Every row is scored, in file order, with the same per-GPU trend state
//! the pipeline keeps. Row-level figures (PR-AUC, precision, recall) use
//! every positive and a seeded sample of negatives weighted back to the
//! full data; failure-level figures (alarmed ≥ 1 h ahead, lead time) use
//! every row of every failing GPU. A failure's lead time is the time from
//! the first alarm within the horizon before it to the failure.
//!
//! Two row-level PR-AUCs are reported. "All rows" is the literal
//! definition: every row within the horizon before any failure is positive,
//! including rows of failures with no precursor (`sudden_death`,
//! `gpu_lost`) and rows before a precursor began, which no model can tell
//! from a healthy GPU's; its ceiling is the share of positives that are
//! predictable at all. "Precursor rows" leaves those positives out (and
//! keeps every negative): positives are the rows within the horizon and
//! at or after the labelled precursor onset (all rows within the horizon
//! when the labels give no onset) of failures that have a precursor. The
//! report prints both, and the share of positives the second keeps.

mod plots;
mod scenario;
mod score;
mod summary;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use crate::stats::median;
use anyhow::Context;
use clap::Args;
use datasets::training::{self, Fates, Interner, Outcome};
use models::failure::{FailureModel, INPUT_WIDTH, InputState, metrics};
use models::trend::TrendConfig;

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
    pub scenarios: scenario::ScenarioArgs,
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

use training::NO_PRECURSOR;
/// Kinds counted as HBM / ECC degradation.
const HBM_KINDS: [&str; 2] = ["hbm_ecc", "dbe"];

#[derive(Default)]
struct Rows {
    pg: Vec<f64>,
    pl: Vec<f64>,
    y: Vec<u8>,
    w: Vec<f32>,
    /// Counted in the "precursor rows" view (every negative; positives at
    /// or after their failure's precursor onset).
    pre: Vec<bool>,
}

impl Rows {
    /// The "precursor rows" subset: (GBDT, logistic) scores, labels, weights.
    fn precursor_view(&self) -> (Vec<f64>, Vec<f64>, Vec<u8>, Vec<f32>) {
        let keep = |i: &usize| self.pre[*i];
        let idx: Vec<usize> = (0..self.y.len()).filter(keep).collect();
        (
            idx.iter().map(|i| self.pg[*i]).collect(),
            idx.iter().map(|i| self.pl[*i]).collect(),
            idx.iter().map(|i| self.y[*i]).collect(),
            idx.iter().map(|i| self.w[*i]).collect(),
        )
    }
}

/// One failure's outcome under both models.
struct Event {
    kind: String,
    /// Hours of the first alarm before the failure, per model.
    lead: [Option<f64>; 2],
    /// Whether any row within the horizon lies ≥ 1 h before the failure.
    observable: bool,
}

/// Runs `forewarn evaluate`.
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    if args.scenarios.scenario.is_some() {
        return scenario::run(args);
    }
    let model_path = args.model.as_deref().context("--model is required")?;
    let model = FailureModel::load(model_path)
        .with_context(|| format!("loading {}", model_path.display()))?;
    let horizon_ms = (model.meta.horizon_h * 3.6e6) as i64;
    let thr = [model.threshold, model.baseline_threshold];
    let tcfg = TrendConfig::default();
    let mut rows = Rows::default();
    let mut events: Vec<Event> = Vec::new();
    let mut n_rows = 0u64;
    for (i, path) in args.data.iter().enumerate() {
        let labels = match args.labels.get(i).or(if args.labels.len() == 1 {
            args.labels.first()
        } else {
            None
        }) {
            Some(l) => {
                datasets::labels::read(l).with_context(|| format!("reading {}", l.display()))?
            }
            None => Vec::new(),
        };
        let fates =
            Fates::scan(path, &labels).with_context(|| format!("reading {}", path.display()))?;
        let base = events.len();
        let mut event_of = vec![usize::MAX; fates.fates.len()];
        for (g, f) in fates.fates.iter().enumerate() {
            if f.failure_ms.is_some() {
                event_of[g] = events.len();
                events.push(Event {
                    kind: f.kind.clone().unwrap_or_else(|| "unknown".into()),
                    lead: [None, None],
                    observable: false,
                });
            }
        }
        let _ = base;
        let mut states: Vec<InputState> = vec![InputState::new(); fates.fates.len()];
        let mut x = [0f32; INPUT_WIDTH];
        let pb = crate::progress::bar(fates.rows, "rows");
        let (mut gpus, mut hosts) = (Interner::default(), Interner::default());
        training::for_each_row(path, &mut gpus, &mut hosts, None, |r| {
            n_rows += 1;
            if n_rows % 65_536 == 0 {
                pb.inc(65_536);
            }
            let g = r.gpu as usize;
            let (Some(fate), Some(st)) = (fates.fates.get(g), states.get_mut(g)) else {
                return;
            };
            let f = st.update(&tcfg, r.ts_ms, r.values);
            st.build(r.ts_ms, r.values, f.as_ref(), &mut x);
            let out = training::outcome(fate, r.ts_ms, horizon_ms);
            let (y, rate, lead_ms) = match out {
                Outcome::Positive { lead_ms } => (1u8, 1.0, lead_ms),
                Outcome::Negative => (0u8, args.negative_rate, 0),
                Outcome::Censored | Outcome::Failed => return,
            };
            let p = [model.probability(&x), model.baseline_probability(&x)];
            if y == 1 {
                let e = &mut events[event_of[g]];
                let lead_h = lead_ms as f64 / 3.6e6;
                if lead_h >= 1.0 {
                    e.observable = true;
                }
                for m in 0..2 {
                    if e.lead[m].is_none() && p[m] >= thr[m] {
                        e.lead[m] = Some(lead_h);
                    }
                }
            }
            let name = fates.gpus.names.get(g).map_or("", String::as_str);
            if training::unit_hash(args.seed, training::name_hash(name), r.ts_ms as u64) < rate {
                rows.pg.push(p[0]);
                rows.pl.push(p[1]);
                rows.y.push(y);
                rows.w.push((1.0 / rate) as f32);
                rows.pre.push(y == 0 || Fates::visible(fate, r.ts_ms));
            }
        })
        .with_context(|| format!("reading {}", path.display()))?;
        pb.finish_and_clear();
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let report = write_report(args, &model, &rows, &events, n_rows)?;
    let path = args.out.join("report.md");
    std::fs::write(&path, &report).with_context(|| format!("writing {}", path.display()))?;
    println!("{report}");
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn fmt_h(v: Option<f64>) -> String {
    v.map_or("–".into(), |h| format!("{h:.1} h"))
}

fn write_report(
    args: &EvaluateArgs,
    model: &FailureModel,
    rows: &Rows,
    events: &[Event],
    n_rows: u64,
) -> anyhow::Result<String> {
    let mut md = String::new();
    let m = &model.meta;
    let _ = writeln!(md, "# Failure model evaluation\n");
    let _ = writeln!(
        md,
        "Model `{}` (trained {} on {} rows, {} GPUs, {} failures; horizon {} h; {}). \
         Evaluated on {} ({} rows; {} failures).\n",
        args.model
            .as_deref()
            .unwrap_or(std::path::Path::new(""))
            .display(),
        m.created,
        m.train_rows,
        m.gpus,
        m.failures,
        m.horizon_h,
        m.booster,
        args.data
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect::<Vec<_>>()
            .join(", "),
        n_rows,
        events.len()
    );
    let curves = [
        metrics::pr_curve(&rows.pg, &rows.y, &rows.w),
        metrics::pr_curve(&rows.pl, &rows.y, &rows.w),
    ];
    let (ppg, ppl, py, pw) = rows.precursor_view();
    let pre_curves = [
        metrics::pr_curve(&ppg, &py, &pw),
        metrics::pr_curve(&ppl, &py, &pw),
    ];
    let pre_ap = [
        metrics::average_precision(&pre_curves[0]),
        metrics::average_precision(&pre_curves[1]),
    ];
    let pos_w = |y: &[u8], w: &[f32]| -> f64 {
        y.iter()
            .zip(w)
            .filter(|(y, _)| **y == 1)
            .map(|(_, w)| f64::from(*w))
            .sum()
    };
    let kept_share = pos_w(&py, &pw) / pos_w(&rows.y, &rows.w).max(1e-9);
    let names = ["GBDT", "logistic baseline (linfa)"];
    let thr = [model.threshold, model.baseline_threshold];
    let ap = [
        metrics::average_precision(&curves[0]),
        metrics::average_precision(&curves[1]),
    ];
    let _ = writeln!(
        md,
        "| model | PR-AUC, precursor rows | PR-AUC, all rows | Brier | threshold | precision | recall (rows) | failures with a precursor alarmed ≥ 1 h ahead | median lead, all | median lead, HBM / ECC |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
    let with_precursor: Vec<&Event> = events
        .iter()
        .filter(|e| e.observable && !NO_PRECURSOR.contains(&e.kind.as_str()))
        .collect();
    for k in 0..2 {
        let p = if k == 0 { &rows.pg } else { &rows.pl };
        let brier = metrics::brier(p, &rows.y, &rows.w);
        let at = curves[k]
            .iter()
            .rev()
            .find(|c| c.threshold >= thr[k])
            .copied();
        let hit = with_precursor
            .iter()
            .filter(|e| e.lead[k].is_some_and(|l| l >= 1.0))
            .count();
        let mut all: Vec<f64> = events.iter().filter_map(|e| e.lead[k]).collect();
        let mut hbm: Vec<f64> = events
            .iter()
            .filter(|e| HBM_KINDS.contains(&e.kind.as_str()))
            .filter_map(|e| e.lead[k])
            .collect();
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.3} | {:.4} | {:.4} | {:.3} | {:.3} | {hit} / {} ({:.0}%) | {} | {} |",
            names[k],
            pre_ap[k],
            ap[k],
            brier,
            thr[k],
            at.map_or(0.0, |a| a.precision),
            at.map_or(0.0, |a| a.recall),
            with_precursor.len(),
            100.0 * hit as f64 / with_precursor.len().max(1) as f64,
            fmt_h(median(&mut all)),
            fmt_h(median(&mut hbm)),
        );
    }
    // Per kind.
    let mut kinds: BTreeMap<&str, (usize, [usize; 2], Vec<f64>)> = BTreeMap::new();
    for e in events.iter().filter(|e| e.observable) {
        let k = kinds.entry(e.kind.as_str()).or_default();
        k.0 += 1;
        for m in 0..2 {
            if e.lead[m].is_some_and(|l| l >= 1.0) {
                k.1[m] += 1;
            }
        }
        if let Some(l) = e.lead[0] {
            k.2.push(l);
        }
    }
    let _ = writeln!(
        md,
        "\n## Per failure kind (alarmed ≥ 1 h ahead)\n\n| kind | failures | GBDT recall | logistic recall | GBDT median lead |\n|---|---|---|---|---|"
    );
    let mut bars = Vec::new();
    for (kind, (n, hit, leads)) in &mut kinds {
        let r = [
            hit[0] as f64 / (*n).max(1) as f64,
            hit[1] as f64 / (*n).max(1) as f64,
        ];
        let _ = writeln!(
            md,
            "| {kind} | {n} | {:.0}% | {:.0}% | {} |",
            100.0 * r[0],
            100.0 * r[1],
            fmt_h(median(leads))
        );
        bars.push(((*kind).to_string(), r[0], r[1]));
    }
    let leads: Vec<f64> = events.iter().filter_map(|e| e.lead[0]).collect();
    let horizon = model.meta.horizon_h.max(1.0);
    let _ = writeln!(
        md,
        "\nPrecursor rows keep {:.0}% of the positive rows (weighted); the rest lie before \
         their precursor began or belong to failures with none.",
        100.0 * kept_share
    );
    plots::pr_curves(
        &args.out.join("pr_curve.png"),
        &[
            ("GBDT, precursor rows", &pre_curves[0], pre_ap[0]),
            ("logistic, precursor rows", &pre_curves[1], pre_ap[1]),
            ("GBDT, all rows", &curves[0], ap[0]),
            ("logistic, all rows", &curves[1], ap[1]),
        ],
    )?;
    plots::lead_histogram(&args.out.join("lead_time.png"), &leads, horizon)?;
    plots::kind_recall(&args.out.join("kind_recall.png"), &bars)?;
    let _ = writeln!(
        md,
        "\n![precision-recall](pr_curve.png)\n\n![lead time](lead_time.png)\n\n![recall per kind](kind_recall.png)\n\n\
         Row-level figures weight sampled negatives back to the full data (rate {}). \
         Failures without a precursor (`sudden_death`, `gpu_lost` with no label) are left out of \
         the ≥ 1 h figure; the hard rules own them.",
        args.negative_rate
    );
    Ok(md)
}
