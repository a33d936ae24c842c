//! PNG plots of an evaluation, drawn with `plotters` on its bitmap backend
//! with an embedded DejaVu Sans (ab_glyph): no system font libraries at run
//! time.

use std::path::Path;
use std::sync::Once;

use models::failure::metrics::PrPoint;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::EvalError;

static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn font() {
    REGISTER.call_once(|| {
        // A bad embedded font would be a build defect; text then falls back
        // to nothing, the plot still draws.
        if plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_err() {
            tracing::warn!("embedded font rejected");
        }
    });
}

/// A plotting error, naming the file being drawn.
fn err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> EvalError + '_ {
    move |e| EvalError::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Precision-recall curves, one per model.
pub fn pr_curves(path: &Path, curves: &[(&str, &[PrPoint], f64)]) -> Result<(), EvalError> {
    font();
    let root = BitMapBackend::new(path, (720, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Precision-recall", ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..1f64, 0f64..1.02f64)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc("recall")
        .y_desc("precision")
        .draw()
        .map_err(err(path))?;
    let colours = [BLUE, RED, CYAN, MAGENTA, GREEN];
    for (i, (name, curve, ap)) in curves.iter().enumerate() {
        let c = colours[i % colours.len()];
        chart
            .draw_series(LineSeries::new(
                curve.iter().map(|p| (p.recall, p.precision)),
                c.stroke_width(2),
            ))
            .map_err(err(path))?
            .label(format!("{name} (AP {ap:.3})"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err(path))?;
    root.present().map_err(err(path))
}

/// Histogram of lead times (hours), in 1 h bins up to `max_h`.
pub fn lead_histogram(path: &Path, leads_h: &[f64], max_h: f64) -> Result<(), EvalError> {
    font();
    let bins = max_h.ceil().max(1.0) as u32;
    let mut counts = vec![0u32; bins as usize];
    for l in leads_h {
        let b = (l.max(0.0) as usize).min(bins as usize - 1);
        counts[b] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    let root = BitMapBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Lead time of first alarm before failure",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((0u32..bins).into_segmented(), 0u32..top + 1)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc("hours ahead")
        .y_desc("failures")
        .draw()
        .map_err(err(path))?;
    chart
        .draw_series(
            Histogram::vertical(&chart)
                .style(BLUE.filled())
                .margin(2)
                .data(counts.iter().enumerate().map(|(i, c)| (i as u32, *c))),
        )
        .map_err(err(path))?;
    root.present().map_err(err(path))
}

/// Recall (≥ 1 h ahead) per failure kind, two models side by side.
pub fn kind_recall(path: &Path, rows: &[(String, f64, f64)]) -> Result<(), EvalError> {
    paired_bars(
        path,
        "Failures alarmed ≥ 1 h ahead, by kind (blue: GBDT, red: logistic)",
        "recall",
        rows,
    )
}

/// Two bars in [0, 1] per named row (blue, then red), e.g. two models'
/// recall per failure kind.
pub fn paired_bars(
    path: &Path,
    caption: &str,
    y_desc: &str,
    rows: &[(String, f64, f64)],
) -> Result<(), EvalError> {
    font();
    let n = rows.len().max(1) as u32;
    let root = BitMapBackend::new(path, (720, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..f64::from(n), 0f64..1.05f64)
        .map_err(err(path))?;
    let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n as usize * 2 + 1)
        .x_label_formatter(&|x| {
            let i = (x - 0.5).round();
            if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y_desc)
        .draw()
        .map_err(err(path))?;
    for (i, (_, g, l)) in rows.iter().enumerate() {
        let x = i as f64;
        chart
            .draw_series([
                Rectangle::new([(x + 0.1, 0.0), (x + 0.48, *g)], BLUE.filled()),
                Rectangle::new([(x + 0.52, 0.0), (x + 0.9, *l)], RED.filled()),
            ])
            .map_err(err(path))?;
    }
    root.present().map_err(err(path))
}
