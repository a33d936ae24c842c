//! Training and evaluation sets for the failure model, from a [`Dataset`]
//! (a `forewarn features` file or the service's exports) and failure labels.
//!
//! An example is one GPU's model input at one event time. It is **positive**
//! when the GPU fails within the horizon after it, **negative** when the
//! GPU provably survives the horizon (it fails later, or is seen alive at
//! or after the horizon's end), and **censored** (left out) when the data
//! ends first. Rows at or after a GPU's failure are left out: the hard rules
//! own them.
//!
//! Splits are by GPU and by time: each GPU belongs to one of train,
//! calibration and validation (a seeded hash of its name); training rows
//! end their horizon before the time cut, calibration and validation rows
//! start at it. No GPU, and no event time after the cut, reaches training.
//!
//! Negatives are subsampled (a seeded hash of GPU and time, so the same
//! file gives the same set); every kept negative carries the weight
//! `1 / rate` so that metrics and calibration see the full data's balance.
//! With [`SetConfig::max_rows`] the rates are lowered before reading so the
//! sets hold about that many rows however much data there is
//! ([`effective_rates`]): memory is bounded by the cap, not by the days read.
//!
//! The model input may be wider than the feature row: a callback sees
//! every row in file order (so stateful inputs such as trend forecasts
//! stay exact) and writes the input vector.

pub mod fates;
pub mod labels;
pub mod reader;
pub mod source;

use features::FEATURE_COUNT;
use features::rng::splitmix64;

pub use fates::{Fate, Fates, NO_PRECURSOR};
pub use reader::{Interner, RowRef, for_each_row};
pub use source::{DataFile, Dataset};

use crate::error::DatasetError;

/// Which split a GPU belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Split {
    Train,
    Calibration,
    Validation,
}

/// How examples are drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct SetConfig {
    pub horizon_ms: i64,
    /// Fraction of negatives kept.
    pub negative_rate: f64,
    /// Fraction of positives kept.
    pub positive_rate: f64,
    pub seed: u64,
    /// GPU shares of calibration and validation (the rest trains).
    pub calibration_share: f64,
    pub validation_share: f64,
    /// Where the time cut lies, as a fraction of the file's time span.
    /// `None`: no time cut and no GPU split (a whole file for evaluation).
    pub time_cut: Option<f64>,
    /// Leave out of the *training* split the positives no model can
    /// predict: rows of failures with no precursor ([`NO_PRECURSOR`]) and
    /// rows before a labelled precursor onset. They look like healthy
    /// rows, so as positives they teach a booster the identities of the
    /// few failing GPUs rather than the precursors. Calibration and
    /// validation keep every row, so probabilities stay those of the
    /// horizon as defined.
    pub skip_invisible: bool,
    /// About this many rows at most in the three sets together (the
    /// sampling rates are lowered to fit); `None`: no cap.
    pub max_rows: Option<usize>,
}

impl Default for SetConfig {
    fn default() -> Self {
        SetConfig {
            horizon_ms: 24 * 3_600_000,
            negative_rate: 0.05,
            positive_rate: 1.0,
            seed: 1,
            calibration_share: 0.15,
            validation_share: 0.15,
            time_cut: Some(0.5),
            skip_invisible: false,
            max_rows: None,
        }
    }
}

/// The label of one row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Fails `lead_ms` after this row.
    Positive {
        lead_ms: i64,
    },
    Negative,
    Censored,
    /// At or after the failure.
    Failed,
}

/// The outcome of a row of `fate` at `ts_ms`.
pub fn outcome(fate: &Fate, ts_ms: i64, horizon_ms: i64) -> Outcome {
    match fate.failure_ms {
        Some(f) if ts_ms >= f => Outcome::Failed,
        Some(f) if f - ts_ms <= horizon_ms => Outcome::Positive { lead_ms: f - ts_ms },
        Some(_) => Outcome::Negative,
        None if fate.last_ms >= ts_ms + horizon_ms => Outcome::Negative,
        None => Outcome::Censored,
    }
}

/// A uniform number in [0, 1) from a seed and two keys.
pub fn unit_hash(seed: u64, a: u64, b: u64) -> f64 {
    let mut s = seed ^ a;
    let mut t = splitmix64(&mut s) ^ b;
    let h = splitmix64(&mut t);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// A stable 64-bit hash of a name (FNV-1a).
pub fn name_hash(s: &str) -> u64 {
    features::hash::fnv1a(s.as_bytes())
}

/// Examples, row-major.
#[derive(Debug, Clone, Default)]
pub struct ExampleSet {
    pub width: usize,
    pub x: Vec<f32>,
    pub y: Vec<u8>,
    pub weight: Vec<f32>,
    /// Hours to failure (positives), else NaN.
    pub lead_h: Vec<f32>,
    /// Whether the row's failure shows at that time ([`Fates::visible`];
    /// true for negatives).
    pub visible: Vec<bool>,
    pub gpu: Vec<u32>,
    pub ts_ms: Vec<i64>,
}

impl ExampleSet {
    pub fn new(width: usize) -> Self {
        ExampleSet {
            width,
            ..Default::default()
        }
    }

    pub fn len(&self) -> usize {
        self.y.len()
    }

    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.width..(i + 1) * self.width]
    }

    pub fn positives(&self) -> usize {
        self.y.iter().filter(|y| **y == 1).count()
    }

    #[allow(clippy::too_many_arguments)]
    fn push(&mut self, x: &[f32], y: bool, w: f32, lead_h: f32, visible: bool, gpu: u32, ts: i64) {
        self.x.extend_from_slice(x);
        self.y.push(u8::from(y));
        self.weight.push(w);
        self.lead_h.push(lead_h);
        self.visible.push(visible);
        self.gpu.push(gpu);
        self.ts_ms.push(ts);
    }
}

/// The three sets.
#[derive(Debug, Clone, Default)]
pub struct Sets {
    pub train: ExampleSet,
    pub calibration: ExampleSet,
    pub validation: ExampleSet,
}

impl Sets {
    pub fn get_mut(&mut self, s: Split) -> &mut ExampleSet {
        match s {
            Split::Train => &mut self.train,
            Split::Calibration => &mut self.calibration,
            Split::Validation => &mut self.validation,
        }
    }
}

/// The split of GPU `name` at `ts_ms`, or None when the row falls on the
/// wrong side of the time cut for its GPU's split.
pub fn split_of(cfg: &SetConfig, fates: &Fates, name: &str, ts_ms: i64) -> Option<Split> {
    let Some(cut) = cfg.time_cut else {
        return Some(Split::Validation);
    };
    let cut_ms = fates.start_ms + ((fates.end_ms - fates.start_ms) as f64 * cut) as i64;
    let u = unit_hash(cfg.seed, name_hash(name), 0x5eed);
    let split = if u < cfg.validation_share {
        Split::Validation
    } else if u < cfg.validation_share + cfg.calibration_share {
        Split::Calibration
    } else {
        Split::Train
    };
    let ok = match split {
        Split::Train => ts_ms + cfg.horizon_ms <= cut_ms,
        _ => ts_ms >= cut_ms,
    };
    ok.then_some(split)
}

/// The (negative, positive) sampling rates that keep the sets near
/// `cfg.max_rows`: positives get at most half the budget, negatives the
/// rest. Row counts are estimated from the scan: rows per GPU-millisecond
/// times each failing GPU's time within the horizon before its failure.
pub fn effective_rates(fates: &Fates, cfg: &SetConfig) -> (f64, f64) {
    let Some(max) = cfg.max_rows.map(|m| m.max(1) as f64) else {
        return (cfg.negative_rate, cfg.positive_rate);
    };
    let span: f64 = fates
        .fates
        .iter()
        .filter(|f| f.seen())
        .map(|f| (f.last_ms - f.first_ms).max(1) as f64)
        .sum();
    let density = fates.rows as f64 / span.max(1.0);
    let positives: f64 = fates
        .fates
        .iter()
        .filter_map(|f| {
            let t = f.failure_ms?;
            Some((t - f.first_ms).clamp(0, cfg.horizon_ms) as f64 * density)
        })
        .sum();
    let negatives = (fates.rows as f64 - positives).max(1.0);
    let pos_rate = cfg.positive_rate.min(max / 2.0 / positives.max(1.0));
    let neg_rate = cfg
        .negative_rate
        .min((max - positives * pos_rate).max(max / 2.0) / negatives);
    (neg_rate, pos_rate)
}

/// Builds the sets from `data`, whose fates (and labels) `fates` holds.
/// `input(row, out)` is called for every row in event-time order per GPU
/// and must append exactly `width` values to `out`; `progress(rows done)`
/// follows the reading.
pub fn build(
    data: &Dataset,
    fates: &Fates,
    cfg: &SetConfig,
    width: usize,
    mut input: impl FnMut(&RowRef<'_>, &mut Vec<f32>),
    mut progress: impl FnMut(u64),
) -> Result<Sets, DatasetError> {
    let (negative_rate, positive_rate) = effective_rates(fates, cfg);
    let mut sets = Sets {
        train: ExampleSet::new(width),
        calibration: ExampleSet::new(width),
        validation: ExampleSet::new(width),
    };
    let mut buf = Vec::with_capacity(width);
    // The scan's interners: files are read in the same order, so names get
    // the same indices.
    let (mut gpus, mut hosts) = (fates.gpus.clone(), fates.hosts.clone());
    let mut seen = 0u64;
    let mut err = None;
    let each = |r: &RowRef<'_>| {
        seen += 1;
        if seen.is_multiple_of(65_536) {
            progress(seen);
        }
        buf.clear();
        input(r, &mut buf);
        if buf.len() != width {
            err = Some(buf.len());
            return;
        }
        let g = r.gpu;
        let (Some(name), Some(fate)) = (
            fates.gpus.names.get(g as usize),
            fates.fates.get(g as usize),
        ) else {
            return;
        };
        let (y, rate, lead_h) = match outcome(fate, r.ts_ms, cfg.horizon_ms) {
            Outcome::Positive { lead_ms } => (true, positive_rate, lead_ms as f32 / 3.6e6),
            Outcome::Negative => (false, negative_rate, f32::NAN),
            Outcome::Censored | Outcome::Failed => return,
        };
        if unit_hash(cfg.seed, name_hash(name), r.ts_ms as u64) >= rate {
            return;
        }
        let Some(split) = split_of(cfg, fates, name, r.ts_ms) else {
            return;
        };
        let visible = Fates::visible(fate, r.ts_ms);
        if y && !visible && cfg.skip_invisible && split == Split::Train {
            return;
        }
        sets.get_mut(split)
            .push(&buf, y, (1.0 / rate) as f32, lead_h, visible, g, r.ts_ms);
    };
    let rows = data.for_each_row(&mut gpus, &mut hosts, None, true, each, |_| {})?;
    if let Some(n) = err {
        return Err(DatasetError::Schema {
            path: data.name.clone(),
            message: format!("model input has {n} values, expected {width}"),
        });
    }
    progress(rows);
    Ok(sets)
}

/// Width of the raw feature row.
pub const RAW_WIDTH: usize = FEATURE_COUNT;

#[cfg(test)]
mod tests;
