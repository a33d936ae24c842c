//! `forewarn evaluate --challenger NEW.fwm`: the champion / challenger
//! comparison. Both models are scored on the same rows: the held-back
//! window (by default from the challenger's `held_out_from`, the time cut
//! it was trained before, to the end of the data), labelled as `train`
//! labels them (telemetry, alerts table, operator labels, tickets) at the
//! challenger's horizon. Model inputs are warmed up on the day before the
//! window, so trends and histories are those the service would hold.
//!
//! The champion is the model in service: `--champion FILE`, else the
//! newest artifact in `--models-dir`, else the built-in pipeline (rules,
//! trends, anomaly forest) whose scores the service exported: the
//! `scores` table's fused risk of each GPU at or before each row, alarming
//! at 0.6 (`degraded`, where alerts fire). Writes the verdict as JSON
//! (`verdict`); `forewarn promote` acts on it.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::Context;
use arrow::array::{Array, Float32Array, StringArray, TimestampMillisecondArray};
use datasets::export::list_files;
use datasets::training::{self, Fates, Outcome, RowRef};
use features::time::format_rfc3339_s;
use models::failure::metrics::{average_precision, pr_curve};
use models::failure::{FailureModel, INPUT_WIDTH, InputState};
use models::trend::TrendConfig;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::EvaluateArgs;
use super::verdict::{self, Figures, Gate, Verdict, Window};
use crate::commands::train::read::{self, LabelArgs, TimeBound};

/// The built-in pipeline's operating point: risk at which a GPU is
/// `degraded` and alerts fire.
pub const BUILTIN_THRESHOLD: f64 = 0.6;
/// Input warm-up before the window.
const WARMUP_MS: i64 = 24 * 3_600_000;
const DAY_MS: f64 = 86_400_000.0;

/// Who scores the champion's side.
enum Champion {
    Model(PathBuf, Box<FailureModel>),
    /// The service's exported scores, under this export root.
    Exported(PathBuf),
}

/// Per-model tallies while scoring.
struct Tally {
    p: Vec<f64>,
    /// Per failing GPU: alarmed ≥ 1 h ahead.
    alarmed: Vec<bool>,
    /// Per GPU: above the operating point at its last row.
    above: Vec<bool>,
    episodes: u64,
    threshold: f64,
}

impl Tally {
    fn new(gpus: usize, threshold: f64) -> Self {
        Tally {
            p: Vec::new(),
            alarmed: vec![false; gpus],
            above: vec![false; gpus],
            episodes: 0,
            threshold,
        }
    }

    fn figures(&self, model: String, version: String, t: &Truth, gpu_days: f64) -> Figures {
        let (mut s, mut y, mut w) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..t.y.len() {
            if t.pre[i] {
                s.push(self.p[i]);
                y.push(t.y[i]);
                w.push(t.w[i]);
            }
        }
        let failures = t.observable.iter().filter(|o| **o).count();
        let alarmed = (0..t.observable.len())
            .filter(|g| t.observable[*g] && self.alarmed[*g])
            .count();
        Figures {
            model,
            version,
            pr_auc: average_precision(&pr_curve(&s, &y, &w)),
            failures,
            alarmed,
            alarmed_share: if failures > 0 {
                alarmed as f64 / failures as f64
            } else {
                0.0
            },
            alarms_per_1000_gpu_days: if gpu_days > 0.0 {
                self.episodes as f64 * 1000.0 / gpu_days
            } else {
                0.0
            },
            threshold: self.threshold,
        }
    }
}

/// The sampled rows' labels, shared by both tallies.
#[derive(Default)]
struct Truth {
    y: Vec<u8>,
    w: Vec<f32>,
    pre: Vec<bool>,
    /// Per GPU: its failure has a row ≥ 1 h before it in the window.
    observable: Vec<bool>,
}

/// The exported scores of the hour being read, by event time, and each
/// GPU's latest risk.
struct ExportedScores {
    root: PathBuf,
    hour: Option<i64>,
    rows: Vec<(i64, u32, f32)>,
    next: usize,
    latest: Vec<f32>,
    read: u64,
}

impl ExportedScores {
    /// The risk of GPU `g` at `ts_ms`: its latest score at or before it.
    fn risk(&mut self, fates: &Fates, g: usize, ts_ms: i64) -> anyhow::Result<f64> {
        let hour = ts_ms.div_euclid(3_600_000);
        if self.hour != Some(hour) {
            self.load(fates, hour)?;
        }
        while let Some(&(t, gi, r)) = self.rows.get(self.next)
            && t <= ts_ms
        {
            if let Some(l) = self.latest.get_mut(gi as usize) {
                *l = r;
            }
            self.next += 1;
        }
        Ok(f64::from(self.latest.get(g).copied().unwrap_or(0.0)))
    }

    fn load(&mut self, fates: &Fates, hour: i64) -> anyhow::Result<()> {
        // Scores left of the previous hour apply before this one's.
        for &(_, gi, r) in &self.rows[self.next..] {
            if let Some(l) = self.latest.get_mut(gi as usize) {
                *l = r;
            }
        }
        self.rows.clear();
        self.next = 0;
        self.hour = Some(hour);
        if self.latest.len() < fates.gpus.len() {
            self.latest.resize(fates.gpus.len(), 0.0);
        }
        let start = hour * 3_600_000;
        for f in list_files(&self.root, "scores", start, start + 3_600_000)? {
            let file = File::open(&f.path).with_context(|| format!("{}", f.path.display()))?;
            let b = ParquetRecordBatchReaderBuilder::try_new(file)?;
            let schema = b.schema().clone();
            let roots = ["ts", "gpu", "risk"]
                .iter()
                .map(|c| schema.index_of(c))
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("{}: not a scores file", f.path.display()))?;
            let mask = ProjectionMask::roots(b.parquet_schema(), roots);
            for batch in b.with_projection(mask).build()? {
                let batch = batch?;
                let bad = || anyhow::anyhow!("{}: unexpected column types", f.path.display());
                let ts = batch.column(0).as_any();
                let ts = ts
                    .downcast_ref::<TimestampMillisecondArray>()
                    .ok_or_else(bad)?;
                let gpu = batch.column(1).as_any();
                let gpu = gpu.downcast_ref::<StringArray>().ok_or_else(bad)?;
                let risk = batch.column(2).as_any();
                let risk = risk.downcast_ref::<Float32Array>().ok_or_else(bad)?;
                for i in 0..batch.num_rows() {
                    if let Some(g) = fates.gpus.get(gpu.value(i)) {
                        self.rows.push((ts.value(i), g, risk.value(i)));
                        self.read += 1;
                    }
                }
            }
        }
        self.rows.sort_by_key(|r| r.0);
        Ok(())
    }
}

fn champion_of(args: &EvaluateArgs, root: Option<&Path>) -> anyhow::Result<Champion> {
    let c = &args.compare;
    let path = match (&c.champion, &c.models_dir) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(dir)) => crate::reload::newest_in(dir)
            .with_context(|| format!("reading the models directory {}", dir.display()))?,
        (None, None) => None,
    };
    if let Some(p) = path {
        let m = FailureModel::load(&p).with_context(|| format!("loading {}", p.display()))?;
        return Ok(Champion::Model(p, Box::new(m)));
    }
    let root = root.context(
        "the champion is the built-in pipeline, whose scores come from the export's \
         scores table: give the export root as --data, or --champion FILE",
    )?;
    anyhow::ensure!(
        root.join("scores").is_dir(),
        "{}: no scores table: the built-in champion's scores are the service's exported \
         scores; give --champion FILE",
        root.display()
    );
    Ok(Champion::Exported(root.to_path_buf()))
}

/// Runs the comparison and writes the verdict.
pub fn run(args: &EvaluateArgs, challenger_path: &Path) -> anyhow::Result<()> {
    let c = &args.compare;
    let bytes = std::fs::read(challenger_path)
        .with_context(|| format!("reading {}", challenger_path.display()))?;
    let challenger = FailureModel::load(challenger_path)
        .with_context(|| format!("loading {}", challenger_path.display()))?;
    let data_path = args.data.first().context("--data is required")?;
    let probe = read::open_dataset(data_path, None, c.until)?;
    let since = match c.since {
        Some(TimeBound::At(t)) => Some(t),
        Some(b @ TimeBound::BeforeEnd(_)) => read::open_dataset(data_path, Some(b), None)?.since_ms,
        None => challenger.meta.held_out_from_ms,
    }
    .context(
        "the challenger records no held-out start (trained before it was recorded): give --since",
    )?;
    let data = training::Dataset::open(data_path, Some(since - WARMUP_MS), probe.until_ms)?;
    let champion = champion_of(args, data.export_root.as_deref())?;
    let labels = LabelArgs {
        operator: c.operator_labels.as_deref(),
        alerts: !c.no_alert_labels,
    };
    let (fates, report) = read::scan(&data, &labels, args.labels.first().map(PathBuf::as_path))?;
    report.print();
    let horizon_ms = (challenger.meta.horizon_h * 3.6e6) as i64;
    let n = fates.fates.len();
    let champ_thr = match &champion {
        Champion::Model(_, m) => m.alarm_threshold(),
        Champion::Exported(_) => BUILTIN_THRESHOLD,
    };
    let mut tallies = [
        Tally::new(n, champ_thr),
        Tally::new(n, challenger.alarm_threshold()),
    ];
    let mut truth = Truth {
        observable: vec![false; n],
        ..Truth::default()
    };
    let mut exported = match &champion {
        Champion::Exported(root) => Some(ExportedScores {
            root: root.clone(),
            hour: None,
            rows: Vec::new(),
            next: 0,
            latest: Vec::new(),
            read: 0,
        }),
        Champion::Model(..) => None,
    };
    // Both models read the same input (an artifact of another input
    // version does not load).
    let mut states: Vec<InputState> = Vec::new();
    let mut span: Vec<(i64, i64)> = vec![(i64::MAX, i64::MIN); n];
    let tcfg = TrendConfig::default();
    let mut x = [0f32; INPUT_WIDTH];
    let mut rows_in_window = 0u64;
    let mut err: Option<anyhow::Error> = None;
    let pb = crate::progress::bar(fates.rows, "rows");
    let mut done = 0u64;
    let each = |r: &RowRef<'_>| {
        done += 1;
        if done.is_multiple_of(65_536) {
            pb.set_position(done);
        }
        let g = r.gpu as usize;
        if g >= states.len() {
            states.resize_with(g + 1, InputState::new);
        }
        let Some(fate) = fates.fates.get(g) else {
            return;
        };
        let st = &mut states[g];
        let f = st.update(&tcfg, r.ts_ms, r.values);
        if r.ts_ms < since {
            return;
        }
        st.build(r.ts_ms, r.values, f.as_ref(), &mut x);
        let out = training::outcome(fate, r.ts_ms, horizon_ms);
        if matches!(out, Outcome::Failed) {
            return;
        }
        rows_in_window += 1;
        let s = &mut span[g];
        *s = (s.0.min(r.ts_ms), s.1.max(r.ts_ms));
        let p_champ = match (&champion, exported.as_mut()) {
            (Champion::Model(_, m), _) => m.probability(&x),
            (Champion::Exported(_), Some(e)) => match e.risk(&fates, g, r.ts_ms) {
                Ok(v) => v,
                Err(e) => {
                    err.get_or_insert(e);
                    0.0
                }
            },
            (Champion::Exported(_), None) => 0.0,
        };
        let p = [p_champ, challenger.probability(&x)];
        for (t, p) in tallies.iter_mut().zip(p) {
            let above = p >= t.threshold;
            if above && !t.above[g] {
                t.episodes += 1;
            }
            t.above[g] = above;
            if let Outcome::Positive { lead_ms } = out
                && lead_ms >= 3_600_000
                && above
            {
                t.alarmed[g] = true;
            }
        }
        let (y, rate) = match out {
            Outcome::Positive { lead_ms } => {
                if lead_ms >= 3_600_000 {
                    truth.observable[g] = true;
                }
                (1u8, 1.0)
            }
            Outcome::Negative => (0u8, c.compare_negative_rate),
            _ => return,
        };
        let name = fates.gpus.names.get(g).map_or("", String::as_str);
        if training::unit_hash(args.seed, training::name_hash(name), r.ts_ms as u64) < rate {
            truth.y.push(y);
            truth.w.push((1.0 / rate) as f32);
            truth
                .pre
                .push(y == 0 || training::Fates::visible(fate, r.ts_ms));
            for (t, p) in tallies.iter_mut().zip(p) {
                t.p.push(p);
            }
        }
    };
    let (mut gpus, mut hosts) = (fates.gpus.clone(), fates.hosts.clone());
    data.for_each_row(&mut gpus, &mut hosts, None, true, each, |_| {})?;
    pb.finish_and_clear();
    if let Some(e) = err {
        return Err(e);
    }
    let gpu_days: f64 = span
        .iter()
        .filter(|s| s.0 <= s.1)
        .map(|s| (s.1 - s.0) as f64 / DAY_MS)
        .sum();
    let window = Window {
        data: data.name.clone(),
        since: format_rfc3339_s(since),
        until: format_rfc3339_s(fates.end_ms),
        rows: rows_in_window,
        gpus: span.iter().filter(|s| s.0 <= s.1).count(),
        gpu_days,
        failures: truth.observable.iter().filter(|o| **o).count(),
        horizon_h: challenger.meta.horizon_h,
    };
    anyhow::ensure!(
        window.rows > 0,
        "no row in the window from {} (the challenger's held-out start, or --since) to the \
         end of {}: evaluate on data that reaches past the challenger's training",
        window.since,
        data.name
    );
    let (champ_name, champ_version) = match &champion {
        Champion::Model(p, m) => (
            p.display().to_string(),
            crate::reload::version_of(Some(m.as_ref())),
        ),
        Champion::Exported(root) => (
            format!("in service ({}/scores)", root.display()),
            crate::reload::BUILTIN_VERSION.to_string(),
        ),
    };
    let champion_fig = tallies[0].figures(champ_name, champ_version, &truth, gpu_days);
    let challenger_fig = tallies[1].figures(
        challenger_path.display().to_string(),
        crate::reload::version_of(Some(&challenger)),
        &truth,
        gpu_days,
    );
    let gate = Gate {
        min_gain: c.min_gain,
        max_recall_loss: c.max_recall_loss,
        max_alarm_ratio: c.max_alarm_ratio,
    };
    let checks = verdict::decide(&champion_fig, &challenger_fig, &gate);
    let v = Verdict {
        winner: if checks.iter().all(|c| c.pass) {
            "challenger"
        } else {
            "champion"
        }
        .into(),
        challenger_path: challenger_path.display().to_string(),
        challenger_hash: format!("{:016x}", features::hash::fnv1a(&bytes)),
        window,
        champion: champion_fig,
        challenger: challenger_fig,
        gate,
        checks,
    };
    print(&v);
    if let Some(parent) = c.verdict.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&c.verdict, serde_json::to_string_pretty(&v)?)
        .with_context(|| format!("writing {}", c.verdict.display()))?;
    eprintln!("wrote {}", c.verdict.display());
    Ok(())
}

fn print(v: &Verdict) {
    let w = &v.window;
    println!(
        "window {} .. {}: {} rows, {} GPUs ({:.0} GPU-days), {} failures observable ≥ 1 h ahead; horizon {} h",
        w.since, w.until, w.rows, w.gpus, w.gpu_days, w.failures, w.horizon_h
    );
    println!(
        "| | model | precursor-row PR-AUC | alarmed ≥ 1 h | alarms / 1,000 GPU-days | operating point |"
    );
    println!("|---|---|---|---|---|---|");
    for (role, f) in [("champion", &v.champion), ("challenger", &v.challenger)] {
        println!(
            "| {role} | {} | {:.4} | {}/{} ({:.3}) | {:.2} | {:.4} |",
            f.version,
            f.pr_auc,
            f.alarmed,
            f.failures,
            f.alarmed_share,
            f.alarms_per_1000_gpu_days,
            f.threshold
        );
    }
    for c in &v.checks {
        println!(
            "{} {}: {}",
            if c.pass { "pass" } else { "FAIL" },
            c.name,
            c.detail
        );
    }
    println!("verdict: {} wins", v.winner);
}
