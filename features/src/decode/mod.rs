//! Decoders: bytes in any of the contract's encodings → [`Sample`]s, with a
//! typed error for every record that could not be decoded.
//!
//! Sources go through one [`Decoder`]: it sniffs a message (or file) once
//! ([`sniff`]) and hands it to one decoder: native JSON (object or array),
//! dcgm-exporter Prometheus text, prometheus-kafka-adapter JSON (one metric
//! per message, assembled by [`adapter::Assembler`]) or
//! `nvidia-smi --query-gpu … --format=csv`. nvidia-smi capture files and
//! `nvidia-smi -q` reports are recognised ([`capture`]): a capture's CSV
//! sections are decoded, a `-q` report is refused saying what to run.
//! Decoders never panic on any input (property-tested) and never let one bad
//! record spoil the good ones next to it.

pub mod adapter;
pub mod capture;
mod decoder;
mod intern;
pub mod limits;
pub mod native;
pub mod nvsmi;
pub mod prom;
pub mod series;
mod value;

pub use decoder::{ASSEMBLY_WAIT_MS, Decoded, Decoder, Position, decode};
pub use intern::Interner;
pub use value::{is_blank_sentinel, validate};

use crate::error::DecodeError;
use crate::sample::Sample;

/// The telemetry encodings of the contract, plus nvidia-smi CSV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `{"ts":…,"gpu":…,"metrics":{…}}` or an array of them.
    Native,
    /// A dcgm-exporter `/metrics` scrape.
    PromText,
    /// prometheus-kafka-adapter JSON: one metric per message.
    Adapter,
    /// `nvidia-smi --query-gpu=… --format=csv` output (header line first).
    NvidiaSmiCsv,
    /// Several nvidia-smi commands' output under `# $ nvidia-smi …`
    /// banners: the `--query-gpu` CSV sections are decoded.
    NvidiaSmiCapture,
    /// An `nvidia-smi -q` report: recognised, refused.
    NvidiaSmiQuery,
}

impl Encoding {
    /// A file of this encoding is one unit (its records span lines), not
    /// one unit per line.
    pub fn whole_file(self) -> bool {
        matches!(
            self,
            Encoding::PromText
                | Encoding::NvidiaSmiCsv
                | Encoding::NvidiaSmiCapture
                | Encoding::NvidiaSmiQuery
        )
    }
}

/// What decoding one message produced: every good sample and every error.
/// Reuse one per consumer (clear `samples` and `errors` between messages):
/// its interner then shares GPU ids and labels across messages.
#[derive(Debug, Default)]
pub struct DecodeOutput {
    pub samples: Vec<Sample>,
    pub errors: Vec<DecodeError>,
    pub interner: Interner,
}

impl DecodeOutput {
    /// Empties samples and errors, keeping the interner.
    pub fn clear(&mut self) {
        self.samples.clear();
        self.errors.clear();
    }
}

/// Guesses the encoding of one message or file from its first bytes.
pub fn sniff(bytes: &[u8]) -> Option<Encoding> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    let head = &bytes[start..bytes.len().min(start + 4096)];
    match head[0] {
        b'[' => Some(Encoding::Native),
        b'{' => {
            let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
            if has(b"\"labels\"") && has(b"\"name\"") && !has(b"\"metrics\"") {
                Some(Encoding::Adapter)
            } else {
                Some(Encoding::Native)
            }
        }
        _ if capture::is_capture(head) => Some(Encoding::NvidiaSmiCapture),
        _ if capture::is_query_report(head) => Some(Encoding::NvidiaSmiQuery),
        _ => {
            let first_line = head.split(|b| *b == b'\n').next().unwrap_or(head);
            let lower = first_line.to_ascii_lowercase();
            if first_line.contains(&b',')
                && lower.windows(4).any(|w| w == b"uuid")
                && !first_line.contains(&b'{')
            {
                Some(Encoding::NvidiaSmiCsv)
            } else if head[0] == b'#' || head[0].is_ascii_alphabetic() || head[0] == b'_' {
                Some(Encoding::PromText)
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_each_encoding() {
        assert_eq!(
            sniff(br#" {"gpu":"GPU-1","metrics":{}}"#),
            Some(Encoding::Native)
        );
        assert_eq!(sniff(br#"[{"gpu":"GPU-1"}]"#), Some(Encoding::Native));
        assert_eq!(
            sniff(br#"{"timestamp":"2026-01-01T00:00:00Z","value":"1","name":"DCGM_FI_DEV_GPU_TEMP","labels":{}}"#),
            Some(Encoding::Adapter)
        );
        assert_eq!(sniff(b"# HELP x\nx 1\n"), Some(Encoding::PromText));
        assert_eq!(
            sniff(b"timestamp, name, uuid, temperature.gpu\n"),
            Some(Encoding::NvidiaSmiCsv)
        );
        assert_eq!(
            sniff(b"####\n# idle\n# $ nvidia-smi -q\n####\n"),
            Some(Encoding::NvidiaSmiCapture)
        );
        assert_eq!(
            sniff(b"\n==============NVSMI LOG==============\n"),
            Some(Encoding::NvidiaSmiQuery)
        );
        assert_eq!(sniff(b"\x00\x01"), None);
        assert_eq!(sniff(b"   "), None);
    }

    #[test]
    fn empty_and_garbage_are_errors() {
        assert_eq!(decode(b"  \n", 0).errors, vec![DecodeError::Empty]);
        assert_eq!(
            decode(b"\x00\x01", 0).errors,
            vec![DecodeError::UnknownEncoding]
        );
    }
}
