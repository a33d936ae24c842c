//! Fault injection for the end-to-end supervision tests: a component named
//! in `FOREWARN_INJECT_PANIC` (comma-separated, e.g. `shard-1`,
//! `alert_stage`) panics the first time it does work, so a test can watch
//! the real binary notice, report and exit. Unset (always, outside tests)
//! it costs one cached lookup. Not a user-facing setting: it only breaks
//! things.

use std::sync::OnceLock;

/// The variable read once at first use.
pub const VAR: &str = "FOREWARN_INJECT_PANIC";

fn targets() -> &'static [String] {
    static T: OnceLock<Vec<String>> = OnceLock::new();
    T.get_or_init(|| {
        std::env::var(VAR)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// Panics if `component` is named in [`VAR`].
pub fn maybe_panic(component: &str) {
    if targets().iter().any(|t| t == component) {
        panic!("{VAR} asked {component} to fail");
    }
}
