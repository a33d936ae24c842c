//! File and stdin sources for backtest, features, replay and `serve` on
//! files. JSON lines are streamed a line at a time; Parquet a record batch
//! at a time; dcgm-exporter text and nvidia-smi output are decoded whole
//! (scrapes are small). Decoding is the shared [`Decoder`]'s; this module
//! batches, dead-letters, expands directories and gives each scrape its
//! scrape time.
//!
//! dcgm-exporter's `/metrics` carries no timestamps, so a saved scrape
//! needs one from outside: for each input, the first of
//! 1. `--scrape-time` (one scrape file only: two files at one time would
//!    make the second a duplicate of the first),
//! 2. a time in the file's name (`2026-12-03T21:30:00Z`, `2026-12-03T21-30-00Z`,
//!    unix seconds or milliseconds),
//! 3. the file's modification time (logged, since a copy resets it),
//! 4. for stdin, the time it is read.
//!
//! A directory input stands for its files (not hidden, not recursive) in
//! the order of those times, then of names. Samples that carry their own
//! timestamp keep it. `nvidia-smi -q` output is refused: the read fails
//! with a message saying what to run instead.

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context;
use datasets::parquet::TelemetryReader;
use features::decode::{Decoded, Decoder, Encoding, Position};
use features::{DecodeError, Sample};

use super::{BATCH, DeadLetters};
use crate::state::State;

/// How inputs are read (the commands' flags).
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// `--scrape-time`: the scrape time of the one timestamp-less scrape.
    pub scrape_time_ms: Option<i64>,
}

/// Where an input's scrape time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeFrom {
    Flag,
    Name,
    Modified,
    ReadTime,
}

impl TimeFrom {
    fn describe(self) -> &'static str {
        match self {
            TimeFrom::Flag => "from --scrape-time",
            TimeFrom::Name => "from the file's name",
            TimeFrom::Modified => {
                "from the file's modification time (pass --scrape-time or put the time in the file's name to set it)"
            }
            TimeFrom::ReadTime => "the time it was read (pass --scrape-time to set it)",
        }
    }
}

/// Parses `--scrape-time`: RFC 3339 or unix milliseconds.
pub fn parse_scrape_time(text: &str) -> Result<i64, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse()
            .map_err(|_| format!("{text:?}: too large for unix milliseconds"));
    }
    features::time::parse_timestamp(t).ok_or_else(|| {
        format!("{text:?}: expected RFC 3339 (2026-12-03T21:30:00Z) or unix milliseconds")
    })
}

/// The time a file's name carries: RFC 3339 with `:` or `-` between the
/// time's fields (`:` is awkward in file names), fraction and offset
/// optional (none = UTC), or a run of 10 (unix seconds) or 13 (unix ms)
/// digits. The first such time wins.
pub fn time_in_name(name: &str) -> Option<i64> {
    let b = name.as_bytes();
    for i in 0..b.len() {
        if let Some(ts) = rfc3339_at(&b[i..]) {
            return Some(ts);
        }
    }
    let mut i = 0;
    while i < b.len() {
        let run = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if run == 0 {
            i += 1;
            continue;
        }
        let digits = std::str::from_utf8(&b[i..i + run]).ok()?;
        match run {
            10 => return digits.parse::<i64>().ok().map(|s| s * 1000),
            13 => return digits.parse().ok(),
            _ => i += run,
        }
    }
    None
}

/// An RFC 3339 time (time fields split by `:` or `-`) at the start of `b`.
fn rfc3339_at(b: &[u8]) -> Option<i64> {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd";
    if b.len() < SHAPE.len() {
        return None;
    }
    let mut text: Vec<u8> = Vec::with_capacity(40);
    for (i, want) in SHAPE.iter().enumerate() {
        let c = b[i];
        let ok = match want {
            b'd' => c.is_ascii_digit(),
            b'T' => matches!(c, b'T' | b't' | b'_'),
            b':' => matches!(c, b':' | b'-'),
            w => c == *w,
        };
        if !ok {
            return None;
        }
        text.push(match want {
            b'T' => b'T',
            b':' => b':',
            _ => c,
        });
    }
    let rest = &b[SHAPE.len()..];
    let frac = match rest.first() {
        Some(b'.') => match rest[1..].iter().take_while(|c| c.is_ascii_digit()).count() {
            0 => 0, // `.prom`, not a fraction
            n => 1 + n,
        },
        _ => 0,
    };
    text.extend_from_slice(&rest[..frac]);
    let zone = &rest[frac..];
    match zone.first() {
        Some(b'Z' | b'z') => text.push(b'Z'),
        Some(sign @ (b'+' | b'-'))
            if zone.len() >= 6
                && zone[1..3].iter().all(u8::is_ascii_digit)
                && matches!(zone[3], b':' | b'-')
                && zone[4..6].iter().all(u8::is_ascii_digit) =>
        {
            text.extend_from_slice(&[*sign, zone[1], zone[2], b':', zone[4], zone[5]]);
        }
        _ => {}
    }
    features::time::parse_timestamp(std::str::from_utf8(&text).ok()?)
}

fn modified_ms(path: &Path) -> Option<i64> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    let d = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

/// The scrape time an input's name or modification time gives (see the
/// module header; the flag is applied while reading).
fn own_time(path: &Path) -> Option<(i64, TimeFrom)> {
    if path.as_os_str() == "-" {
        return Some((crate::checkpoint::wall_ms(), TimeFrom::ReadTime));
    }
    let name = path.file_name()?.to_string_lossy();
    if let Some(ts) = time_in_name(&name) {
        return Some((ts, TimeFrom::Name));
    }
    modified_ms(path).map(|ts| (ts, TimeFrom::Modified))
}

/// The inputs with each directory replaced by its files, in scrape-time
/// order (then name order).
pub fn expand(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::with_capacity(inputs.len());
    for path in inputs {
        if path.as_os_str() == "-" || !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut files: Vec<(i64, PathBuf)> = Vec::new();
        for entry in
            std::fs::read_dir(path).with_context(|| format!("listing {}", path.display()))?
        {
            let p = entry
                .with_context(|| format!("listing {}", path.display()))?
                .path();
            let hidden = p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'));
            if p.is_file() && !hidden {
                files.push((own_time(&p).map_or(0, |(t, _)| t), p));
            }
        }
        anyhow::ensure!(!files.is_empty(), "{}: an empty directory", path.display());
        files.sort();
        out.extend(files.into_iter().map(|(_, p)| p));
    }
    Ok(out)
}

/// Reads every input in order and hands batches of samples to `f`, with
/// the default [`ReadOptions`]. `-` is stdin. Returns the number of
/// samples read.
pub fn read_inputs(
    inputs: &[PathBuf],
    state: &State,
    dead: &mut DeadLetters,
    f: impl FnMut(Vec<Sample>) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    read_inputs_with(inputs, &ReadOptions::default(), state, dead, f)
}

/// [`read_inputs`] with options: directories expanded, each scrape given
/// its scrape time, a refused format (an `nvidia-smi -q` report) an error.
pub fn read_inputs_with(
    inputs: &[PathBuf],
    opts: &ReadOptions,
    state: &State,
    dead: &mut DeadLetters,
    mut f: impl FnMut(Vec<Sample>) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut reader = FileReader::new(opts.clone());
    let mut total = 0u64;
    for path in expand(inputs)? {
        total += reader.read(&path, state, dead, &mut f)?;
    }
    dead.flush();
    Ok(total)
}

/// Reads inputs one at a time, with one decoder (its interner shared)
/// and the `--scrape-time` rule kept across them.
pub struct FileReader {
    opts: ReadOptions,
    decoder: Decoder,
    /// The scrape that took `--scrape-time`.
    flag_used_by: Option<String>,
}

impl FileReader {
    pub fn new(opts: ReadOptions) -> Self {
        FileReader {
            opts,
            decoder: Decoder::default(),
            flag_used_by: None,
        }
    }

    /// Reads one input (a file, not a directory; `-` is stdin) and hands
    /// batches of samples to `f`; returns the number of samples.
    pub fn read(
        &mut self,
        path: &Path,
        state: &State,
        dead: &mut DeadLetters,
        f: &mut dyn FnMut(Vec<Sample>) -> anyhow::Result<()>,
    ) -> anyhow::Result<u64> {
        let name = path.display().to_string();
        let mut total = 0u64;
        let mut emit = |batch: Vec<Sample>| -> anyhow::Result<()> {
            total += batch.len() as u64;
            state
                .metrics
                .samples_in
                .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
            f(batch)
        };
        if path.extension().is_some_and(|e| e == "parquet") {
            read_parquet(path, &mut emit)?;
            return Ok(total);
        }
        let time = match self.opts.scrape_time_ms {
            Some(ts) => Some((ts, TimeFrom::Flag)),
            None => own_time(path),
        };
        let (ts, from) = time.unwrap_or((crate::checkpoint::wall_ms(), TimeFrom::ReadTime));
        self.decoder.set_scrape_time(ts);
        let mut scrape = ScrapeSeen::default();
        let decoder = &mut self.decoder;
        let mut text = |reader: &mut dyn std::io::BufRead| {
            read_text(decoder, reader, &name, state, dead, &mut scrape, &mut emit)
        };
        if path.as_os_str() == "-" {
            text(&mut BufReader::new(std::io::stdin().lock()))?;
        } else {
            let file = std::fs::File::open(path).with_context(|| format!("opening {name}"))?;
            text(&mut BufReader::with_capacity(1 << 20, file))?;
        }
        if scrape.untimed > 0 {
            if from == TimeFrom::Flag
                && let Some(first) = self.flag_used_by.replace(name.clone())
            {
                anyhow::bail!(
                    "--scrape-time is the time of one scrape, but {first} and {name} are both scrapes without timestamps: drop the flag and put each scrape's time in its file name (e.g. dcgm-2026-12-03T21-30-00Z.prom), or keep their modification times"
                );
            }
            tracing::info!(
                file = %name,
                samples = scrape.untimed,
                "scrape without timestamps: scrape time {} {}",
                features::time::format_rfc3339(ts),
                from.describe()
            );
        }
        Ok(total)
    }
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

/// What a whole-file scrape held: samples that took the scrape time.
#[derive(Debug, Default)]
struct ScrapeSeen {
    untimed: usize,
}

/// The error of a whole-file unit in a format forewarn refuses.
pub fn refusal(unit: &Decoded<'_>) -> Option<anyhow::Error> {
    let Position::File { .. } = unit.position else {
        return None;
    };
    unit.errors.iter().find_map(|e| match e {
        // The read's context names the file.
        DecodeError::Unsupported { .. } => Some(anyhow::anyhow!("{e}")),
        _ => None,
    })
}

/// A text input through the decoder: a whole-file unit (a scrape, a CSV
/// table) goes out in batches of [`BATCH`]; lines collect until a batch is
/// full; the rest goes out at the end of the input.
fn read_text(
    decoder: &mut Decoder,
    reader: &mut dyn std::io::BufRead,
    name: &str,
    state: &State,
    dead: &mut DeadLetters,
    scrape: &mut ScrapeSeen,
    emit: &mut impl FnMut(Vec<Sample>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut batch = Vec::with_capacity(BATCH);
    let scrape_ts = decoder.scrape_time();
    decoder
        .read(reader, name, |unit: Decoded<'_>| -> anyhow::Result<()> {
            dead.record(state, &unit);
            if let Some(e) = refusal(&unit) {
                return Err(e);
            }
            if let Position::File { .. } = unit.position
                && !unit.payload.is_empty()
            {
                if features::sniff(unit.payload) == Some(Encoding::PromText) {
                    scrape.untimed = unit.samples.iter().filter(|s| s.ts_ms == scrape_ts).count();
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_file_names() {
        let t = features::time::parse_timestamp("2026-12-03T21:30:00Z").expect("time");
        for name in [
            "dcgm-2026-12-03T21:30:00Z.prom",
            "dcgm-2026-12-03T21-30-00Z.prom",
            "2026-12-03T21-30-00.prom",
            "n1_2026-12-03_21-30-00.txt",
            "scrape-1796333400.prom",
            "scrape-1796333400000.prom",
            "x-2026-12-03T22-30-00+01-00.prom",
        ] {
            assert_eq!(time_in_name(name), Some(t), "{name}");
        }
        assert_eq!(
            time_in_name("a-2026-12-03T21-30-00.250Z.prom"),
            Some(t + 250)
        );
        for name in ["metrics.prom", "gpu-12345.prom", "2026-12-03.prom"] {
            assert_eq!(time_in_name(name), None, "{name}");
        }
    }

    #[test]
    fn the_scrape_time_flag_reads_rfc3339_or_unix_ms() {
        assert_eq!(parse_scrape_time("1796333400000"), Ok(1_796_333_400_000));
        assert_eq!(
            parse_scrape_time("2026-12-03T21:30:00Z"),
            Ok(1_796_333_400_000)
        );
        assert!(parse_scrape_time("yesterday").is_err());
    }
}
