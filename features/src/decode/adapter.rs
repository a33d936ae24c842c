//! prometheus-kafka-adapter JSON (telemetry contract §3): one metric per
//! message, `{"timestamp":…,"value":"…","name":…,"labels":{…}}`.
//!
//! [`Assembler`] regroups single metrics into per-GPU samples by
//! (UUID, timestamp). A group is complete once event time (the newest
//! timestamp seen) has moved `wait_ms` past it: stragglers within that wait
//! are merged, later ones start a new sample for the same time (the feature
//! stage drops or merges duplicates). Memory is bounded by
//! [`MAX_PENDING_GROUPS`]: past it, the oldest group is emitted early.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Deserialize;

use super::{DecodeOutput, is_blank_sentinel, validate};
use crate::error::DecodeError;
use crate::field::Field;
use crate::sample::Sample;
use crate::time::parse_timestamp;

/// Groups waiting for stragglers, at most: a fleet of 100,000 GPUs with a
/// second of wait at 30 s intervals keeps a few thousand.
pub const MAX_PENDING_GROUPS: usize = 200_000;

/// One adapter message, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterMetric {
    pub ts_ms: i64,
    pub name: String,
    pub value: f64,
    pub labels: HashMap<String, String>,
}

#[derive(Deserialize)]
struct Raw {
    timestamp: serde_json::Value,
    value: serde_json::Value,
    name: String,
    #[serde(default)]
    labels: HashMap<String, String>,
}

/// Parses one adapter message.
pub fn parse(bytes: &[u8]) -> Result<AdapterMetric, DecodeError> {
    let raw: Raw = serde_json::from_slice(bytes)?;
    let bad = |field: &str, message: String| DecodeError::BadField {
        index: 0,
        field: field.into(),
        message,
    };
    let ts_ms = match &raw.timestamp {
        serde_json::Value::String(s) => {
            parse_timestamp(s).ok_or_else(|| bad("timestamp", format!("not RFC 3339: {s:?}")))?
        }
        serde_json::Value::Number(n) => n
            .as_i64()
            .ok_or_else(|| bad("timestamp", format!("not epoch ms: {n}")))?,
        other => return Err(bad("timestamp", format!("not a time: {other}"))),
    };
    let value = match &raw.value {
        serde_json::Value::String(s) => match s.as_str() {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            s => s
                .parse()
                .map_err(|_| bad("value", format!("not a number: {s:?}")))?,
        },
        serde_json::Value::Number(n) => n.as_f64().ok_or_else(|| bad("value", n.to_string()))?,
        other => return Err(bad("value", format!("not a number: {other}"))),
    };
    Ok(AdapterMetric {
        ts_ms,
        name: raw.name,
        value,
        labels: raw.labels,
    })
}

/// Assembles adapter metrics into samples with a bounded event-time wait.
#[derive(Debug)]
pub struct Assembler {
    wait_ms: i64,
    watermark: i64,
    pending: BTreeMap<(i64, Arc<str>), Sample>,
}

impl Assembler {
    /// `wait_ms`: how far event time must move past a group before it is
    /// emitted.
    pub fn new(wait_ms: i64) -> Self {
        Assembler {
            wait_ms,
            watermark: i64::MIN,
            pending: BTreeMap::new(),
        }
    }

    /// Adds one metric; completed samples and errors go to `out`.
    pub fn push(&mut self, m: AdapterMetric, out: &mut DecodeOutput) {
        let label = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| m.labels.get(*n))
                .filter(|v| !v.is_empty())
        };
        let Some(gpu) = label(&["UUID", "uuid"]) else {
            out.errors.push(DecodeError::MissingGpu { index: 0 });
            return;
        };
        let interner = &mut out.interner;
        let key = (m.ts_ms, interner.get(gpu));
        let s = self.pending.entry(key.clone()).or_insert_with(|| {
            let mut intern = |v: &String| interner.get(v);
            let mut s = Sample::new(key.1.clone(), m.ts_ms);
            s.topo.host = label(&["Hostname", "hostname"]).map(&mut intern);
            s.topo.model = label(&["modelName"]).map(&mut intern);
            s.topo.rack = label(&["rack"]).map(&mut intern);
            s.topo.cluster = label(&["cluster"]).map(&mut intern);
            let job = label(&["hpc_job"])
                .filter(|j| *j != "0")
                .or_else(|| label(&["pod", "pod_name"]));
            s.topo.job = job.map(&mut intern);
            s
        });
        if !m.value.is_nan() {
            match Field::from_name(&m.name) {
                Some(f) => match validate(0, f, m.value) {
                    Ok(Some(v)) => s.metrics.set(f, v),
                    Ok(None) => {}
                    Err(e) => out.errors.push(e),
                },
                None if m.value.is_finite() && !is_blank_sentinel(m.value) => {
                    s.extra.push((m.name.into(), m.value))
                }
                None => {}
            }
        }
        self.watermark = self.watermark.max(m.ts_ms);
        self.flush_before(self.watermark.saturating_sub(self.wait_ms), out);
        while self.pending.len() > MAX_PENDING_GROUPS {
            if let Some((_, s)) = self.pending.pop_first() {
                out.samples.push(s);
            }
        }
    }

    /// Emits every group strictly older than `ts_ms`.
    pub fn flush_before(&mut self, ts_ms: i64, out: &mut DecodeOutput) {
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 >= ts_ms {
                break;
            }
            out.samples.push(entry.remove());
        }
    }

    /// Emits everything (end of input, shutdown).
    pub fn flush_all(&mut self, out: &mut DecodeOutput) {
        out.samples
            .extend(std::mem::take(&mut self.pending).into_values());
    }

    /// Groups still waiting.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ts: &str, name: &str, value: &str, uuid: &str) -> AdapterMetric {
        let text = format!(
            r#"{{"timestamp":"{ts}","value":"{value}","name":"{name}","labels":{{"__name__":"{name}","UUID":"{uuid}","Hostname":"n1","gpu":"0"}}}}"#
        );
        parse(text.as_bytes()).expect("valid adapter message")
    }

    #[test]
    fn assembles_by_uuid_and_time_with_bounded_wait() {
        let mut asm = Assembler::new(1_000);
        let mut out = DecodeOutput::default();
        asm.push(
            msg(
                "2026-11-29T17:00:00Z",
                "DCGM_FI_DEV_GPU_TEMP",
                "60",
                "GPU-a",
            ),
            &mut out,
        );
        asm.push(
            msg(
                "2026-11-29T17:00:00Z",
                "DCGM_FI_DEV_GPU_TEMP",
                "61",
                "GPU-b",
            ),
            &mut out,
        );
        asm.push(
            msg(
                "2026-11-29T17:00:00Z",
                "DCGM_FI_DEV_POWER_USAGE",
                "300",
                "GPU-a",
            ),
            &mut out,
        );
        assert!(out.samples.is_empty(), "still within the wait");
        asm.push(
            msg(
                "2026-11-29T17:00:30Z",
                "DCGM_FI_DEV_GPU_TEMP",
                "62",
                "GPU-a",
            ),
            &mut out,
        );
        assert_eq!(out.samples.len(), 2);
        let a = &out.samples[0];
        assert_eq!(
            (&*a.gpu, a.metrics.len(), a.topo.host.as_deref()),
            ("GPU-a", 2, Some("n1"))
        );
        asm.flush_all(&mut out);
        assert_eq!(out.samples.len(), 3);
        assert_eq!(asm.pending(), 0);
    }

    #[test]
    fn bad_messages_are_typed_errors() {
        assert!(matches!(parse(b"{}"), Err(DecodeError::Json { .. })));
        let bad = br#"{"timestamp":"soon","value":"1","name":"x","labels":{}}"#;
        assert!(matches!(parse(bad), Err(DecodeError::BadField { .. })));
        let mut asm = Assembler::new(0);
        let mut out = DecodeOutput::default();
        let m = parse(br#"{"timestamp":1,"value":"1","name":"x","labels":{}}"#).expect("valid");
        asm.push(m, &mut out);
        assert_eq!(out.errors, vec![DecodeError::MissingGpu { index: 0 }]);
    }
}
