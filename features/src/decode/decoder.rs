//! The one entry point every source uses to turn input bytes into samples:
//! a [`Decoder`] sniffs each message's encoding, hands it to its decoder,
//! assembles prometheus-kafka-adapter metrics into samples, and shares one
//! string interner across everything it reads.
//!
//! It exists so that the same bytes give the same samples, the same error
//! reasons and the same dead-letter payloads whether they arrive as a Kafka
//! message, a line of a file or a whole file: the sources only add where the
//! bytes came from ([`Position`]) and where the results go.
//!
//! Units of input: a Kafka message is one unit ([`Decoder::decode`]). A
//! file or stdin ([`Decoder::read`]) is one unit when its head sniffs as a
//! dcgm-exporter scrape or nvidia-smi output (those formats span lines), and
//! one unit per non-blank line otherwise (JSON lines of native samples or
//! adapter metrics); each line is decoded exactly as a message of the same
//! bytes would be.

use std::fmt;
use std::io::BufRead;

use super::{DecodeOutput, Encoding, adapter, capture, limits, native, nvsmi, prom, sniff};
use crate::error::DecodeError;
use crate::sample::Sample;

/// How long the adapter assembler waits for a GPU's other metrics of the
/// same timestamp, in event time, before it emits the sample (sources).
pub const ASSEMBLY_WAIT_MS: i64 = 2_000;

/// Where a unit of input came from: printed as the `source` of a dead
/// letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position<'a> {
    /// Line `line` (1-based, blank lines counted) of a file or `stdin`.
    Line { file: &'a str, line: usize },
    /// A whole file decoded as one unit (a scrape, a CSV table); the
    /// errors carry their own line numbers.
    File { file: &'a str },
    /// One Kafka message.
    Message {
        topic: &'a str,
        partition: i32,
        offset: i64,
    },
}

impl fmt::Display for Position<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Line { file, line } => write!(f, "{file}:{line}"),
            Position::File { file } => f.write_str(file),
            Position::Message {
                topic,
                partition,
                offset,
            } => write!(f, "{topic}/{partition}@{offset}"),
        }
    }
}

/// What one unit of input gave: its samples (take them), its errors, and
/// the bytes those errors refer to.
#[derive(Debug)]
pub struct Decoded<'a> {
    pub position: Position<'a>,
    /// The unit's bytes (a line without its line ending, a message, a
    /// file): what a dead letter carries.
    pub payload: &'a [u8],
    pub samples: &'a mut Vec<Sample>,
    pub errors: &'a [DecodeError],
    /// The last unit of a [`Decoder::read`] input: after it the
    /// assembler's pending samples have been emitted.
    pub last: bool,
}

/// Decodes messages and files of any encoding of the telemetry contract.
/// Keep one per stream: the interner and the adapter assembler carry over
/// from one message to the next.
#[derive(Debug)]
pub struct Decoder {
    out: DecodeOutput,
    assembler: adapter::Assembler,
    /// The event time of a whole-file scrape's samples that carry none
    /// ([`Decoder::set_scrape_time`]).
    scrape_ts_ms: i64,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new(ASSEMBLY_WAIT_MS)
    }
}

impl Decoder {
    /// `assembly_wait_ms`: how far event time must move past an adapter
    /// metric's timestamp before its sample is emitted.
    pub fn new(assembly_wait_ms: i64) -> Self {
        Decoder {
            out: DecodeOutput::default(),
            assembler: adapter::Assembler::new(assembly_wait_ms),
            scrape_ts_ms: 0,
        }
    }

    /// The scrape time of the next inputs [`Decoder::read`] reads: the
    /// event time of a dcgm-exporter scrape's samples without a timestamp
    /// (its `/metrics` has none). Default 0, the epoch.
    pub fn set_scrape_time(&mut self, ts_ms: i64) {
        self.scrape_ts_ms = ts_ms;
    }

    /// The scrape time [`Decoder::set_scrape_time`] set.
    pub fn scrape_time(&self) -> i64 {
        self.scrape_ts_ms
    }

    /// Decodes one self-contained message. `default_ts_ms` is the event
    /// time of formats that may omit it (a scrape without timestamps).
    /// The output holds this message's errors and every sample it
    /// completed (adapter samples complete later, in a later message's
    /// output or [`Decoder::finish`]'s).
    pub fn decode(&mut self, bytes: &[u8], default_ts_ms: i64) -> &mut DecodeOutput {
        if bytes.len() > limits::MAX_UNIT_BYTES {
            self.out.clear();
            self.out.errors.push(DecodeError::TooLarge {
                len: bytes.len(),
                max: limits::MAX_UNIT_BYTES,
            });
            return &mut self.out;
        }
        self.decode_any(bytes, default_ts_ms)
    }

    /// [`Decoder::decode`] without the size limit on the unit: a whole
    /// scrape or CSV file, however long (the per-sample limits hold).
    pub fn decode_any(&mut self, bytes: &[u8], default_ts_ms: i64) -> &mut DecodeOutput {
        self.out.clear();
        let out = &mut self.out;
        match sniff(bytes) {
            Some(Encoding::Native) => native::decode_into(bytes, out),
            Some(Encoding::PromText) => prom::decode_into(bytes, default_ts_ms, out),
            Some(Encoding::NvidiaSmiCsv) => nvsmi::decode_into(bytes, out),
            Some(Encoding::NvidiaSmiCapture) => capture::decode_capture(bytes, out),
            Some(Encoding::NvidiaSmiQuery) => capture::refuse_query_report(out),
            Some(Encoding::Adapter) => match adapter::parse(bytes) {
                Ok(m) => self.assembler.push(m, out),
                Err(e) => out.errors.push(e),
            },
            None if bytes.iter().all(u8::is_ascii_whitespace) => {
                out.errors.push(DecodeError::Empty)
            }
            // Binary garbage says so; text in no known shape is unknown.
            None if std::str::from_utf8(bytes).is_err() => out.errors.push(DecodeError::NotUtf8),
            None => out.errors.push(DecodeError::UnknownEncoding),
        }
        limits::enforce(&mut out.samples, &mut out.errors);
        &mut self.out
    }

    /// Emits every sample the assembler still holds (end of input).
    pub fn finish(&mut self) -> &mut DecodeOutput {
        self.out.clear();
        self.assembler.flush_all(&mut self.out);
        limits::enforce(&mut self.out.samples, &mut self.out.errors);
        &mut self.out
    }

    /// Adapter groups still waiting for stragglers.
    pub fn pending(&self) -> usize {
        self.assembler.pending()
    }

    /// Reads a file or stdin to its end, calling `each` once per unit (see
    /// the module header) and once more with `last` set for what the
    /// assembler held. `file` names the input in positions. A whole-file
    /// unit's samples come sorted by event time (a file may hold many
    /// scrapes). Stops at the first error of the reader or of `each`.
    pub fn read<E: From<std::io::Error>>(
        &mut self,
        mut reader: impl BufRead,
        file: &str,
        mut each: impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let whole = sniff(reader.fill_buf()?).is_some_and(Encoding::whole_file);
        if whole {
            let mut bytes = Vec::new();
            reader.read_to_end(&mut bytes)?;
            let out = self.decode_any(&bytes, self.scrape_ts_ms);
            out.samples.sort_by_key(|s| s.ts_ms);
            return each(Decoded {
                position: Position::File { file },
                payload: &bytes,
                samples: &mut out.samples,
                errors: &out.errors,
                last: true,
            });
        }
        let mut line = Vec::with_capacity(4096);
        let mut n = 0usize;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            n += 1;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let payload = trim_line_end(&line);
            let out = self.decode(payload, 0);
            each(Decoded {
                position: Position::Line { file, line: n },
                payload,
                samples: &mut out.samples,
                errors: &out.errors,
                last: false,
            })?;
        }
        let out = self.finish();
        each(Decoded {
            position: Position::File { file },
            payload: b"",
            samples: &mut out.samples,
            errors: &out.errors,
            last: true,
        })
    }
}

/// A line without its `\n` or `\r\n`: the bytes a producer would have sent
/// as a message.
fn trim_line_end(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Decodes one message or a whole file with a fresh decoder, emitting
/// adapter samples at once: for tests and one-off checks, not for streams
/// (no limit on the input's size; the per-sample limits hold).
pub fn decode(bytes: &[u8], default_ts_ms: i64) -> DecodeOutput {
    let mut d = Decoder::new(0);
    d.decode_any(bytes, default_ts_ms);
    d.assembler.flush_all(&mut d.out);
    d.out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADAPTER: &str = r#"{"timestamp":"2026-11-29T17:00:00Z","value":"60","name":"DCGM_FI_DEV_GPU_TEMP","labels":{"UUID":"GPU-a"}}"#;

    fn read_all(text: &str) -> Vec<(String, Vec<&'static str>, String, usize)> {
        let mut d = Decoder::default();
        let mut units = Vec::new();
        d.read(text.as_bytes(), "f.jsonl", |u: Decoded<'_>| {
            units.push((
                u.position.to_string(),
                u.errors.iter().map(DecodeError::reason).collect(),
                String::from_utf8_lossy(u.payload).into_owned(),
                u.samples.len(),
            ));
            Ok::<_, std::io::Error>(())
        })
        .expect("in-memory read");
        units
    }

    #[test]
    fn lines_keep_their_own_reason_position_and_bytes() {
        let text = format!(
            "{{\"gpu\":\"GPU-1\",\"ts\":1}}\r\n\n{{\"gpu\":\n\x01\x02\n{ADAPTER}\n{{\"ts\":1}}\n"
        );
        let units = read_all(&text);
        assert_eq!(
            units,
            vec![
                (
                    "f.jsonl:1".into(),
                    vec![],
                    "{\"gpu\":\"GPU-1\",\"ts\":1}".into(),
                    1
                ),
                (
                    "f.jsonl:3".into(),
                    vec!["invalid_json"],
                    "{\"gpu\":".into(),
                    0
                ),
                (
                    "f.jsonl:4".into(),
                    vec!["unknown_encoding"],
                    "\x01\x02".into(),
                    0
                ),
                ("f.jsonl:5".into(), vec![], ADAPTER.into(), 0),
                (
                    "f.jsonl:6".into(),
                    vec!["missing_gpu"],
                    "{\"ts\":1}".into(),
                    0
                ),
                ("f.jsonl".into(), vec![], String::new(), 1),
            ]
        );
    }

    #[test]
    fn a_scrape_file_is_one_unit() {
        let text = "# HELP x\nDCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-1\"} 60 2000\nDCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-1\"} 61 1000\nDCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-1\"\n";
        let mut d = Decoder::default();
        let mut seen = Vec::new();
        d.read(text.as_bytes(), "s.prom", |u: Decoded<'_>| {
            assert!(u.last);
            assert_eq!(u.payload, text.as_bytes());
            seen.push(u.position.to_string());
            let ts: Vec<i64> = u.samples.iter().map(|s| s.ts_ms).collect();
            assert_eq!(ts, vec![1000, 2000], "sorted by event time");
            assert_eq!(
                u.errors.iter().map(DecodeError::reason).collect::<Vec<_>>(),
                vec!["bad_line"]
            );
            Ok::<_, std::io::Error>(())
        })
        .expect("in-memory read");
        assert_eq!(seen, vec!["s.prom"]);
    }

    #[test]
    fn messages_and_lines_agree() {
        let mut d = Decoder::default();
        for bytes in [&b"   "[..], b"\x00", b"\xff\xfe", b"{\"gpu\":", b"[1]"] {
            let msg = d.decode(bytes, 0).errors.clone();
            assert_eq!(msg, decode(bytes, 0).errors);
            assert!(!msg.is_empty());
        }
        assert_eq!(d.decode(b" ", 0).errors, vec![DecodeError::Empty]);
        assert_eq!(d.decode(b"\xff", 0).errors, vec![DecodeError::NotUtf8]);
        assert_eq!(
            d.decode(b"\x01", 0).errors,
            vec![DecodeError::UnknownEncoding]
        );
    }
}
