//! Failure labels: the contract's plain `gpu,ts,kind` CSV (RMA and repair
//! tickets) and the richer Parquet form the simulator writes (with precursor
//! onset and topology). Training and evaluation read either.

use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, RecordBatch, StringArray, StringBuilder, TimestampMillisecondArray,
    TimestampMillisecondBuilder,
};
use features::time::{format_rfc3339_s, parse_timestamp};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::DatasetError;
use crate::schema;

/// One known failure or incident.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Label {
    /// The GPU; `None` for incidents of a wider scope (a rack's cooling).
    pub gpu: Option<String>,
    /// When the failure happened (for stragglers and incidents: when the
    /// condition began), epoch ms.
    pub ts_ms: i64,
    /// A stable name: `hbm_ecc`, `thermal`, `nvlink`, `pcie`, `straggler`,
    /// `sudden_death`, `rack_cooling`, or a ticket's own kind.
    pub kind: String,
    /// When its precursor began, when known (simulator ground truth).
    pub onset_ms: Option<i64>,
    /// When a straggler or incident ended (exclusive), when it did.
    pub end_ms: Option<i64>,
    pub host: Option<String>,
    pub rack: Option<String>,
}

impl From<&crate::simulator::FailureLabel> for Label {
    fn from(l: &crate::simulator::FailureLabel) -> Self {
        Label {
            gpu: l.gpu.as_deref().map(str::to_string),
            ts_ms: l.failure_ms.unwrap_or(l.onset_ms),
            kind: l.kind.as_str().to_string(),
            onset_ms: Some(l.onset_ms),
            end_ms: l.end_ms,
            host: l.host.as_deref().map(str::to_string),
            rack: Some(l.rack.to_string()),
        }
    }
}

/// Writes the contract's `gpu,ts,kind` CSV: the labels that name a GPU
/// (wider incidents live in the Parquet form only).
pub fn write_csv(path: &Path, labels: &[Label]) -> Result<(), DatasetError> {
    let io = |e: std::io::Error| DatasetError::io(path.display(), e);
    let csv_err = |e: csv::Error| io(e.into());
    let mut w = csv::Writer::from_path(path).map_err(csv_err)?;
    w.write_record(["gpu", "ts", "kind"]).map_err(csv_err)?;
    for l in labels {
        if let Some(gpu) = &l.gpu {
            let ts = format_rfc3339_s(l.ts_ms);
            w.write_record([gpu.as_str(), &ts, &l.kind])
                .map_err(csv_err)?;
        }
    }
    w.flush().map_err(io)
}

/// Reads a `gpu,ts,kind` CSV (columns found by the header, in any order;
/// extra columns ignored; `#` lines are comments; cells are trimmed).
/// Errors name the line and, for a bad cell, its column.
pub fn read_csv(path: &Path) -> Result<Vec<Label>, DatasetError> {
    let f = std::fs::File::open(path).map_err(|e| DatasetError::io(path.display(), e))?;
    let bad = |line: u64, message: String| DatasetError::Csv {
        path: path.display().to_string(),
        line: usize::try_from(line).unwrap_or(usize::MAX),
        message,
    };
    let csv_err = |e: csv::Error| {
        let line = e.position().map_or(0, csv::Position::line);
        bad(line, e.to_string())
    };
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(BufReader::new(f));
    let header = reader.headers().map_err(csv_err)?.clone();
    let header_line = header.position().map_or(1, csv::Position::line);
    let find = |name: &str| {
        header
            .iter()
            .position(|c| c == name)
            .ok_or_else(|| bad(header_line, format!("header has no `{name}` column")))
    };
    let (g, t, k) = (find("gpu")?, find("ts")?, find("kind")?);
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_err)?;
        let line = record.position().map_or(0, csv::Position::line);
        let cell = |j: usize, name: &str| {
            record
                .get(j)
                .filter(|c| !c.is_empty())
                .ok_or_else(|| bad(line, format!("column {} (`{name}`) is missing", j + 1)))
        };
        let ts_text = cell(t, "ts")?;
        let ts_ms = parse_timestamp(ts_text).ok_or_else(|| {
            bad(
                line,
                format!("column {} (`ts`) is not RFC 3339: {ts_text:?}", t + 1),
            )
        })?;
        out.push(Label {
            gpu: Some(cell(g, "gpu")?.to_string()),
            ts_ms,
            kind: cell(k, "kind")?.to_string(),
            onset_ms: None,
            end_ms: None,
            host: None,
            rack: None,
        });
    }
    Ok(out)
}

/// Writes labels as Parquet (schema [`schema::labels`]).
pub fn write_parquet(path: &Path, labels: &[Label]) -> Result<(), DatasetError> {
    let f = std::fs::File::create(path).map_err(|e| DatasetError::io(path.display(), e))?;
    let mut gpu = StringBuilder::new();
    let mut kind = StringBuilder::new();
    let mut onset = TimestampMillisecondBuilder::new().with_timezone("UTC");
    let mut ts = TimestampMillisecondBuilder::new().with_timezone("UTC");
    let mut end = TimestampMillisecondBuilder::new().with_timezone("UTC");
    let mut host = StringBuilder::new();
    let mut rack = StringBuilder::new();
    for l in labels {
        gpu.append_option(l.gpu.as_deref());
        kind.append_value(&l.kind);
        onset.append_option(l.onset_ms);
        ts.append_value(l.ts_ms);
        end.append_option(l.end_ms);
        host.append_option(l.host.as_deref());
        rack.append_option(l.rack.as_deref());
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(gpu.finish()),
        Arc::new(kind.finish()),
        Arc::new(onset.finish()),
        Arc::new(ts.finish()),
        Arc::new(end.finish()),
        Arc::new(host.finish()),
        Arc::new(rack.finish()),
    ];
    let batch = RecordBatch::try_new(schema::labels(), cols)?;
    let mut w = ArrowWriter::try_new(f, schema::labels(), None)?;
    w.write(&batch)?;
    w.close()?;
    Ok(())
}

/// Reads labels from Parquet, or from CSV when the name ends in `.csv`.
pub fn read(path: &Path) -> Result<Vec<Label>, DatasetError> {
    if path.extension().is_some_and(|e| e == "csv") {
        return read_csv(path);
    }
    let f = std::fs::File::open(path).map_err(|e| DatasetError::io(path.display(), e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(f)?.build()?;
    let mismatch = |message: &str| DatasetError::Schema {
        path: path.display().to_string(),
        message: message.into(),
    };
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch?;
        let s = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| mismatch(name))
        };
        let t = |name: &str| {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<TimestampMillisecondArray>())
                .ok_or_else(|| mismatch(name))
        };
        let (gpu, kind, host, rack) = (s("gpu")?, s("kind")?, s("host")?, s("rack")?);
        let (onset, ts, end) = (t("onset")?, t("ts")?, t("end")?);
        for i in 0..batch.num_rows() {
            let opt = |a: &StringArray| (!a.is_null(i)).then(|| a.value(i).to_string());
            out.push(Label {
                gpu: opt(gpu),
                kind: kind.value(i).to_string(),
                onset_ms: (!onset.is_null(i)).then(|| onset.value(i)),
                ts_ms: ts.value(i),
                end_ms: (!end.is_null(i)).then(|| end.value(i)),
                host: opt(host),
                rack: opt(rack),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_labels() -> Vec<Label> {
        vec![
            Label {
                gpu: Some("GPU-a".into()),
                ts_ms: 1_795_971_600_000,
                kind: "hbm_ecc".into(),
                onset_ms: Some(1_795_900_000_000),
                end_ms: None,
                host: Some("node-0001".into()),
                rack: Some("r01".into()),
            },
            Label {
                gpu: Some("GPU-b".into()),
                ts_ms: 1_795_971_660_000,
                kind: "sudden_death".into(),
                onset_ms: None,
                end_ms: None,
                host: None,
                rack: None,
            },
            Label {
                gpu: None,
                ts_ms: 1_795_971_000_000,
                kind: "rack_cooling".into(),
                onset_ms: Some(1_795_971_000_000),
                end_ms: Some(1_795_975_000_000),
                host: None,
                rack: Some("r03".into()),
            },
        ]
    }

    #[test]
    fn parquet_round_trip() {
        let dir = std::env::temp_dir().join(format!("fw-labels-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let p = dir.join("labels.parquet");
        write_parquet(&p, &sample_labels()).expect("write");
        assert_eq!(read(&p).expect("read"), sample_labels());
        let c = dir.join("labels.csv");
        write_csv(&c, &sample_labels()).expect("write csv");
        let back = read(&c).expect("read csv");
        assert_eq!(
            back.len(),
            2,
            "the rack incident names no GPU: Parquet only"
        );
        assert_eq!(
            (back[0].gpu.as_deref(), back[0].ts_ms, back[0].kind.as_str()),
            (Some("GPU-a"), 1_795_971_600_000, "hbm_ecc")
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn csv_errors_name_the_line() {
        let dir = std::env::temp_dir().join(format!("fw-labels-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let p = dir.join("bad.csv");
        std::fs::write(
            &p,
            "gpu,ts,kind\nGPU-a,2026-11-30T04:12:00Z,hbm_ecc\nGPU-b,yesterday,thermal\n",
        )
        .expect("write");
        let err = read_csv(&p).expect_err("bad ts").to_string();
        assert!(
            err.contains("line 3") && err.contains("column 2") && err.contains("yesterday"),
            "{err}"
        );
        std::fs::write(
            &p,
            "# tickets\n\nkind, gpu ,ts,note\n\n# a comment\nhbm_ecc,GPU-a,2026-11-30T04:12:00Z,x\nthermal,,2026-11-30T04:12:00Z\n",
        )
        .expect("write");
        let err = read_csv(&p).expect_err("no gpu").to_string();
        assert!(
            err.contains("line 7") && err.contains("column 2 (`gpu`)"),
            "{err}"
        );
        std::fs::write(&p, "gpu,when,kind\n").expect("write");
        let err = read_csv(&p).expect_err("no ts column").to_string();
        assert!(err.contains("line 1") && err.contains("`ts`"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
