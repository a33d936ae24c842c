//! The failure model's input: the feature row (less its running totals),
//! then the trend forecast's view of the HBM (ETA, error rate, its growth),
//! then the GPU's history columns (`history`). Built the same way in
//! training (`forewarn train`), evaluation and the pipeline, so the model
//! sees at inference exactly what it learnt from; [`InputState`] is the
//! per-GPU state all three keep.
//!
//! Changing the columns changes [`INPUT_VERSION`]: an artifact built for
//! another input is refused at load.

use features::{Col, FEATURE_COUNT, FEATURE_NAMES};
use serde::{Deserialize, Serialize};

use super::history::{HISTORY_NAMES, HISTORY_WIDTH, History};
use crate::trend::{Forecast, Trend, TrendConfig, TrendInput};

/// Version of the model input's definition (columns, their order and how
/// each is computed). 1: feature row + trend; 2: totals dropped, history
/// columns added.
pub const INPUT_VERSION: u32 = 2;

/// Feature columns left out of the model input: running totals since the
/// GPU was first watched. They encode how long the GPU has been watched
/// (and so its place in the file), not its health; the trend and history
/// columns carry their growth instead.
pub const DROPPED: [Col; 5] = [
    Col::EccSbeAggTotal,
    Col::EccDbeAggTotal,
    Col::RetiredPagesTotal,
    Col::RemapCorrTotal,
    Col::RemapUncorrTotal,
];

/// Feature columns in the input.
pub const KEPT: usize = FEATURE_COUNT - DROPPED.len();

/// Indices of the kept feature columns, in order.
pub const KEPT_COLS: [usize; KEPT] = kept_cols();

const fn kept_cols() -> [usize; KEPT] {
    let mut out = [0usize; KEPT];
    let (mut i, mut k) = (0, 0);
    while i < FEATURE_COUNT {
        let mut dropped = false;
        let mut d = 0;
        while d < DROPPED.len() {
            if DROPPED[d] as usize == i {
                dropped = true;
            }
            d += 1;
        }
        if !dropped {
            out[k] = i;
            k += 1;
        }
        i += 1;
    }
    out
}

/// Trend columns after the feature columns.
pub const TREND_NAMES: [&str; 3] = ["trend_eta_h", "trend_sbe_per_h", "trend_growth_per_h"];

/// Width of the model input.
pub const INPUT_WIDTH: usize = KEPT + TREND_NAMES.len() + HISTORY_WIDTH;

/// Column names of the model input, in order.
pub fn input_names() -> Vec<String> {
    KEPT_COLS
        .iter()
        .map(|c| FEATURE_NAMES[*c])
        .chain(TREND_NAMES.iter().copied())
        .chain(HISTORY_NAMES.iter().copied())
        .map(str::to_string)
        .collect()
}

/// What the trend reads off a feature row.
pub fn trend_input(ts_ms: i64, values: &[f32; FEATURE_COUNT]) -> TrendInput {
    let v = |c: Col| f64::from(values[c as usize]);
    let remapped = v(Col::RemapCorrTotal) + v(Col::RemapUncorrTotal);
    TrendInput {
        ts_ms,
        sbe_delta: v(Col::EccSbeDelta),
        remapped_rows: if remapped.is_finite() {
            remapped
        } else {
            v(Col::RemapCorrTotal)
        },
        retired_pages: v(Col::RetiredPagesTotal),
    }
}

/// One GPU's input state: its trend and its history.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InputState {
    pub trend: Trend,
    pub history: History,
}

impl InputState {
    pub fn new() -> Self {
        InputState::default()
    }

    /// Advances with one feature row and returns the trend forecast now.
    pub fn update(
        &mut self,
        cfg: &TrendConfig,
        ts_ms: i64,
        values: &[f32; FEATURE_COUNT],
    ) -> Option<Forecast> {
        self.trend.update(&trend_input(ts_ms, values));
        self.history.update(ts_ms, values);
        self.trend.forecast(cfg, ts_ms)
    }

    /// Writes the model input of the row just passed to [`Self::update`].
    pub fn build(
        &self,
        ts_ms: i64,
        values: &[f32; FEATURE_COUNT],
        forecast: Option<&Forecast>,
        out: &mut [f32],
    ) {
        build(ts_ms, values, forecast, &self.history, out);
    }
}

/// Writes the model input for `values`, `forecast` and `history` into `out`.
pub fn build(
    ts_ms: i64,
    values: &[f32; FEATURE_COUNT],
    forecast: Option<&Forecast>,
    history: &History,
    out: &mut [f32],
) {
    for (o, c) in out[..KEPT].iter_mut().zip(KEPT_COLS) {
        *o = values[c];
    }
    let extra = match forecast {
        Some(f) => [
            f.eta_h.min(1e4) as f32,
            f.sbe_per_h as f32,
            f.growth_per_h as f32,
        ],
        None => [f32::NAN; 3],
    };
    let t = KEPT + TREND_NAMES.len();
    out[KEPT..t].copy_from_slice(&extra);
    history.write(ts_ms, &mut out[t..INPUT_WIDTH]);
}
