//! `forewarn train`'s reading: each `--data` argument resolved into a
//! dataset (a feature file, or the service's export root / table
//! directory: `datasets::training::Dataset`), scanned for failures, labels
//! merged from every source (telemetry, alerts table, operator labels,
//! tickets), checked for the causes that leave no training row (with errors
//! that name them), then read again into the example sets. Prints what was
//! read. Also used by `evaluate`'s champion / challenger comparison.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use datasets::Label;
use datasets::training::labels::{alert_labels, drop_false_alarms, false_alarms};
use datasets::training::{self, Dataset, ExampleSet, Fates, SetConfig, Sets};
use features::time::{format_duration, format_rfc3339_s};
use models::failure::{INPUT_WIDTH, InputState};
use models::trend::TrendConfig;
use serde::Serialize;

/// A `--since` / `--until` bound: a time, or a duration before the end of
/// the newest exported hour (`30d`: the last 30 days of exports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBound {
    At(i64),
    BeforeEnd(i64),
}

/// Parses `2026-11-01T00:00:00Z`, `2026-11-01` (midnight UTC) or `30d`.
pub fn parse_bound(s: &str) -> Result<TimeBound, String> {
    if let Some(t) = features::time::parse_timestamp(s) {
        return Ok(TimeBound::At(t));
    }
    let b = s.as_bytes();
    if b.len() == 10 && b[4] == b'-' && b[7] == b'-' {
        let y = s[0..4].parse().ok();
        let m = s[5..7].parse().ok();
        let d = s[8..10].parse().ok();
        if let (Some(y), Some(m), Some(d)) = (y, m, d)
            && let Some(days) = features::time::days_from_civil(y, m, d)
        {
            return Ok(TimeBound::At(days * 86_400_000));
        }
    }
    features::time::parse_duration(s)
        .map(|d| TimeBound::BeforeEnd(features::time::duration_ms(d)))
        .map_err(|_| {
            format!(
                "{s:?} is neither a time (2026-11-01T00:00:00Z, 2026-11-01) nor a duration (30d)"
            )
        })
}

/// Resolves `path` with the bounds; a duration counts back from the end
/// of the newest partition.
pub fn open_dataset(
    path: &Path,
    since: Option<TimeBound>,
    until: Option<TimeBound>,
) -> anyhow::Result<Dataset> {
    let relative = |b: Option<TimeBound>| matches!(b, Some(TimeBound::BeforeEnd(_)));
    let end = if relative(since) || relative(until) {
        let all = Dataset::open(path, None, None)?;
        all.files
            .iter()
            .filter_map(|f| f.hour_start_ms)
            .max()
            .map(|h| h + 3_600_000)
            .with_context(|| {
                format!(
                    "{}: a duration in --since / --until counts back from the newest \
                     export hour; a single file has none: give a time",
                    path.display()
                )
            })?
    } else {
        0
    };
    let at = |b: Option<TimeBound>| {
        b.map(|b| match b {
            TimeBound::At(t) => t,
            TimeBound::BeforeEnd(d) => end - d,
        })
    };
    Ok(Dataset::open(path, at(since), at(until))?)
}

/// Label sources besides the tickets (one file per dataset, handed to
/// [`scan`] separately).
#[derive(Debug, Default)]
pub struct LabelArgs<'a> {
    /// The service's label store (`POST /v1/labels`).
    pub operator: Option<&'a Path>,
    /// Read the export root's alerts table.
    pub alerts: bool,
}

/// Labels of one source, as counted in the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceCount {
    /// Labels read.
    pub read: usize,
    /// Failure labels that named a GPU of the data (and so set or named a
    /// failure).
    pub applied: usize,
    /// Notes (pages, false alarms, cancelled labels).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub notes: BTreeMap<String, usize>,
}

/// What one dataset held.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReadReport {
    pub data: String,
    pub files: usize,
    pub rows: u64,
    pub gpus: usize,
    pub failures: usize,
    pub failures_by_kind: BTreeMap<String, usize>,
    pub start: String,
    pub end: String,
    pub span_hours: f64,
    /// Label sources: `telemetry`, `alerts`, `operator`, `tickets`.
    pub labels: BTreeMap<String, SourceCount>,
    pub scan_seconds: f64,
}

impl ReadReport {
    /// The report as operators read it.
    pub fn print(&self) {
        let kinds: Vec<String> = self
            .failures_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        eprintln!(
            "read {}: {} files, {} rows, {} GPUs, {} .. {} ({:.1} h) in {:.1}s",
            self.data,
            self.files,
            self.rows,
            self.gpus,
            self.start,
            self.end,
            self.span_hours,
            self.scan_seconds
        );
        eprintln!("  failures: {} ({})", self.failures, kinds.join(", "));
        for (source, c) in &self.labels {
            let notes: Vec<String> = c.notes.iter().map(|(k, n)| format!("{k} {n}")).collect();
            eprintln!(
                "  labels from {source}: {} read, {} applied{}",
                c.read,
                c.applied,
                if notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", notes.join(", "))
                }
            );
        }
    }
}

/// Scans `data` and merges every label source.
pub fn scan(
    data: &Dataset,
    labels: &LabelArgs<'_>,
    ticket: Option<&Path>,
) -> anyhow::Result<(Fates, ReadReport)> {
    let t0 = Instant::now();
    let pb = crate::progress::bar(data.files.len() as u64, "files");
    let mut fates = Fates::scan(data, &[], |i| pb.set_position(i as u64))
        .with_context(|| format!("reading {}", data.name))?;
    pb.finish_and_clear();
    let mut counts = BTreeMap::new();
    counts.insert(
        "telemetry".to_string(),
        SourceCount {
            read: fates.failures(),
            applied: fates.failures(),
            ..SourceCount::default()
        },
    );
    let operator: Vec<Label> = match labels.operator {
        Some(p) => datasets::labels::read(p).with_context(|| format!("reading {}", p.display()))?,
        None => Vec::new(),
    };
    if labels.alerts
        && let Some(root) = &data.export_root
    {
        let mut a = alert_labels(root, data.since_ms, data.until_ms)
            .with_context(|| format!("reading the alerts table under {}", root.display()))?;
        let cancelled = drop_false_alarms(&mut a.labels, &operator);
        let mut c = SourceCount {
            read: a.labels.len() + cancelled,
            applied: fates.merge_labels(&a.labels),
            ..SourceCount::default()
        };
        c.notes.insert("files".into(), a.files);
        c.notes.insert("events".into(), a.events);
        c.notes.insert("pages".into(), a.pages);
        c.notes.insert("cancelled by false_alarm".into(), cancelled);
        counts.insert("alerts".into(), c);
    }
    if let Some(p) = labels.operator {
        let mut c = SourceCount {
            read: operator.len(),
            applied: fates.merge_labels(&operator),
            ..SourceCount::default()
        };
        c.notes
            .insert("false_alarm".into(), false_alarms(&operator));
        counts.insert(format!("operator ({})", p.display()), c);
    }
    if let Some(p) = ticket {
        let t = datasets::labels::read(p).with_context(|| format!("reading {}", p.display()))?;
        counts.insert(
            format!("tickets ({})", p.display()),
            SourceCount {
                read: t.len(),
                applied: fates.merge_labels(&t),
                ..SourceCount::default()
            },
        );
    }
    let seen = fates.rows > 0;
    let report = ReadReport {
        data: data.name.clone(),
        files: data.files.len(),
        rows: fates.rows,
        gpus: fates.gpu_count(),
        failures: fates.failures(),
        failures_by_kind: fates.failures_by_kind(),
        start: if seen {
            format_rfc3339_s(fates.start_ms)
        } else {
            "-".into()
        },
        end: if seen {
            format_rfc3339_s(fates.end_ms)
        } else {
            "-".into()
        },
        span_hours: if seen {
            (fates.end_ms - fates.start_ms) as f64 / 3.6e6
        } else {
            0.0
        },
        labels: counts,
        scan_seconds: t0.elapsed().as_secs_f64(),
    };
    Ok((fates, report))
}

fn dur(ms: i64) -> String {
    format_duration(std::time::Duration::from_millis(ms.max(0) as u64))
}

/// The causes that leave no training or held-out row, named.
pub fn check(fates: &Fates, cfg: &SetConfig, name: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        fates.rows > 0,
        "{name}: no rows in the time range (check --since / --until)"
    );
    let span = fates.end_ms - fates.start_ms;
    let h = cfg.horizon_ms;
    anyhow::ensure!(
        span > h,
        "{name}: the data spans {} ({} .. {}), not more than the horizon {}: \
         a row is labelled only once the horizon after it is seen; read more \
         history (an earlier --since) or train a shorter --horizon",
        dur(span),
        format_rfc3339_s(fates.start_ms),
        format_rfc3339_s(fates.end_ms),
        dur(h)
    );
    let Some(frac) = cfg.time_cut else {
        return Ok(());
    };
    let cut = fates.cut_ms(frac);
    anyhow::ensure!(
        cut - fates.start_ms > h,
        "{name}: the training part ({} .. the time cut at {}, --time-cut {frac}) \
         spans {}, not more than the horizon {}: no training row ends its horizon \
         before the cut; read more history, move --time-cut later or shorten --horizon",
        format_rfc3339_s(fates.start_ms),
        format_rfc3339_s(cut),
        dur(cut - fates.start_ms),
        dur(h)
    );
    let times: Vec<i64> = fates.fates.iter().filter_map(|f| f.failure_ms).collect();
    let before = times.iter().filter(|t| **t <= cut).count();
    let after = times.len() - before;
    anyhow::ensure!(
        !times.is_empty(),
        "{name}: no failure in {} of {} GPUs' data, from the telemetry or any label \
         source: nothing to learn from (add an RMA / ticket CSV with --labels, or \
         read a longer span)",
        dur(span),
        fates.gpu_count()
    );
    anyhow::ensure!(
        before > 0,
        "{name}: all {after} failures are after the time cut at {} (--time-cut {frac}): \
         none before it to train on; move --time-cut later or read more history",
        format_rfc3339_s(cut)
    );
    anyhow::ensure!(
        after > 0,
        "{name}: all {before} failures are before the time cut at {} (--time-cut {frac}): \
         none after it to calibrate and validate on; move --time-cut earlier or read \
         more recent data",
        format_rfc3339_s(cut)
    );
    Ok(())
}

/// Reads `data` into sets, each row's input built with a per-GPU trend
/// forecast in event-time order.
pub fn build(data: &Dataset, fates: &Fates, cfg: &SetConfig) -> anyhow::Result<Sets> {
    let tcfg = TrendConfig::default();
    let mut states: Vec<InputState> = Vec::new();
    let mut row = [0f32; INPUT_WIDTH];
    let pb = crate::progress::bar(fates.rows, "rows");
    let sets = training::build(
        data,
        fates,
        cfg,
        INPUT_WIDTH,
        |r, out| {
            let g = r.gpu as usize;
            if g >= states.len() {
                states.resize_with(g + 1, InputState::new);
            }
            let st = &mut states[g];
            let f = st.update(&tcfg, r.ts_ms, r.values);
            st.build(r.ts_ms, r.values, f.as_ref(), &mut row);
            out.extend_from_slice(&row);
        },
        |done| pb.set_position(done),
    )
    .with_context(|| format!("reading {}", data.name))?;
    pb.finish_and_clear();
    Ok(sets)
}

/// Appends `src`'s examples to `dst`.
pub fn append(dst: &mut ExampleSet, src: ExampleSet) {
    dst.x.extend(src.x);
    dst.y.extend(src.y);
    dst.weight.extend(src.weight);
    dst.lead_h.extend(src.lead_h);
    dst.visible.extend(src.visible);
    dst.gpu.extend(src.gpu);
    dst.ts_ms.extend(src.ts_ms);
}

#[cfg(test)]
mod tests {
    use super::*;
    use datasets::training::Fate;

    const H: i64 = 3_600_000;

    fn fates(span_h: i64, failures_at_h: &[i64]) -> Fates {
        let mut f = Fates {
            start_ms: 0,
            end_ms: span_h * H,
            rows: 100,
            ..Fates::default()
        };
        for (g, t) in failures_at_h.iter().map(Some).chain([None]).enumerate() {
            f.gpus.get_or_insert(&format!("GPU-{g}"));
            f.fates.push(Fate {
                first_ms: 0,
                last_ms: span_h * H,
                host: 0,
                failure_ms: t.map(|t| t * H),
                kind: t.map(|_| "dbe".into()),
                onset_ms: None,
            });
        }
        f
    }

    fn err(f: &Fates) -> String {
        let cfg = SetConfig::default();
        check(f, &cfg, "export").map_or_else(|e| e.to_string(), |()| "ok".into())
    }

    #[test]
    fn each_cause_of_an_empty_training_set_is_named() {
        assert!(err(&fates(20, &[10])).contains("not more than the horizon"));
        assert!(err(&fates(40, &[10])).contains("training part"));
        assert!(err(&fates(100, &[])).contains("no failure"));
        assert!(err(&fates(100, &[60, 70])).contains("all 2 failures are after the time cut"));
        assert!(err(&fates(100, &[10])).contains("all 1 failures are before the time cut"));
        assert_eq!(err(&fates(100, &[10, 70])), "ok");
    }

    #[test]
    fn bounds_are_times_dates_or_durations_back() {
        assert_eq!(
            parse_bound("2026-11-01"),
            Ok(TimeBound::At(
                features::time::parse_timestamp("2026-11-01T00:00:00Z").expect("ts")
            ))
        );
        assert_eq!(parse_bound("30d"), Ok(TimeBound::BeforeEnd(30 * 24 * H)));
        assert!(parse_bound("yesterday").is_err());
    }
}
