//! Labels from what the service recorded, besides the telemetry itself:
//! the exported `alerts` table (what paged) and operator labels
//! (`POST /v1/labels`, the contract's `gpu,ts,kind` CSV, where `false_alarm`
//! means "this alert was wrong"). RMA / ticket CSVs are read by
//! [`crate::labels::read`].
//!
//! From the alerts table, a firing GPU alert of a kind that means the GPU
//! has failed ([`ALERT_FAILURE_KINDS`]) is a failure label at its time.
//! Predictive kinds (`hbm_ecc_trend`, …) are forecasts, not outcomes, and
//! are only counted. An operator's `false_alarm` on a GPU cancels the
//! alert-derived failure labels of that GPU within a day of it: the page
//! was wrong. Telemetry failures (a double-bit error read off the GPU)
//! stay: they are facts, not judgements.

use std::path::Path;

use arrow::array::{Array, StringArray, TimestampMillisecondArray};

use crate::error::DatasetError;
use crate::export::{list_files, read_file};
use crate::labels::Label;

/// Alert kinds whose firing means the GPU has failed.
pub const ALERT_FAILURE_KINDS: [&str; 2] = ["gpu_hard_failure", "gpu_lost"];

/// How far from an operator's `false_alarm` an alert label is cancelled.
pub const FALSE_ALARM_WINDOW_MS: i64 = 24 * 3_600_000;

/// What the alerts table held.
#[derive(Debug, Clone, Default)]
pub struct AlertLabels {
    /// Files read (0: no alerts table under the root).
    pub files: usize,
    /// Alert events read (firing and resolved).
    pub events: usize,
    /// Firing critical events (pages).
    pub pages: usize,
    /// Failure labels: firing GPU alerts of [`ALERT_FAILURE_KINDS`].
    pub labels: Vec<Label>,
}

fn schema_err(path: &Path, message: String) -> DatasetError {
    DatasetError::Schema {
        path: path.display().to_string(),
        message,
    }
}

/// Reads the alerts table under `root` for `[since_ms, until_ms)`. No
/// table: an empty result (exports of alerts may be off).
pub fn alert_labels(
    root: &Path,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
) -> Result<AlertLabels, DatasetError> {
    let mut out = AlertLabels::default();
    if !root.join("alerts").is_dir() {
        return Ok(out);
    }
    let (from, to) = (since_ms.unwrap_or(i64::MIN), until_ms.unwrap_or(i64::MAX));
    let files =
        list_files(root, "alerts", from, to).map_err(|e| schema_err(root, e.to_string()))?;
    for f in &files {
        out.files += 1;
        let batches = read_file(&f.path).map_err(|e| schema_err(&f.path, e.to_string()))?;
        for b in batches {
            let col = |name: &str| {
                b.column_by_name(name)
                    .ok_or_else(|| schema_err(&f.path, format!("missing column {name}")))
            };
            let strs = |name: &str| -> Result<&StringArray, DatasetError> {
                col(name)?
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .ok_or_else(|| schema_err(&f.path, format!("{name} is not Utf8")))
            };
            let ts = col("ts")?
                .as_any()
                .downcast_ref::<TimestampMillisecondArray>()
                .ok_or_else(|| schema_err(&f.path, "ts is not Timestamp(ms)".into()))?;
            let (status, severity, kind, scope, gpu) = (
                strs("status")?,
                strs("severity")?,
                strs("kind")?,
                strs("scope")?,
                strs("gpu")?,
            );
            for i in 0..b.num_rows() {
                let t = ts.value(i);
                if t < from || t >= to {
                    continue;
                }
                out.events += 1;
                let firing = status.value(i) == "firing";
                if firing && severity.value(i) == "critical" {
                    out.pages += 1;
                }
                if firing
                    && scope.value(i) == "gpu"
                    && !gpu.is_null(i)
                    && ALERT_FAILURE_KINDS.contains(&kind.value(i))
                {
                    out.labels.push(Label {
                        gpu: Some(gpu.value(i).to_string()),
                        ts_ms: t,
                        kind: kind.value(i).to_string(),
                        onset_ms: None,
                        end_ms: None,
                        host: None,
                        rack: None,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Removes from `labels` those an operator's `false_alarm` (in
/// `operator`) names: same GPU, within [`FALSE_ALARM_WINDOW_MS`]. Returns
/// how many were removed.
pub fn drop_false_alarms(labels: &mut Vec<Label>, operator: &[Label]) -> usize {
    let before = labels.len();
    labels.retain(|l| {
        !operator.iter().any(|o| {
            o.kind == "false_alarm"
                && o.gpu == l.gpu
                && (o.ts_ms - l.ts_ms).abs() <= FALSE_ALARM_WINDOW_MS
        })
    });
    before - labels.len()
}

/// Number of `false_alarm` labels.
pub fn false_alarms(labels: &[Label]) -> usize {
    labels.iter().filter(|l| l.kind == "false_alarm").count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(gpu: &str, ts_ms: i64, kind: &str) -> Label {
        Label {
            gpu: Some(gpu.into()),
            ts_ms,
            kind: kind.into(),
            onset_ms: None,
            end_ms: None,
            host: None,
            rack: None,
        }
    }

    #[test]
    fn a_false_alarm_cancels_the_alert_label_of_its_gpu_only() {
        let mut alerts = vec![
            label("GPU-a", 10 * 3_600_000, "gpu_lost"),
            label("GPU-b", 10 * 3_600_000, "gpu_lost"),
            label("GPU-a", 100 * 3_600_000, "gpu_hard_failure"),
        ];
        let operator = vec![
            label("GPU-a", 12 * 3_600_000, "false_alarm"),
            label("GPU-c", 10 * 3_600_000, "hbm_ecc"),
        ];
        assert_eq!(drop_false_alarms(&mut alerts, &operator), 1);
        assert_eq!(alerts.len(), 2);
        assert_eq!(alerts[0].gpu.as_deref(), Some("GPU-b"));
        // Days later, the same GPU's failure stands.
        assert_eq!(alerts[1].kind, "gpu_hard_failure");
        assert_eq!(false_alarms(&operator), 1);
    }

    #[test]
    fn no_alerts_table_is_no_labels() {
        let dir = std::env::temp_dir().join(format!("fw-nolabels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let a = alert_labels(&dir, None, None).expect("empty");
        assert_eq!((a.files, a.events, a.labels.len()), (0, 0, 0));
        std::fs::remove_dir_all(&dir).ok();
    }
}
