//! `forewarn score`'s input side: the CSV header, the columns picked from
//! it, and the data rows parsed into batches on their own thread. The `csv`
//! crate does the splitting (quoted fields, `""` escapes, CRLF); this module
//! decides what a bad row is: too few fields, or a metric field that is not
//! a number. A bad row is still scored (its bad fields as missing) and is
//! reported with its line and column.

use std::borrow::Cow;
use std::io::Read;
use std::sync::mpsc;

use anyhow::{Context, Result, bail};

/// Rows per batch handed from the reader thread to the scorer; progress is
/// updated once per batch (updating per row would cost more than scoring).
pub(super) const BATCH_ROWS: usize = 4096;

/// Rows parsed by the reader thread, in input order.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// Timestamps, already quoted for output, back to back.
    pub ts: String,
    /// End of each row's timestamp in `ts`.
    pub ts_end: Vec<usize>,
    /// `metrics` values per row (NaN for missing or bad fields).
    pub values: Vec<f64>,
    /// Bad rows: index in the batch, line number, problem.
    pub bad: Vec<(usize, u64, String)>,
    /// Input bytes the batch covers (for the progress bar).
    pub bytes: u64,
}

/// A CSV reader over `input`: no header handling (the header is read as
/// the first record), rows of any length (short rows are reported, not
/// fatal).
pub(super) fn csv_reader<R: Read>(input: R) -> csv::Reader<R> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        // Records end at `\n` only: the csv crate's default CRLF mode ends a
        // record at the `\r` and counts the `\n` into the next record's
        // position, so every line number of a CRLF file came out one short.
        // The `\r` is taken off the last field by `read_record`.
        .terminator(csv::Terminator::Any(b'\n'))
        .buffer_capacity(1 << 16)
        .from_reader(input)
}

/// Reads one record, without the `\r` of a CRLF line ending.
pub(super) fn read_record<R: Read>(
    rdr: &mut csv::Reader<R>,
    rec: &mut csv::ByteRecord,
) -> csv::Result<bool> {
    if !rdr.read_byte_record(rec)? {
        return Ok(false);
    }
    let n = rec.len();
    if let Some(last) = rec.get(n.saturating_sub(1))
        && let Some(kept) = last.strip_suffix(b"\r")
    {
        let kept = kept.to_vec();
        rec.truncate(n - 1);
        rec.push_field(&kept);
    }
    Ok(true)
}

/// Reads the header row.
pub(super) fn read_header<R: Read>(rdr: &mut csv::Reader<R>) -> Result<Vec<String>> {
    let mut rec = csv::ByteRecord::new();
    if !read_record(rdr, &mut rec).context("failed to read the header")? {
        bail!("input is empty: a header row is required");
    }
    rec.iter()
        .enumerate()
        .map(|(i, f)| {
            String::from_utf8(f.to_vec())
                .map_err(|_| anyhow::anyhow!("line 1, column {}: header is not UTF-8", i + 1))
        })
        .collect()
}

/// Reads and parses rows on its own thread so that scoring, the bottleneck,
/// runs beside it (on the calling thread and the forest's tree-group threads).
pub(super) fn read_batches<R: Read>(
    mut rdr: csv::Reader<R>,
    header: &[String],
    time_col: usize,
    cols: &[usize],
    tx: &mpsc::SyncSender<Result<Batch>>,
) {
    let mut rec = csv::ByteRecord::new();
    let mut values = vec![0.0f64; cols.len()];
    loop {
        let mut batch = Batch::default();
        while batch.ts_end.len() < BATCH_ROWS {
            let before = rdr.position().byte();
            match read_record(&mut rdr, &mut rec) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    let _ = tx.send(Err(anyhow::Error::new(e).context("failed to read input")));
                    return;
                }
            }
            batch.bytes += rdr.position().byte() - before;
            let line_no = rec.position().map_or(0, csv::Position::line);
            if let Some(problem) = parse_row(&rec, header, time_col, cols, &mut values) {
                batch.bad.push((batch.ts_end.len(), line_no, problem));
            }
            let ts = rec.get(time_col).map(String::from_utf8_lossy);
            batch
                .ts
                .push_str(&quote_if_needed(ts.as_deref().unwrap_or("")));
            batch.ts_end.push(batch.ts.len());
            batch.values.extend_from_slice(&values);
        }
        let last = batch.ts_end.len() < BATCH_ROWS;
        if !batch.ts_end.is_empty() && tx.send(Ok(batch)).is_err() {
            return;
        }
        if last {
            return;
        }
    }
}

/// Parses one data row into `values` (NaN for missing or bad fields).
/// Returns the row's first problem, naming its column, if the row is bad.
pub(super) fn parse_row(
    rec: &csv::ByteRecord,
    header: &[String],
    time_col: usize,
    cols: &[usize],
    values: &mut [f64],
) -> Option<String> {
    let needed = cols.iter().copied().chain([time_col]).max().unwrap_or(0);
    if rec.len() <= needed {
        values.fill(f64::NAN);
        return Some(format!(
            "expected at least {} fields, found {}",
            needed + 1,
            rec.len()
        ));
    }
    let mut problem = None;
    for (v, &c) in values.iter_mut().zip(cols) {
        let column = || {
            let name = header.get(c).map_or("", String::as_str);
            format!("column {} ({name:?})", c + 1)
        };
        let Ok(f) = std::str::from_utf8(&rec[c]) else {
            problem.get_or_insert_with(|| format!("{} is not UTF-8", column()));
            *v = f64::NAN;
            continue;
        };
        let f = f.trim();
        *v = if f.is_empty() {
            f64::NAN
        } else {
            match f.parse::<f64>() {
                Ok(x) => x,
                Err(_) => {
                    problem.get_or_insert_with(|| format!("{} is not a number: {f:?}", column()));
                    f64::NAN
                }
            }
        };
    }
    problem
}

/// A column by header name, else by 0-based index.
pub(super) fn resolve_column(header: &[String], spec: &str) -> Result<usize> {
    if let Some(i) = header.iter().position(|h| h.trim() == spec) {
        return Ok(i);
    }
    match spec.parse::<usize>() {
        Ok(i) if i < header.len() => Ok(i),
        Ok(i) => bail!(
            "column index {i} is out of range: the header has {} columns",
            header.len()
        ),
        Err(_) => bail!("no column named {spec:?} in the header"),
    }
}

/// A field as CSV output writes it: quoted when it holds a separator,
/// quote or line break.
pub(super) fn quote_if_needed(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}
