//! dcgm-exporter Prometheus text decoder (telemetry contract §2): a whole
//! `/metrics` scrape → one [`Sample`] per GPU (per `UUID` label and sample
//! timestamp).
//!
//! Label styles of every exporter generation are accepted: `UUID`/`uuid`,
//! `Hostname`/`hostname`, `modelName`, `pod`/`pod_name`,
//! `namespace`/`pod_namespace`, and `hpc_job` (where `"0"` means no job).
//! Lines without a GPU UUID (Go runtime metrics and the like) are ignored; a
//! malformed line is an error for that line only.

use std::collections::HashMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::{DecodeOutput, is_blank_sentinel, validate};
use crate::error::DecodeError;
use crate::field::Field;
use crate::sample::Sample;

/// Decodes one scrape. `default_ts_ms` is the scrape time, used for samples
/// without an explicit timestamp.
pub fn decode_into(bytes: &[u8], default_ts_ms: i64, out: &mut DecodeOutput) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        out.errors.push(DecodeError::NotUtf8);
        return;
    };
    let first = out.samples.len();
    let mut index = Index::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Err(message) = decode_line(line, default_ts_ms, first, &mut index, out) {
            out.errors.push(DecodeError::Line {
                line: i + 1,
                message,
            });
        }
    }
}

/// Where each (GPU, timestamp) sample of this input sits in `out.samples`:
/// a file of many concatenated scrapes stays linear to decode, and so does
/// one GPU with a new timestamp on every line (a scan of the GPU's
/// timestamps made that quadratic: a hang on a large scrape file).
#[derive(Default)]
pub(super) struct Index(HashMap<Box<str>, FxHashMap<i64, usize>>);

impl Index {
    fn slot(&mut self, gpu: &str, ts: i64, out: &mut DecodeOutput) -> usize {
        if let Some(&i) = self.0.get(gpu).and_then(|by_ts| by_ts.get(&ts)) {
            return i;
        }
        out.samples.push(Sample::new(gpu, ts));
        let i = out.samples.len() - 1;
        self.0.entry(gpu.into()).or_default().insert(ts, i);
        i
    }
}

fn decode_line(
    line: &str,
    default_ts: i64,
    first: usize,
    index: &mut Index,
    out: &mut DecodeOutput,
) -> Result<(), String> {
    let parsed = parse_line(line)?;
    let labels = parsed.labels.iter().map(|(k, v)| (*k, v.as_str()));
    let ts = parsed.ts_ms.unwrap_or(default_ts);
    decode_series(parsed.name, labels, parsed.value, ts, first, index, out)
}

/// One labelled value of metric `name` at `ts` into its GPU's sample: the
/// label mapping shared with remote-write ([`super::series`]).
pub(super) fn decode_series<'a>(
    name: &str,
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    value: f64,
    ts: i64,
    first: usize,
    index: &mut Index,
    out: &mut DecodeOutput,
) -> Result<(), String> {
    let mut gpu = None;
    let (mut host, mut model, mut rack, mut cluster) = (None, None, None, None);
    let (mut hpc_job, mut pod, mut namespace, mut xid) = (None, None, None, None);
    for (k, v) in labels {
        match k {
            "UUID" | "uuid" => gpu = Some(v),
            "Hostname" | "hostname" => host = Some(v),
            "modelName" | "model_name" => model = Some(v),
            "rack" => rack = Some(v),
            "cluster" => cluster = Some(v),
            "hpc_job" => hpc_job = Some(v),
            "pod" | "pod_name" => pod = Some(v),
            "namespace" | "pod_namespace" => namespace = Some(v),
            "xid" => xid = Some(v),
            _ => {}
        }
    }
    let Some(gpu) = gpu.filter(|g| !g.is_empty()) else {
        return Ok(());
    };
    let idx = index.slot(gpu, ts, out);
    let s = &mut out.samples[idx];
    let set = |slot: &mut Option<Arc<str>>, v: Option<&str>| {
        if slot.is_none() {
            *slot = v.filter(|v| !v.is_empty()).map(Arc::from);
        }
    };
    set(&mut s.topo.host, host);
    set(&mut s.topo.model, model);
    set(&mut s.topo.rack, rack);
    set(&mut s.topo.cluster, cluster);
    // A Slurm job id wins over Kubernetes names; "0" means no Slurm job.
    let job = hpc_job.filter(|j| *j != "0").or(pod).or(namespace);
    set(&mut s.topo.job, job);

    let v = value;
    if v.is_nan() {
        return Ok(()); // Prometheus' way of saying "no value"
    }
    match Field::from_name(name) {
        Some(field) => match validate(idx - first, field, v) {
            Ok(Some(v)) => s.metrics.set(field, v),
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        },
        None if v.is_finite() && !is_blank_sentinel(v) => {
            let name = match xid {
                Some(x) => format!("{name}{{xid=\"{x}\"}}"),
                None => name.to_string(),
            };
            s.extra.push((name.into(), v));
        }
        None => {}
    }
    Ok(())
}

struct Line<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
    value: f64,
    ts_ms: Option<i64>,
}

fn parse_line(line: &str) -> Result<Line<'_>, String> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
        return Err("expected a metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        rest = parse_labels(r, &mut labels)?;
    }
    let mut parts = rest.split_ascii_whitespace();
    let value_text = parts
        .next()
        .ok_or_else(|| format!("metric {name}: missing value"))?;
    let value = parse_float(value_text)
        .ok_or_else(|| format!("metric {name}: bad value {value_text:?}"))?;
    let ts_ms = match parts.next() {
        Some(t) => Some(
            t.parse::<i64>()
                .map_err(|_| format!("metric {name}: bad timestamp {t:?}"))?,
        ),
        None => None,
    };
    if parts.next().is_some() {
        return Err(format!("metric {name}: trailing text after the timestamp"));
    }
    Ok(Line {
        name,
        labels,
        value,
        ts_ms,
    })
}

/// Parses `k="v",…}` and returns the text after the closing brace.
fn parse_labels<'a>(
    mut r: &'a str,
    labels: &mut Vec<(&'a str, String)>,
) -> Result<&'a str, String> {
    loop {
        r = r.trim_start();
        if let Some(after) = r.strip_prefix('}') {
            return Ok(after);
        }
        let eq = r.find('=').ok_or("label without '='")?;
        let key = r[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("bad label name {key:?}"));
        }
        r = r[eq + 1..]
            .trim_start()
            .strip_prefix('"')
            .ok_or_else(|| format!("label {key}: value not quoted"))?;
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("label {key}: unterminated escape")),
                },
                Some((_, c)) => value.push(c),
                None => return Err(format!("label {key}: unterminated value")),
            }
        };
        labels.push((key, value));
        r = r[end + 1..].trim_start();
        r = r.strip_prefix(',').unwrap_or(r);
    }
}

fn parse_float(s: &str) -> Option<f64> {
    match s {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(s: &str) -> DecodeOutput {
        let mut out = DecodeOutput::default();
        decode_into(s.as_bytes(), 42, &mut out);
        out
    }

    #[test]
    fn groups_by_uuid_and_maps_label_styles() {
        let text = r#"
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",Hostname="n1",modelName="NVIDIA H100",hpc_job="0",pod="p"} 61
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-b",Hostname="n1",hpc_job="1234"} 62 1000
dcgm_power_usage{gpu="0",uuid="GPU-a",hostname="n1",pod_name="p"} 300.5
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{UUID="GPU-a"} 9223372036854775794
DCGM_EXP_XID_ERRORS_COUNT{UUID="GPU-a",xid="79"} 2
go_goroutines 12
"#;
        let out = decode(text);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(out.samples.len(), 2);
        let a = &out.samples[0];
        assert_eq!((&*a.gpu, a.ts_ms), ("GPU-a", 42));
        assert_eq!(
            a.topo.job.as_deref(),
            Some("p"),
            "hpc_job=0 means no Slurm job"
        );
        assert_eq!(a.metrics.get(Field::PowerUsage), Some(300.5));
        assert_eq!(a.metrics.get(Field::EccSbeVolTotal), None, "blank sentinel");
        assert_eq!(
            a.extra,
            vec![("DCGM_EXP_XID_ERRORS_COUNT{xid=\"79\"}".into(), 2.0)]
        );
        let b = &out.samples[1];
        assert_eq!((b.ts_ms, b.topo.job.as_deref()), (1000, Some("1234")));
    }

    /// One GPU with a new timestamp on every line: one sample per line, in
    /// line order. Regression: the index scanned the GPU's timestamps, so
    /// the time grew with the square of the lines.
    #[test]
    fn a_new_timestamp_on_every_line_stays_linear() {
        let n = 100_000;
        let text: String = (0..n)
            .map(|t| format!("DCGM_FI_DEV_GPU_TEMP{{UUID=\"GPU-a\"}} 61 {t}\n"))
            .collect();
        let out = decode(&text);
        assert!(out.errors.is_empty(), "{:?}", &out.errors[..1]);
        assert_eq!(out.samples.len(), n);
        assert!(
            out.samples
                .iter()
                .enumerate()
                .all(|(i, s)| s.ts_ms == i as i64)
        );
    }

    #[test]
    fn bad_lines_are_errors_with_line_numbers_and_the_rest_survives() {
        let text = "DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-a\"} 61\nDCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-a\" 62\nDCGM_FI_DEV_POWER_USAGE{UUID=\"GPU-a\"} lots\nDCGM_FI_DEV_SM_CLOCK{UUID=\"GPU-a\"} 1980\n";
        let out = decode(text);
        assert_eq!(out.samples.len(), 1);
        assert_eq!(out.samples[0].metrics.len(), 2);
        let lines: Vec<usize> = out
            .errors
            .iter()
            .map(|e| match e {
                DecodeError::Line { line, .. } => *line,
                _ => 0,
            })
            .collect();
        assert_eq!(lines, [2, 3]);
    }
}
