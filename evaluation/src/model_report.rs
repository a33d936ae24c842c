//! The failure model's evaluation report: row-level figures (PR-AUC on
//! all rows and on precursor rows, Brier, precision and recall at the
//! operating point) and failure-level ones (alarmed ≥ 1 h ahead, lead
//! times, per kind), as Markdown with PNG plots. `forewarn evaluate`
//! scores the rows ([`Rows`], [`Event`]) and hands them here.

use models::stats::median;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use datasets::training::NO_PRECURSOR;
use models::failure::{FailureModel, metrics};

use crate::{EvalError, plots};

/// Kinds counted as HBM / ECC degradation.
const HBM_KINDS: [&str; 2] = ["hbm_ecc", "dbe"];

/// Scored rows: a seeded sample of negatives and every positive.
#[derive(Default)]
pub struct Rows {
    /// GBDT probabilities.
    pub pg: Vec<f64>,
    /// Logistic-baseline probabilities.
    pub pl: Vec<f64>,
    /// Labels (1: fails within the horizon).
    pub y: Vec<u8>,
    /// Weights undoing the negative sampling.
    pub w: Vec<f32>,
    /// Counted in the "precursor rows" view (every negative; positives at
    /// or after their failure's precursor onset).
    pub pre: Vec<bool>,
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
pub struct Event {
    pub kind: String,
    /// Hours of the first alarm before the failure, per model.
    pub lead: [Option<f64>; 2],
    /// Whether any row within the horizon lies ≥ 1 h before the failure.
    pub observable: bool,
}

/// What the report says about its inputs.
pub struct ReportInput<'a> {
    /// The model artifact's path.
    pub model_path: &'a Path,
    /// The feature exports evaluated on.
    pub data: &'a [PathBuf],
    /// Report directory (the PNGs go here).
    pub out: &'a Path,
    /// Fraction of negative rows sampled.
    pub negative_rate: f64,
    /// Rows read.
    pub rows_read: u64,
}

fn fmt_h(v: Option<f64>) -> String {
    v.map_or("–".into(), |h| format!("{h:.1} h"))
}

/// Draws the plots under `input.out` and returns the Markdown report.
pub fn write(
    input: &ReportInput<'_>,
    model: &FailureModel,
    rows: &Rows,
    events: &[Event],
) -> Result<String, EvalError> {
    let mut md = String::new();
    let m = &model.meta;
    let _ = writeln!(md, "# Failure model evaluation\n");
    let _ = writeln!(
        md,
        "Model `{}` (trained {} on {} rows, {} GPUs, {} failures; horizon {} h; {}; alarms by the {}). \
         Evaluated on {} ({} rows; {} failures).\n",
        input.model_path.display(),
        m.created,
        m.train_rows,
        m.gpus,
        m.failures,
        m.horizon_h,
        m.booster,
        match model.primary {
            models::failure::Primary::Gbdt => "GBDT",
            models::failure::Primary::Logistic => "logistic baseline",
        },
        input
            .data
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect::<Vec<_>>()
            .join(", "),
        input.rows_read,
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
        &input.out.join("pr_curve.png"),
        &[
            ("GBDT, precursor rows", &pre_curves[0], pre_ap[0]),
            ("logistic, precursor rows", &pre_curves[1], pre_ap[1]),
            ("GBDT, all rows", &curves[0], ap[0]),
            ("logistic, all rows", &curves[1], ap[1]),
        ],
    )?;
    plots::lead_histogram(&input.out.join("lead_time.png"), &leads, horizon)?;
    plots::kind_recall(&input.out.join("kind_recall.png"), &bars)?;
    let _ = writeln!(
        md,
        "\n![precision-recall](pr_curve.png)\n\n![lead time](lead_time.png)\n\n![recall per kind](kind_recall.png)\n\n\
         Row-level figures weight sampled negatives back to the full data (rate {}). \
         Failures without a precursor (`sudden_death`, `gpu_lost` with no label) are left out of \
         the ≥ 1 h figure; the hard rules own them.",
        input.negative_rate
    );
    Ok(md)
}
