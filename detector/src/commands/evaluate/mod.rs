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
//!
//! With `--challenger` it compares a new artifact with the one in service
//! instead and writes a verdict (`compare`, `verdict`).
//!
//! This module reads and scores the rows; the report itself is
//! `evaluation::model_report`, the scenario suite `scenario`.

mod args;
pub mod compare;
mod scenario;
pub mod verdict;

pub use args::{CompareArgs, EvaluateArgs};

use anyhow::Context;
use datasets::training::{self, Fates, Outcome};
use evaluation::model_report::{self, Event, ReportInput, Rows};
use models::failure::{FailureModel, INPUT_WIDTH, InputState};
use models::trend::TrendConfig;

/// Runs `forewarn evaluate`.
pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    if args.scenarios.scenario.is_some() {
        return scenario::run(args);
    }
    if let Some(c) = &args.compare.challenger {
        return compare::run(args, c);
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
        let data = training::Dataset::open(path, None, None)
            .with_context(|| format!("reading {}", path.display()))?;
        let fates = Fates::scan(&data, &labels, |_| {})
            .with_context(|| format!("reading {}", path.display()))?;
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
        let (mut gpus, mut hosts) = (fates.gpus.clone(), fates.hosts.clone());
        let each = |r: &training::RowRef<'_>| {
            n_rows += 1;
            if n_rows.is_multiple_of(65_536) {
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
            let p = [model.gbdt_probability(&x), model.baseline_probability(&x)];
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
        };
        data.for_each_row(&mut gpus, &mut hosts, None, true, each, |_| {})
            .with_context(|| format!("reading {}", path.display()))?;
        pb.finish_and_clear();
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let input = ReportInput {
        model_path,
        data: &args.data,
        out: &args.out,
        negative_rate: args.negative_rate,
        rows_read: n_rows,
    };
    let report = model_report::write(&input, &model, &rows, &events)?;
    let path = args.out.join("report.md");
    std::fs::write(&path, &report).with_context(|| format!("writing {}", path.display()))?;
    println!("{report}");
    eprintln!("wrote {}", path.display());
    Ok(())
}
