//! The failure model's input: every feature column, then the trend
//! forecast's view of the HBM (ETA, error rate, its growth). Built the same
//! way in training (`forewarn train`) and in the pipeline, so the model
//! sees at inference exactly what it learnt from.

use features::{Col, FEATURE_COUNT, FEATURE_NAMES};

use crate::trend::{Forecast, TrendInput};

/// Extra columns after the feature row.
pub const EXTRA_NAMES: [&str; 3] = ["trend_eta_h", "trend_sbe_per_h", "trend_growth_per_h"];

/// Width of the model input.
pub const INPUT_WIDTH: usize = FEATURE_COUNT + EXTRA_NAMES.len();

/// Column names of the model input, in order.
pub fn input_names() -> Vec<String> {
    FEATURE_NAMES
        .iter()
        .chain(EXTRA_NAMES.iter())
        .map(|s| (*s).to_string())
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

/// Writes the model input for `values` and `forecast` into `out`.
pub fn build(values: &[f32; FEATURE_COUNT], forecast: Option<&Forecast>, out: &mut [f32]) {
    out[..FEATURE_COUNT].copy_from_slice(values);
    let extra = match forecast {
        Some(f) => [
            f.eta_h.min(1e4) as f32,
            f.sbe_per_h as f32,
            f.growth_per_h as f32,
        ],
        None => [f32::NAN; 3],
    };
    out[FEATURE_COUNT..INPUT_WIDTH].copy_from_slice(&extra);
}
