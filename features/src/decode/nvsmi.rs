//! `nvidia-smi --query-gpu=… --format=csv` decoder: the fourth encoding, for
//! shops without DCGM. The first line is the header (`power.draw [W]` style:
//! units in brackets), each further line one GPU. `N/A`, `[N/A]`, `Not
//! Supported` and `[Requested functionality has been deprecated]` are missing
//! values; units after numbers are stripped; `Yes`/`No` and `Active`/`Not
//! Active` are 1/0; hex bitmasks (`0x…`) are parsed. Lines starting with `#`
//! and blank lines are skipped; a second header line starts a new table.

use std::sync::Arc;

use super::{DecodeOutput, validate};
use crate::error::DecodeError;
use crate::field::Field;
use crate::sample::Sample;
use crate::time::parse_timestamp;

/// What one nvidia-smi property means to forewarn.
#[derive(Clone, Copy)]
enum Col {
    Ts,
    Gpu,
    Model,
    Host,
    Metric(Field),
    Ignore,
}

fn column(name: &str) -> Col {
    use Field::*;
    let name = name.split(" [").next().unwrap_or(name).trim();
    Col::Metric(match name {
        "timestamp" => return Col::Ts,
        "uuid" | "gpu_uuid" => return Col::Gpu,
        "name" | "gpu_name" => return Col::Model,
        "hostname" => return Col::Host,
        "temperature.gpu" => GpuTemp,
        "temperature.memory" => MemoryTemp,
        "power.draw" => PowerUsage,
        "power.limit" | "enforced.power.limit" => PowerLimit,
        "utilization.gpu" => GpuUtil,
        "utilization.memory" => MemCopyUtil,
        "utilization.encoder" => EncUtil,
        "utilization.decoder" => DecUtil,
        "clocks.current.sm" | "clocks.sm" => SmClock,
        "clocks.current.memory" | "clocks.mem" => MemClock,
        "memory.used" => FbUsed,
        "memory.free" => FbFree,
        "memory.reserved" => FbReserved,
        "fan.speed" => FanSpeed,
        "clocks_event_reasons.active" | "clocks_throttle_reasons.active" => ClocksEventReasons,
        "ecc.errors.corrected.volatile.total" => EccSbeVolTotal,
        "ecc.errors.uncorrected.volatile.total" => EccDbeVolTotal,
        "ecc.errors.corrected.aggregate.total" => EccSbeAggTotal,
        "ecc.errors.uncorrected.aggregate.total" => EccDbeAggTotal,
        "retired_pages.single_bit_ecc.count" | "retired_pages.sbe" => RetiredSbe,
        "retired_pages.double_bit.count" | "retired_pages.dbe" => RetiredDbe,
        "retired_pages.pending" => RetiredPending,
        "remapped_rows.correctable" => CorrectableRemappedRows,
        "remapped_rows.uncorrectable" => UncorrectableRemappedRows,
        "remapped_rows.pending" => RowRemapPending,
        "remapped_rows.failure" => RowRemapFailure,
        "pcie.link.gen.current" | "pcie.link.gen.gpucurrent" => PcieLinkGen,
        "pcie.link.width.current" => PcieLinkWidth,
        _ => return Col::Ignore,
    })
}

fn is_header(line: &str) -> bool {
    line.split(',')
        .any(|c| matches!(c.trim(), "uuid" | "gpu_uuid"))
}

/// nvidia-smi's ways of saying "no value".
fn is_missing(t: &str) -> bool {
    t.is_empty()
        || t.starts_with('[')
        || t.eq_ignore_ascii_case("N/A")
        || t == "Not Supported"
        || t == "Unknown Error"
}

/// A text cell, or `None` when nvidia-smi printed a missing marker.
fn text(cell: &str) -> Option<std::sync::Arc<str>> {
    (!is_missing(cell)).then(|| Arc::from(cell))
}

/// Parses one nvidia-smi value; `Ok(None)` is "missing".
fn value(text: &str) -> Result<Option<f64>, ()> {
    let t = text.trim();
    if is_missing(t) {
        return Ok(None);
    }
    match t {
        "Yes" | "Active" | "Enabled" => return Ok(Some(1.0)),
        "No" | "Not Active" | "Disabled" | "None" => return Ok(Some(0.0)),
        _ => {}
    }
    if let Some(hex) = t.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16)
            .map(|v| Some(v as f64))
            .map_err(|_| ());
    }
    let number = t.split_ascii_whitespace().next().unwrap_or(t);
    number.parse::<f64>().map(Some).map_err(|_| ())
}

/// Decodes one or more CSV tables (header + rows) into `out`.
pub fn decode_into(bytes: &[u8], out: &mut DecodeOutput) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        out.errors.push(DecodeError::NotUtf8);
        return;
    };
    let mut cols: Option<Vec<Col>> = None;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if is_header(line) {
            cols = Some(line.split(',').map(column).collect());
            continue;
        }
        let Some(cols) = &cols else {
            out.errors.push(DecodeError::Line {
                line: i + 1,
                message: "data before the header line".into(),
            });
            continue;
        };
        match row(line, cols, out.samples.len()) {
            Ok(s) => out.samples.push(s),
            Err(message) => out.errors.push(DecodeError::Line {
                line: i + 1,
                message,
            }),
        }
    }
}

fn row(line: &str, cols: &[Col], index: usize) -> Result<Sample, String> {
    let cells: Vec<&str> = line.split(',').collect();
    if cells.len() != cols.len() {
        return Err(format!("{} values for {} columns", cells.len(), cols.len()));
    }
    let mut s = Sample::new("", i64::MIN);
    for (col, cell) in cols.iter().zip(&cells) {
        let cell = cell.trim();
        match *col {
            Col::Ts => {
                s.ts_ms = parse_timestamp(cell).ok_or_else(|| format!("bad timestamp {cell:?}"))?
            }
            Col::Gpu => s.gpu = text(cell).unwrap_or_else(|| Arc::from("")),
            Col::Model => s.topo.model = text(cell),
            Col::Host => s.topo.host = text(cell),
            Col::Metric(f) => {
                let v =
                    value(cell).map_err(|()| format!("{}: not a number: {cell:?}", f.name()))?;
                if let Some(v) = v
                    .map(|v| validate(index, f, v))
                    .transpose()
                    .map_err(|e| e.to_string())?
                    .flatten()
                {
                    s.metrics.set(f, v);
                }
            }
            Col::Ignore => {}
        }
    }
    if s.gpu.is_empty() {
        return Err("no uuid".into());
    }
    if s.ts_ms == i64::MIN {
        return Err("no timestamp column".into());
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_missing_values() {
        let csv = "timestamp, name, uuid, power.draw [W], utilization.gpu [%], memory.used [MiB], retired_pages.pending, clocks_event_reasons.active\n\
                   2026/07/14 08:12:38.696, NVIDIA H100, GPU-1, 69.85 W, 0 %, 0 MiB, [N/A], 0x0000000000000001\n";
        let mut out = DecodeOutput::default();
        decode_into(csv.as_bytes(), &mut out);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        let s = &out.samples[0];
        assert_eq!(s.metrics.get(Field::PowerUsage), Some(69.85));
        assert_eq!(s.metrics.get(Field::RetiredPending), None);
        assert_eq!(s.metrics.get(Field::ClocksEventReasons), Some(1.0));
    }

    #[test]
    fn short_rows_and_rows_before_header_are_errors() {
        let mut out = DecodeOutput::default();
        decode_into(b"GPU-1, 5\nuuid, temperature.gpu\nGPU-1\n", &mut out);
        assert_eq!(out.errors.len(), 2);
        assert!(out.samples.is_empty());
    }
}
