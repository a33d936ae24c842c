//! The map's wire format: one binary frame per answer, a small JSON header
//! followed by little-endian columns the page views in place as typed
//! arrays (no parsing per GPU). `GET /v1/map` and `GET /v1/map/states` both
//! answer with one.
//!
//! ```text
//! 0      "FWM1"
//! 4      u32: header length H
//! 8      header: UTF-8 JSON object; its "cols" lists the columns in order,
//!        each {"name", "type" ("u8" | "u32"), "len" (elements)}
//! 8+H    zero padding to a multiple of 8, then each column's bytes, each
//!        padded to a multiple of 8
//! ```

use axum::body::Bytes;
use serde_json::{Map, Value, json};

/// The first four bytes of every frame.
pub const MAGIC: &[u8; 4] = b"FWM1";

/// An element type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col<'a> {
    U8(&'a [u8]),
    U32(&'a [u32]),
}

impl Col<'_> {
    fn type_name(self) -> &'static str {
        match self {
            Col::U8(_) => "u8",
            Col::U32(_) => "u32",
        }
    }

    fn len(self) -> usize {
        match self {
            Col::U8(v) => v.len(),
            Col::U32(v) => v.len(),
        }
    }

    fn byte_len(self) -> usize {
        match self {
            Col::U8(v) => v.len(),
            Col::U32(v) => v.len() * 4,
        }
    }

    fn write(self, out: &mut Vec<u8>) {
        match self {
            Col::U8(v) => out.extend_from_slice(v),
            Col::U32(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        }
    }
}

fn pad8(out: &mut Vec<u8>) {
    out.resize(out.len().next_multiple_of(8), 0);
}

/// Encodes `header` (a JSON object; its `cols` is filled in here) and the
/// columns into one frame.
pub fn encode(mut header: Map<String, Value>, cols: &[(&str, Col<'_>)]) -> Bytes {
    let list: Vec<Value> = cols
        .iter()
        .map(|(name, c)| json!({"name": name, "type": c.type_name(), "len": c.len()}))
        .collect();
    header.insert("cols".into(), Value::Array(list));
    let head = Value::Object(header).to_string();
    let body: usize = cols.iter().map(|(_, c)| c.byte_len() + 7).sum();
    let mut out = Vec::with_capacity(16 + head.len() + body);
    out.extend_from_slice(MAGIC);
    // A header over 4 GiB cannot happen: names are bounded by the fleet.
    out.extend_from_slice(&(head.len() as u32).to_le_bytes());
    out.extend_from_slice(head.as_bytes());
    pad8(&mut out);
    for (_, c) in cols {
        c.write(&mut out);
        pad8(&mut out);
    }
    Bytes::from(out)
}

/// A decoded frame, for tests: the header and each column widened to u64.
#[cfg(test)]
pub fn decode(b: &[u8]) -> (Value, std::collections::BTreeMap<String, Vec<u64>>) {
    assert_eq!(&b[..4], MAGIC, "magic");
    let hlen = u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")) as usize;
    let header: Value = serde_json::from_slice(&b[8..8 + hlen]).expect("header json");
    let mut off = (8 + hlen).next_multiple_of(8);
    let mut cols = std::collections::BTreeMap::new();
    for c in header["cols"].as_array().expect("cols") {
        let len = c["len"].as_u64().expect("len") as usize;
        let (size, get): (usize, fn(&[u8]) -> u64) = match c["type"].as_str().expect("type") {
            "u8" => (1, |x| u64::from(x[0])),
            "u32" => (4, |x| {
                u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            }),
            t => panic!("unknown column type {t}"),
        };
        let v = b[off..off + len * size].chunks(size).map(get).collect();
        cols.insert(c["name"].as_str().expect("name").to_string(), v);
        off = (off + len * size).next_multiple_of(8);
    }
    assert_eq!(off, b.len(), "no trailing bytes");
    (header, cols)
}

/// `GET /v1/map`: header {layout_version, n, clusters, rack_names,
/// rack_cluster, host_names, host_rack, models}; columns `gpu_host`,
/// `gpu_model` (u32 per cell), `gpu_id_end` (u32 per cell: end offset of
/// its id in `gpu_id_bytes`) and `gpu_id_bytes` (the ids' UTF-8, back to
/// back).
pub fn layout(l: &super::cells::Layout) -> Bytes {
    let mut ids = Vec::with_capacity(l.gpu_ids.iter().map(|s| s.len()).sum());
    let mut ends = Vec::with_capacity(l.gpu_ids.len());
    for id in &l.gpu_ids {
        ids.extend_from_slice(id.as_bytes());
        // The ids of one fleet stay far below 4 GiB.
        ends.push(ids.len() as u32);
    }
    let header = object(json!({
        "layout_version": l.layout_version,
        "n": l.gpu_ids.len(),
        "clusters": l.clusters,
        "rack_names": l.rack_names,
        "rack_cluster": l.rack_cluster,
        "host_names": l.host_names,
        "host_rack": l.host_rack,
        "models": l.models,
    }));
    encode(
        header,
        &[
            ("gpu_host", Col::U32(&l.gpu_host)),
            ("gpu_model", Col::U32(&l.gpu_model)),
            ("gpu_id_end", Col::U32(&ends)),
            ("gpu_id_bytes", Col::U8(&ids)),
        ],
    )
}

/// `GET /v1/map/states`: header {layout_version, version, full, n,
/// jobs_from, jobs}; columns `idx` (u32, absent when `full`: then every
/// cell in order), `job` (u32), `state` and `risk` (u8), `n` long.
pub fn states(d: &super::cells::Delta) -> Bytes {
    let header = object(json!({
        "layout_version": d.layout_version,
        "version": d.version,
        "full": d.full,
        "n": d.state.len(),
        "jobs_from": d.jobs_from,
        "jobs": d.jobs,
    }));
    let mut cols = Vec::with_capacity(4);
    if !d.full {
        cols.push(("idx", Col::U32(&d.idx)));
    }
    cols.push(("job", Col::U32(&d.job)));
    cols.push(("state", Col::U8(&d.state)));
    cols.push(("risk", Col::U8(&d.risk)));
    encode(header, &cols)
}

/// The map inside a JSON object (`json!` of an object literal).
fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}
