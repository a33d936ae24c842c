//! Progress bars for long commands. They draw on stderr only when stderr is
//! a terminal, so pipes, CI logs and files stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `total` units called `unit` (e.g. "samples"), hidden unless
/// stderr is a terminal.
pub fn bar(total: u64, unit: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(total), draw_target());
    let template = format!(
        "{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{human_pos}}/{{human_len}} {unit} ({{per_sec}}, eta {{eta}})"
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style);
    }
    pb
}

fn draw_target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A counter with no known total (streams, producers), hidden unless
/// stderr is a terminal.
pub fn counter(unit: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(None, draw_target());
    let template = format!("{{spinner}} [{{elapsed_precise}}] {{human_pos}} {unit} ({{per_sec}})");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style);
    }
    pb
}
