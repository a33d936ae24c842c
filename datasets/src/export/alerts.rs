//! The alerts table: one row per alert event (one state change of one
//! alert), in the shape of `shared/contracts/alerts.md`. The contract's
//! scalar fields and scope labels get typed columns for filtering; the whole
//! event is kept verbatim as JSON in `event`, so nothing the contract adds
//! later is lost.
//!
//! Columns: `ts` (timestamp ms UTC), `status`, `severity`, `kind`, `scope`,
//! `dedup_key`, `gpu`, `host`, `rack`, `cluster`, `job`, `model` (labels,
//! nullable), `risk` (Float64, nullable), `eta_hours` (Float64, nullable),
//! `summary`, `event` (the JSON).
//!
//! `datasets` does not depend on `alerts`: the detector serializes its
//! `AlertEvent` and hands the JSON to [`AlertRow::from_json`].

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, StringBuilder, TimestampMillisecondArray};
use arrow::datatypes::{DataType, Field as ArrowField, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde::Deserialize;

use super::ExportError;
use super::table::{ExportTable, TABLE_KEY, base_properties};
use crate::schema::VERSION_KEY;

/// Bumped whenever an alerts column is added, removed or changes meaning.
pub const ALERTS_SCHEMA_VERSION: u32 = 1;
/// The label columns, in column order.
pub const ALERT_LABEL_COLUMNS: [&str; 6] = ["gpu", "host", "rack", "cluster", "job", "model"];

/// One alert event.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertRow {
    /// Event time of the state change, epoch ms UTC.
    pub ts_ms: i64,
    pub status: String,
    pub severity: String,
    pub kind: String,
    pub scope: String,
    pub dedup_key: String,
    /// Values of [`ALERT_LABEL_COLUMNS`], in that order.
    pub labels: [Option<String>; 6],
    pub risk: Option<f64>,
    pub eta_hours: Option<f64>,
    pub summary: String,
    /// The whole event as contract JSON.
    pub event: String,
}

/// The subset of the contract that gets typed columns.
#[derive(Deserialize)]
struct ContractEvent {
    ts: String,
    status: String,
    severity: String,
    kind: String,
    scope: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    dedup_key: String,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    risk: Option<f64>,
    #[serde(default)]
    eta_hours: Option<f64>,
}

impl AlertRow {
    /// Parses one alert event in the contract's JSON shape; the text is kept
    /// verbatim as the `event` column.
    pub fn from_json(json: &str) -> Result<Self, ExportError> {
        let e: ContractEvent =
            serde_json::from_str(json).map_err(|e| ExportError::AlertEvent(e.to_string()))?;
        let ts_ms = features::time::parse_timestamp(&e.ts)
            .ok_or_else(|| ExportError::AlertEvent(format!("ts {:?} is not RFC 3339", e.ts)))?;
        let check = |name: &str, value: &str, allowed: &[&str]| {
            if allowed.contains(&value) {
                Ok(())
            } else {
                Err(ExportError::AlertEvent(format!(
                    "{name} {value:?} is not one of {allowed:?}"
                )))
            }
        };
        check("status", &e.status, &["firing", "resolved"])?;
        check("severity", &e.severity, &["critical", "warning", "info"])?;
        check(
            "scope",
            &e.scope,
            &["gpu", "host", "rack", "cluster", "fleet"],
        )?;
        let labels = ALERT_LABEL_COLUMNS.map(|k| e.labels.get(k).cloned());
        Ok(AlertRow {
            ts_ms,
            status: e.status,
            severity: e.severity,
            kind: e.kind,
            scope: e.scope,
            dedup_key: e.dedup_key,
            labels,
            risk: e.risk,
            eta_hours: e.eta_hours,
            summary: e.summary,
            event: json.trim().to_string(),
        })
    }
}

/// The alerts table.
#[derive(Debug, Clone)]
pub struct AlertTable {
    schema: SchemaRef,
}

impl AlertTable {
    pub fn new() -> Self {
        let mut fields = vec![ArrowField::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        )];
        for name in ["status", "severity", "kind", "scope", "dedup_key"] {
            fields.push(ArrowField::new(name, DataType::Utf8, false));
        }
        for name in ALERT_LABEL_COLUMNS {
            fields.push(ArrowField::new(name, DataType::Utf8, true));
        }
        fields.push(ArrowField::new("risk", DataType::Float64, true));
        fields.push(ArrowField::new("eta_hours", DataType::Float64, true));
        fields.push(ArrowField::new("summary", DataType::Utf8, false));
        fields.push(ArrowField::new("event", DataType::Utf8, false));
        AlertTable {
            schema: Arc::new(Schema::new(fields)),
        }
    }
}

impl Default for AlertTable {
    fn default() -> Self {
        AlertTable::new()
    }
}

fn strings<'a>(n: usize, values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    let mut b = StringBuilder::with_capacity(n, n * 24);
    for v in values {
        b.append_option(v);
    }
    Arc::new(b.finish())
}

impl ExportTable for AlertTable {
    type Row = AlertRow;

    fn name(&self) -> &str {
        "alerts"
    }

    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn properties(&self) -> WriterProperties {
        let meta = vec![
            KeyValue::new(VERSION_KEY.to_string(), ALERTS_SCHEMA_VERSION.to_string()),
            KeyValue::new(TABLE_KEY.to_string(), "alerts".to_string()),
        ];
        base_properties(meta, []).build()
    }

    fn event_ms(row: &AlertRow) -> i64 {
        row.ts_ms
    }

    /// Alerts are never sampled out.
    fn gpu(_row: &AlertRow) -> Option<&str> {
        None
    }

    fn to_batch(&self, rows: &[AlertRow]) -> Result<RecordBatch, ExportError> {
        let n = rows.len();
        let ts = TimestampMillisecondArray::from(rows.iter().map(|r| r.ts_ms).collect::<Vec<_>>())
            .with_timezone("UTC");
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(ts),
            strings(n, rows.iter().map(|r| Some(r.status.as_str()))),
            strings(n, rows.iter().map(|r| Some(r.severity.as_str()))),
            strings(n, rows.iter().map(|r| Some(r.kind.as_str()))),
            strings(n, rows.iter().map(|r| Some(r.scope.as_str()))),
            strings(n, rows.iter().map(|r| Some(r.dedup_key.as_str()))),
        ];
        for i in 0..ALERT_LABEL_COLUMNS.len() {
            columns.push(strings(n, rows.iter().map(|r| r.labels[i].as_deref())));
        }
        columns.push(Arc::new(
            rows.iter().map(|r| r.risk).collect::<Float64Array>(),
        ));
        columns.push(Arc::new(
            rows.iter().map(|r| r.eta_hours).collect::<Float64Array>(),
        ));
        columns.push(strings(n, rows.iter().map(|r| Some(r.summary.as_str()))));
        columns.push(strings(n, rows.iter().map(|r| Some(r.event.as_str()))));
        RecordBatch::try_new(self.schema.clone(), columns).map_err(|source| ExportError::Batch {
            table: "alerts".to_string(),
            source,
        })
    }
}
