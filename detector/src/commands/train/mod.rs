//! `forewarn train`: builds training, calibration and validation sets from
//! the service's Parquet exports (an export root or its `features` table)
//! or `forewarn features` files, and labels from every source (`read`),
//! trains the gradient-boosted failure model and the logistic baseline,
//! calibrates both, picks their operating points, keeps the one that does
//! better on the validation split as the model that alarms (`--primary`)
//! and writes one artifact (`model.fwm`). Prints validation figures for
//! both models side by side, and the choice.

pub mod read;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use datasets::training::{self, ExampleSet, SetConfig, Sets};
use models::failure::sampling::{
    self, Choice, balanced_sample, balanced_weights, choose_primary, operating_point,
};
use models::failure::{
    Booster, Examples, FailureModel, Gbdt, GbdtParams, INPUT_WIDTH, Logistic, Platt, Primary,
    TrainingMeta,
};
use read::{LabelArgs, ReadReport, TimeBound};

/// Train the failure model from feature exports and labels.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// What to train on: the service's export root (`forewarn-export`), its
    /// feature table (`forewarn-export/features`) or a `forewarn features`
    /// file. Each argument is one fleet; an export's files are stitched
    /// into one history per GPU.
    #[arg(long, required = true, num_args = 1..)]
    pub data: Vec<PathBuf>,
    /// Only rows at or after this time: `2026-11-01T00:00:00Z`,
    /// `2026-11-01`, or a duration before the newest export hour (`30d`).
    #[arg(long, value_parser = read::parse_bound)]
    pub since: Option<TimeBound>,
    /// Only rows before this time (same forms as --since).
    #[arg(long, value_parser = read::parse_bound)]
    pub until: Option<TimeBound>,
    /// RMA / ticket labels (`gpu,ts,kind` CSV or the simulator's Parquet),
    /// one per --data or one for all; failures are also read off the
    /// telemetry and the export's alerts table.
    #[arg(long, num_args = 1..)]
    pub labels: Vec<PathBuf>,
    /// The service's operator labels (`api.labels_file`, what
    /// `POST /v1/labels` appends to): failures, and `false_alarm`, which
    /// cancels the alerts table's failure label of that GPU.
    #[arg(long)]
    pub operator_labels: Option<PathBuf>,
    /// Do not take failure labels from the export's alerts table.
    #[arg(long)]
    pub no_alert_labels: bool,
    /// About this many example rows at most (sampling rates are lowered to
    /// fit): bounds memory whatever the span read. 0: no cap.
    #[arg(long, default_value_t = 2_000_000)]
    pub max_rows: usize,
    /// Write what was read and the validation figures as JSON here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Predict failures this far ahead (`24h`, `90m`, `2d`).
    #[arg(long, default_value = "24h", value_parser = parse_horizon_ms)]
    pub horizon: i64,
    /// Output artifact.
    #[arg(long, default_value = "model.fwm")]
    pub out: PathBuf,
    /// Seed of every random choice (subsampling, splits, boosting).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fraction of negative examples kept (each stands for 1/rate).
    #[arg(long, default_value_t = 0.05)]
    pub negative_rate: f64,
    /// Fraction of positive examples kept (each stands for 1/rate):
    /// neighbouring rows of one failing GPU are near-copies.
    #[arg(long, default_value_t = 1.0)]
    pub positive_rate: f64,
    /// Train only on positives a model can see: leave out of the training
    /// split the rows of failures with no precursor and rows before a
    /// labelled precursor onset (calibration and validation keep them).
    #[arg(long)]
    pub skip_invisible: bool,
    /// Histogram bins per feature in the booster.
    #[arg(long, default_value_t = 64)]
    pub max_bin: u16,
    /// Which crate trains the trees: `forust` (fixed rounds, depth and
    /// learning rate) or `perpetual` (one budget, stops by itself).
    #[arg(long, value_enum, default_value_t = BoosterArg::Forust)]
    pub booster: BoosterArg,
    /// perpetual's complexity budget.
    #[arg(long, default_value_t = 0.5)]
    pub budget: f32,
    /// Boosting rounds (perpetual: at most).
    #[arg(long, default_value_t = 300)]
    pub iterations: usize,
    /// forust: learning rate.
    #[arg(long, default_value_t = 0.1)]
    pub learning_rate: f32,
    /// forust: tree depth.
    #[arg(long, default_value_t = 3)]
    pub max_depth: usize,
    /// forust: share of the training rows each tree sees.
    #[arg(long, default_value_t = 0.8)]
    pub subsample: f32,
    /// Where the train / held-out time cut lies, as a fraction of the span.
    #[arg(long, default_value_t = 0.5)]
    pub time_cut: f64,
    /// Which model alarms: `auto` keeps the one with the higher PR-AUC on
    /// the validation split (the GBDT on a tie); `gbdt` or `logistic`
    /// force it. Both are trained and stored either way.
    #[arg(long, value_enum, default_value_t = PrimaryArg::Auto)]
    pub primary: PrimaryArg,
    /// The model's share of the false-warning budget, per 1,000 GPU-days:
    /// the operating point is raised until its `failure_predicted`
    /// warnings on GPUs of the calibration split that do not fail stay
    /// within it (one per GPU and 6 h). The alert summary's budget for all
    /// warnings together is 10; the change tests and the forest use the
    /// rest.
    #[arg(long, default_value_t = 2.0)]
    pub warning_budget: f64,
}

/// `--primary`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrimaryArg {
    Auto,
    Gbdt,
    Logistic,
}

/// `--booster`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoosterArg {
    Forust,
    Perpetual,
}

pub use crate::reload::load_model;

/// `--horizon`: the one duration grammar (`24h`, `90m`, `2d`, `1h30m`);
/// a bare number is read as hours, as it used to be, with a warning.
pub fn parse_horizon_ms(s: &str) -> Result<i64, String> {
    use features::time::{LegacyUnit, duration_ms, parse_duration_or_legacy};
    let d =
        parse_duration_or_legacy(s, LegacyUnit::Hours, "--horizon").map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err(format!("{s:?}: must be positive"));
    }
    Ok(duration_ms(d))
}

/// Reads every `--data` argument (each one fleet) into sets; prints what
/// was read. Returns the sets, the reports and the start of the held-out
/// time of the first dataset.
pub fn load_sets(
    args: &TrainArgs,
    cfg: &SetConfig,
) -> anyhow::Result<(Sets, Vec<ReadReport>, Option<i64>)> {
    let mut all = Sets {
        train: ExampleSet::new(INPUT_WIDTH),
        calibration: ExampleSet::new(INPUT_WIDTH),
        validation: ExampleSet::new(INPUT_WIDTH),
    };
    let mut reports = Vec::new();
    let mut held_out_from = None;
    let label_args = LabelArgs {
        operator: args.operator_labels.as_deref(),
        alerts: !args.no_alert_labels,
    };
    for (i, path) in args.data.iter().enumerate() {
        let data = read::open_dataset(path, args.since, args.until)?;
        let ticket = args
            .labels
            .get(i)
            .or(if args.labels.len() == 1 {
                args.labels.first()
            } else {
                None
            })
            .map(PathBuf::as_path);
        let (fates, report) = read::scan(&data, &label_args, ticket)?;
        report.print();
        read::check(&fates, cfg, &data.name)?;
        let (neg, pos) = training::effective_rates(&fates, cfg);
        if neg < cfg.negative_rate || pos < cfg.positive_rate {
            eprintln!(
                "  --max-rows {}: sampling negatives at {neg:.4}, positives at {pos:.4}",
                cfg.max_rows.unwrap_or(0)
            );
        }
        held_out_from.get_or_insert(fates.cut_ms(cfg.time_cut.unwrap_or(0.5)));
        let sets = read::build(&data, &fates, cfg)?;
        for (dst, src) in [
            (&mut all.train, sets.train),
            (&mut all.calibration, sets.calibration),
            (&mut all.validation, sets.validation),
        ] {
            read::append(dst, src);
        }
        reports.push(report);
    }
    Ok((all, reports, held_out_from))
}

/// The sampling's view of a set built by `datasets`.
fn view(set: &ExampleSet) -> anyhow::Result<Examples<'_>> {
    Ok(Examples {
        width: set.width,
        x: &set.x,
        y: &set.y,
        weight: &set.weight,
        lead_h: &set.lead_h,
        visible: &set.visible,
        gpu: &set.gpu,
        ts_ms: &set.ts_ms,
    }
    .check()?)
}

/// Runs `forewarn train`.
pub fn run(args: &TrainArgs) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let cfg = SetConfig {
        horizon_ms: args.horizon,
        negative_rate: args.negative_rate,
        positive_rate: args.positive_rate,
        seed: args.seed,
        time_cut: Some(args.time_cut),
        skip_invisible: args.skip_invisible,
        max_rows: (args.max_rows > 0).then_some(args.max_rows),
        ..SetConfig::default()
    };
    let (sets, reports, held_out_from) = load_sets(args, &cfg)?;
    let gpus: usize = reports.iter().map(|r| r.gpus).sum();
    let failures: usize = reports.iter().map(|r| r.failures).sum();
    let (tr, ca, va) = (
        view(&sets.train)?,
        view(&sets.calibration)?,
        view(&sets.validation)?,
    );
    eprintln!(
        "sets: train {} rows ({} positive), calibration {} ({}), validation {} ({}); {gpus} GPUs, {failures} failures; read in {:.1}s",
        tr.len(),
        tr.positives(),
        ca.len(),
        ca.positives(),
        va.len(),
        va.positives(),
        t0.elapsed().as_secs_f64()
    );
    anyhow::ensure!(
        tr.positives() > 0 && ca.positives() > 0,
        "no positive row in the {} split although {failures} GPUs fail: the failures \
         fall on GPUs of the other splits (70/15/15 by GPU) or too close to the time cut; \
         read more GPUs or a longer span",
        if tr.positives() == 0 {
            "training"
        } else {
            "calibration"
        }
    );

    let t1 = Instant::now();
    let params = GbdtParams {
        booster: match args.booster {
            BoosterArg::Forust => Booster::Forust,
            BoosterArg::Perpetual => Booster::Perpetual,
        },
        budget: args.budget,
        seed: args.seed,
        threads: None,
        iteration_limit: Some(args.iterations),
        max_bin: args.max_bin,
        rounds: args.iterations,
        learning_rate: args.learning_rate,
        max_depth: args.max_depth,
        subsample: args.subsample,
        ..GbdtParams::default()
    };
    let gbdt = Gbdt::train(tr.x, INPUT_WIDTH, tr.y, &balanced_weights(&tr), &params)?;
    let gbdt_s = t1.elapsed().as_secs_f64();
    eprintln!(
        "gbdt: {} trees, {} nodes in {gbdt_s:.1}s",
        gbdt.trees.len(),
        gbdt.nodes()
    );
    let t2 = Instant::now();
    let seed = args.seed;
    let (lx, ly) = balanced_sample(&tr, 4, |i| training::unit_hash(seed, i as u64, 0xba5e));
    let logistic = Logistic::train(&lx, INPUT_WIDTH, &ly)?;
    eprintln!(
        "logistic: {} rows in {:.1}s",
        ly.len(),
        t2.elapsed().as_secs_f64()
    );

    // Calibrate on the calibration split, with weights restoring the
    // fleet's real class balance.
    let gl = sampling::score(&ca, |x| gbdt.logit(x));
    let ll = sampling::score(&ca, |x| logistic.logit(x));
    let gp = Platt::fit(&gl, ca.y, ca.weight);
    let lp = Platt::fit(&ll, ca.y, ca.weight);
    let budget = args.warning_budget;
    let (threshold, g_budgeted) = operating_point(&ca, &gl, &gp, budget);
    let (baseline_threshold, l_budgeted) = operating_point(&ca, &ll, &lp, budget);
    for (name, budgeted) in [("gbdt", g_budgeted), ("logistic", l_budgeted)] {
        if budgeted {
            eprintln!(
                "{name}: operating point raised to keep false warnings within \
                 {budget} per 1,000 GPU-days (--warning-budget)"
            );
        }
    }

    let mut model = FailureModel::new(
        gbdt,
        gp,
        logistic,
        lp,
        [threshold, baseline_threshold],
        TrainingMeta {
            created: features::time::format_rfc3339_s(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64),
            ),
            data: args.data.iter().map(|p| p.display().to_string()).collect(),
            horizon_h: args.horizon as f64 / 3.6e6,
            seed: args.seed,
            train_rows: tr.len(),
            train_positives: tr.positives(),
            calibration_rows: ca.len(),
            validation_rows: va.len(),
            gpus,
            failures,
            booster: format!(
                "{}, flattened; {}",
                params.booster.describe(),
                match params.booster {
                    Booster::Forust => format!(
                        "{} rounds, learning rate {}, depth {}, {} bins, subsample {}",
                        args.iterations,
                        args.learning_rate,
                        args.max_depth,
                        args.max_bin,
                        args.subsample
                    ),
                    Booster::Perpetual => format!("budget {}, {} bins", args.budget, args.max_bin),
                }
            ),
            budget: args.budget,
            train_seconds: gbdt_s,
            validation: Vec::new(),
            held_out_from_ms: held_out_from,
        },
    );
    // Validation figures, both models, and the one that alarms.
    println!(
        "validation ({} rows, {} positive; weighted to the full data)",
        va.len(),
        va.positives()
    );
    println!(
        "| model | PR-AUC | Brier | precision | recall | failures alarmed ≥1h | false warnings / 1k GPU-days |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut figures = Vec::new();
    let mut judged = Vec::new();
    for (name, p, thr) in [
        (
            "gbdt",
            sampling::score(&va, |x| model.gbdt_probability(x)),
            threshold,
        ),
        (
            "logistic (baseline)",
            sampling::score(&va, |x| model.baseline_probability(x)),
            baseline_threshold,
        ),
    ] {
        let v = sampling::validate(&va, &p, thr);
        let (ap, brier) = (v.pr_auc, v.brier);
        println!(
            "| {name} | {ap:.3} | {brier:.4} | {:.3} | {:.3} | {}/{} | {:.1} |",
            v.at.precision, v.at.recall, v.alarmed, v.failures, v.false_warnings
        );
        figures.push((format!("{name} pr_auc"), ap));
        figures.push((format!("{name} brier"), brier));
        figures.push((
            format!("{name} false_warnings_per_1k_gpu_days"),
            v.false_warnings,
        ));
        judged.push(v);
    }
    let choice = pick(args.primary, &judged[0], &judged[1]);
    model.primary = choice.primary;
    println!(
        "alarms by: {} ({}); operating point P(fail within horizon) ≥ {:.4}",
        choice.primary.as_str(),
        choice.reason,
        model.alarm_threshold()
    );
    model.meta.validation = figures;
    if let Some(p) = &args.report {
        let json = serde_json::json!({
            "read": reports,
            "sets": {
                "train": [tr.len(), tr.positives()],
                "calibration": [ca.len(), ca.positives()],
                "validation": [va.len(), va.positives()],
            },
            "held_out_from": held_out_from.map(features::time::format_rfc3339_s),
            "validation": model.meta.validation,
            "primary": {"model": choice.primary.as_str(), "why": choice.reason},
            "seconds": t0.elapsed().as_secs_f64(),
        });
        std::fs::write(p, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    model
        .save(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    eprintln!(
        "wrote {} in {:.1}s",
        args.out.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `--primary`: the measured choice, or the forced one (saying so).
fn pick(arg: PrimaryArg, gbdt: &sampling::Validation, logistic: &sampling::Validation) -> Choice {
    let forced = |primary: Primary| Choice {
        primary,
        reason: "forced by --primary".into(),
    };
    match arg {
        PrimaryArg::Auto => choose_primary(gbdt, logistic),
        PrimaryArg::Gbdt => forced(Primary::Gbdt),
        PrimaryArg::Logistic => forced(Primary::Logistic),
    }
}
