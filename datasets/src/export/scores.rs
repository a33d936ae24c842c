//! The scores table: one row per scored GPU sample (or every Nth, see
//! [`ExportConfig::sample_every`](super::ExportConfig::sample_every)) with
//! the fused risk, its state, top cause, per-kind components and reasons,
//! as the detector's risk table holds them. Which components exist is the
//! detector's decision: [`ScoreTable::new`] takes their names.
//!
//! Columns: `ts` (timestamp ms UTC), `gpu`, `host`, `rack`, `cluster`,
//! `job`, `risk` (Float32), `state`, `kind` (top cause, null when none),
//! one `risk_<component>` Float32 column per component, `reasons` (the
//! caller's string: a JSON array like the alert contract's, or
//! `"; "`-joined text), `eta_hours` (nullable Float32), `model_version`.

use std::sync::Arc;

use arrow::array::{ArrayRef, Float32Array, StringBuilder, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field as ArrowField, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use super::ExportError;
use super::table::{ExportTable, TABLE_KEY, base_properties};
use crate::schema::VERSION_KEY;

/// Bumped whenever a scores column is added, removed or changes meaning.
pub const SCORES_SCHEMA_VERSION: u32 = 1;
/// Key-value metadata key listing the component names, comma-separated.
pub const COMPONENTS_KEY: &str = "forewarn.components";
/// Prefix of the per-component columns.
pub const COMPONENT_PREFIX: &str = "risk_";

/// One GPU's risk at one event time.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreRow {
    /// Event time of the sample scored, epoch ms UTC.
    pub ts_ms: i64,
    pub gpu: Arc<str>,
    pub host: Option<Arc<str>>,
    pub rack: Option<Arc<str>>,
    pub cluster: Option<Arc<str>>,
    pub job: Option<Arc<str>>,
    /// Fused risk in `[0, 1]`.
    pub risk: f32,
    /// `ok`, `watch`, `warning`, `critical`… as the detector names it.
    pub state: Arc<str>,
    /// The top cause, if any.
    pub kind: Option<Arc<str>>,
    /// One value per component, in the order given to [`ScoreTable::new`].
    pub components: Vec<f32>,
    /// The evidence: JSON array or `"; "`-joined text.
    pub reasons: String,
    /// Hours until a forecast limit is reached, when a trend says so.
    pub eta_hours: Option<f32>,
    /// Which model produced the score, for comparing versions offline.
    pub model_version: Arc<str>,
}

/// The scores table with its component columns.
#[derive(Debug, Clone)]
pub struct ScoreTable {
    schema: SchemaRef,
    components: Vec<String>,
}

/// Columns before the component columns.
const LEAD: [&str; 9] = [
    "ts", "gpu", "host", "rack", "cluster", "job", "risk", "state", "kind",
];

impl ScoreTable {
    /// `components` are the detector's risk components, e.g.
    /// `["hard_failure", "gpu_lost", "hbm_ecc_trend"]`: lowercase ASCII
    /// letters, digits and `_`, unique. Each becomes column `risk_<name>`.
    pub fn new(components: &[&str]) -> Result<Self, ExportError> {
        for (i, c) in components.iter().enumerate() {
            let valid = !c.is_empty()
                && c.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !valid {
                return Err(ExportError::config(
                    "components",
                    format!("{c:?} is not a lowercase [a-z0-9_] name"),
                ));
            }
            if components[..i].contains(c) {
                return Err(ExportError::config(
                    "components",
                    format!("{c:?} is listed twice"),
                ));
            }
        }
        let mut fields = vec![
            ArrowField::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                false,
            ),
            ArrowField::new("gpu", DataType::Utf8, false),
        ];
        for name in &LEAD[2..6] {
            fields.push(ArrowField::new(*name, DataType::Utf8, true));
        }
        fields.push(ArrowField::new("risk", DataType::Float32, false));
        fields.push(ArrowField::new("state", DataType::Utf8, false));
        fields.push(ArrowField::new("kind", DataType::Utf8, true));
        for c in components {
            fields.push(ArrowField::new(
                format!("{COMPONENT_PREFIX}{c}"),
                DataType::Float32,
                false,
            ));
        }
        fields.push(ArrowField::new("reasons", DataType::Utf8, false));
        fields.push(ArrowField::new("eta_hours", DataType::Float32, true));
        fields.push(ArrowField::new("model_version", DataType::Utf8, false));
        Ok(ScoreTable {
            schema: Arc::new(Schema::new(fields)),
            components: components.iter().map(|c| c.to_string()).collect(),
        })
    }

    /// The component names, in column order.
    pub fn components(&self) -> &[String] {
        &self.components
    }
}

fn strings<'a>(n: usize, values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    let mut b = StringBuilder::with_capacity(n, n * 16);
    for v in values {
        b.append_option(v);
    }
    Arc::new(b.finish())
}

impl ExportTable for ScoreTable {
    type Row = ScoreRow;

    fn name(&self) -> &str {
        "scores"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn properties(&self) -> WriterProperties {
        let meta = vec![
            KeyValue::new(VERSION_KEY.to_string(), SCORES_SCHEMA_VERSION.to_string()),
            KeyValue::new(TABLE_KEY.to_string(), "scores".to_string()),
            KeyValue::new(COMPONENTS_KEY.to_string(), self.components.join(",")),
        ];
        let floats: Vec<String> = self
            .components
            .iter()
            .map(|c| format!("{COMPONENT_PREFIX}{c}"))
            .collect();
        base_properties(meta, floats.iter().map(String::as_str)).build()
    }

    fn event_ms(row: &ScoreRow) -> i64 {
        row.ts_ms
    }

    fn gpu(row: &ScoreRow) -> Option<&str> {
        Some(&row.gpu)
    }

    fn to_batch(&self, rows: &[ScoreRow]) -> Result<RecordBatch, ExportError> {
        let n = rows.len();
        let bad = |message: String| ExportError::Batch {
            table: "scores".to_string(),
            source: arrow::error::ArrowError::InvalidArgumentError(message),
        };
        if let Some(r) = rows
            .iter()
            .find(|r| r.components.len() != self.components.len())
        {
            return Err(bad(format!(
                "row of {} at {} has {} components, the table {}",
                r.gpu,
                r.ts_ms,
                r.components.len(),
                self.components.len()
            )));
        }
        let ts = TimestampMillisecondArray::from(rows.iter().map(|r| r.ts_ms).collect::<Vec<_>>())
            .with_timezone("UTC");
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(ts),
            strings(n, rows.iter().map(|r| Some(&*r.gpu))),
            strings(n, rows.iter().map(|r| r.host.as_deref())),
            strings(n, rows.iter().map(|r| r.rack.as_deref())),
            strings(n, rows.iter().map(|r| r.cluster.as_deref())),
            strings(n, rows.iter().map(|r| r.job.as_deref())),
            Arc::new(Float32Array::from(
                rows.iter().map(|r| r.risk).collect::<Vec<_>>(),
            )),
            strings(n, rows.iter().map(|r| Some(&*r.state))),
            strings(n, rows.iter().map(|r| r.kind.as_deref())),
        ];
        for i in 0..self.components.len() {
            columns.push(Arc::new(Float32Array::from(
                rows.iter().map(|r| r.components[i]).collect::<Vec<_>>(),
            )));
        }
        columns.push(strings(n, rows.iter().map(|r| Some(r.reasons.as_str()))));
        columns.push(Arc::new(
            rows.iter().map(|r| r.eta_hours).collect::<Float32Array>(),
        ));
        columns.push(strings(n, rows.iter().map(|r| Some(&*r.model_version))));
        RecordBatch::try_new(self.schema.clone(), columns).map_err(|source| ExportError::Batch {
            table: "scores".to_string(),
            source,
        })
    }
}
