//! File and stdin sources for backtest and replay. JSON lines are streamed
//! a line at a time; Parquet a record batch at a time; dcgm-exporter text
//! and nvidia-smi CSV files are decoded whole (scrapes are small). Decoding
//! is the shared [`Decoder`]'s; this module only batches and dead-letters.

use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::Context;
use datasets::parquet::TelemetryReader;
use features::Sample;
use features::decode::{Decoded, Decoder, Position};

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
    let mut decoder = Decoder::default();
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
            let stdin = BufReader::new(std::io::stdin().lock());
            read_text(&mut decoder, stdin, "stdin", state, dead, &mut emit)?;
        } else if path.extension().is_some_and(|e| e == "parquet") {
            read_parquet(path, &mut emit)?;
        } else {
            let file = std::fs::File::open(path).with_context(|| format!("opening {name}"))?;
            let reader = BufReader::with_capacity(1 << 20, file);
            read_text(&mut decoder, reader, &name, state, dead, &mut emit)?;
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
        let mut batch = crate::pipeline::buffers::take(BATCH);
        if r.next_batch(&mut batch)?.is_none() {
            crate::pipeline::buffers::give(batch);
            return Ok(());
        }
        emit(batch)?;
    }
}

/// A text input through the decoder: a whole-file unit (a scrape, a CSV
/// table) goes out in batches of [`BATCH`]; lines collect until a batch is
/// full; the rest goes out at the end of the input.
fn read_text(
    decoder: &mut Decoder,
    reader: impl std::io::BufRead,
    name: &str,
    state: &State,
    dead: &mut DeadLetters,
    emit: &mut impl FnMut(Vec<Sample>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut batch = Vec::with_capacity(BATCH);
    decoder
        .read(reader, name, |unit: Decoded<'_>| -> anyhow::Result<()> {
            dead.record(state, &unit);
            if let Position::File { .. } = unit.position
                && !unit.payload.is_empty()
            {
                for chunk in unit.samples.chunks(BATCH) {
                    emit(chunk.to_vec())?;
                }
                return Ok(());
            }
            batch.append(unit.samples);
            if batch.len() >= BATCH || (unit.last && !batch.is_empty()) {
                let next = crate::pipeline::buffers::take(BATCH);
                emit(std::mem::replace(&mut batch, next))?;
            }
            Ok(())
        })
        .with_context(|| format!("reading {name}"))
}
