//! File and stdin sources for backtest and replay. JSON lines are streamed
//! a line at a time; Parquet a record batch at a time; dcgm-exporter text
//! and nvidia-smi CSV files are decoded whole (scrapes are small).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::Context;
use datasets::parquet::TelemetryReader;
use features::decode::{DecodeOutput, Encoding, native, sniff};
use features::{Sample, decode};

use super::{BATCH, DeadLetters};
use crate::state::State;

/// Reads every input in order and hands batches of samples to `f`.
/// `-` is stdin. Returns the number of samples read.
pub fn read_inputs(
    inputs: &[PathBuf],
    state: &State,
    dead: &mut DeadLetters,
    mut f: impl FnMut(Vec<Sample>) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut total = 0u64;
    for path in inputs {
        let name = path.display().to_string();
        let mut emit = |batch: Vec<Sample>| -> anyhow::Result<()> {
            total += batch.len() as u64;
            state
                .metrics
                .samples_in
                .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
            f(batch)
        };
        if path.as_os_str() == "-" {
            read_lines(
                BufReader::new(std::io::stdin().lock()),
                "stdin",
                state,
                dead,
                &mut emit,
            )?;
        } else if path.extension().is_some_and(|e| e == "parquet") {
            read_parquet(path, &mut emit)?;
        } else {
            let file = std::fs::File::open(path).with_context(|| format!("opening {name}"))?;
            let mut reader = BufReader::with_capacity(1 << 20, file);
            let head = reader
                .fill_buf()
                .with_context(|| format!("reading {name}"))?;
            match sniff(head) {
                Some(Encoding::Native | Encoding::Adapter) | None => {
                    read_lines(reader, &name, state, dead, &mut emit)?
                }
                Some(Encoding::PromText | Encoding::NvidiaSmiCsv) => {
                    let mut bytes = Vec::new();
                    reader
                        .read_to_end(&mut bytes)
                        .with_context(|| format!("reading {name}"))?;
                    let out = decode(&bytes, 0);
                    for e in &out.errors {
                        dead.record(state, &name, e, b"");
                    }
                    let mut samples = out.samples;
                    samples.sort_by_key(|s| s.ts_ms);
                    for chunk in samples.chunks(BATCH) {
                        emit(chunk.to_vec())?;
                    }
                }
            }
        }
    }
    dead.flush();
    Ok(total)
}

fn read_parquet(
    path: &Path,
    emit: &mut impl FnMut(Vec<Sample>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut r =
        TelemetryReader::open(path).with_context(|| format!("opening {}", path.display()))?;
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        if r.next_batch(&mut batch)?.is_none() {
            return Ok(());
        }
        emit(batch)?;
    }
}

/// JSON lines (native samples or arrays; adapter messages are assembled).
fn read_lines(
    mut reader: impl BufRead,
    name: &str,
    state: &State,
    dead: &mut DeadLetters,
    emit: &mut impl FnMut(Vec<Sample>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut out = DecodeOutput::default();
    let mut asm = features::decode::adapter::Assembler::new(2_000);
    let mut line = Vec::with_capacity(4096);
    let mut batch = Vec::with_capacity(BATCH);
    let mut n = 0usize;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("reading {name}"))?;
        if read == 0 {
            break;
        }
        n += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.clear();
        match sniff(&line) {
            Some(Encoding::Adapter) => match features::decode::adapter::parse(&line) {
                Ok(m) => asm.push(m, &mut out),
                Err(e) => out.errors.push(e),
            },
            _ => native::decode_into(&line, &mut out),
        }
        for e in &out.errors {
            let e = features::DecodeError::Line {
                line: n,
                message: e.to_string(),
            };
            dead.record(state, name, &e, &line);
        }
        batch.append(&mut out.samples);
        if batch.len() >= BATCH {
            emit(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))?;
        }
    }
    out.clear();
    asm.flush_all(&mut out);
    batch.append(&mut out.samples);
    if !batch.is_empty() {
        emit(batch)?;
    }
    Ok(())
}
