//! Small statistics shared by the detector's alert stage (rack air
//! temperatures against their peers) and the evaluation reports (median
//! lead times), kept here, the lowest crate both use, so they agree.

/// The median of `xs` (reordered); `None` when empty.
pub fn median(xs: &mut [f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_unstable_by(f64::total_cmp);
    let k = xs.len() / 2;
    Some(if xs.len() % 2 == 1 {
        xs[k]
    } else {
        0.5 * (xs[k - 1] + xs[k])
    })
}
