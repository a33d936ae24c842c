//! nvidia-smi text that is not a CSV table: capture files (several
//! nvidia-smi commands' output under `# $ nvidia-smi …` banners, as
//! nvidia_gpu_exporter's captures are) and `nvidia-smi -q` reports.
//!
//! Saved without thinking, these used to sniff as Prometheus text and came
//! out as "0 samples, thousands of undecodable lines". Now a capture gives
//! the samples of its `--query-gpu … --format=csv` sections (decoded by
//! [`super::nvsmi`], with the file's own line numbers) and every other
//! section is skipped; a `-q` report, or a capture with no such section,
//! is one [`DecodeError::Unsupported`] that says what to run instead.

use super::{DecodeOutput, nvsmi};
use crate::error::DecodeError;

/// What to run instead of `nvidia-smi -q`: the CSV query of every property
/// forewarn reads, sampled every 30 s, or dcgm-exporter.
pub const INSTEAD: &str = "save `nvidia-smi --query-gpu=timestamp,uuid,name,temperature.gpu,temperature.memory,power.draw,power.limit,utilization.gpu,utilization.memory,clocks.current.sm,clocks.current.memory,memory.used,memory.free,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,retired_pages.pending,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure,pcie.link.gen.current,pcie.link.width.current --format=csv -l 30 > gpus.csv` (or dcgm-exporter's /metrics) and give forewarn that file";

/// A line that opens a capture section: `# $ nvidia-smi …`.
fn command_of(line: &str) -> Option<&str> {
    line.trim_end().strip_prefix("# $ ")
}

/// Whether a section's command prints a CSV table forewarn reads (a
/// header line first).
fn is_query_gpu(command: &str) -> bool {
    command.contains("--query-gpu=")
        && command.contains("--format=csv")
        && !command.contains("noheader")
}

/// Whether `head` (the first bytes of an input) is a capture file.
pub(crate) fn is_capture(head: &[u8]) -> bool {
    head.split(|b| *b == b'\n')
        .any(|l| l.starts_with(b"# $ nvidia-smi"))
}

/// Whether `head` is an `nvidia-smi -q` report (or quotes one).
pub(crate) fn is_query_report(head: &[u8]) -> bool {
    head.split(|b| *b == b'\n').any(|l| {
        let l = l.trim_ascii();
        l.starts_with(b"==============NVSMI LOG")
            || (l.starts_with(b"Attached GPUs") && l.contains(&b':'))
    })
}

/// Decodes the `--query-gpu` CSV sections of a capture file.
pub fn decode_capture(bytes: &[u8], out: &mut DecodeOutput) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        out.errors.push(DecodeError::NotUtf8);
        return;
    };
    // Lines outside the kept sections become blank, so the CSV decoder's
    // line numbers are the file's.
    let mut kept = String::with_capacity(text.len() / 8);
    let mut keep = false;
    let mut sections = 0usize;
    for line in text.lines() {
        if let Some(command) = command_of(line) {
            keep = is_query_gpu(command);
            sections += usize::from(keep);
        } else if line.starts_with("####") {
            // The banner's closing rule; the section's output follows.
        } else if keep && !line.starts_with('#') {
            kept.push_str(line);
        }
        kept.push('\n');
    }
    if sections == 0 {
        out.errors.push(DecodeError::Unsupported {
            format: "an nvidia-smi capture without a `--query-gpu … --format=csv` section",
            instead: INSTEAD,
        });
        return;
    }
    nvsmi::decode_into(kept.as_bytes(), out);
}

/// An `nvidia-smi -q` report: refused, saying what to run instead.
pub fn refuse_query_report(out: &mut DecodeOutput) {
    out.errors.push(DecodeError::Unsupported {
        format: "`nvidia-smi -q` output",
        instead: INSTEAD,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Field;

    const CAPTURE: &str = "#####\n# idle :: version\n# $ nvidia-smi --version\n#####\nNVIDIA-SMI version  : 590.48.01\n\n#####\n# idle :: query-gpu\n# $ nvidia-smi --query-gpu=timestamp,uuid,temperature.gpu --format=csv\n#####\ntimestamp, uuid, temperature.gpu\n2026/07/14 08:12:38.696, GPU-1, 41\n\n#####\n# $ nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid --format=csv\n#####\ntimestamp, gpu_uuid, pid\n2026/07/14 08:12:38.696, GPU-1, 77\n";

    #[test]
    fn a_capture_gives_its_query_gpu_rows_only() {
        assert!(is_capture(CAPTURE.as_bytes()));
        let mut out = DecodeOutput::default();
        decode_capture(CAPTURE.as_bytes(), &mut out);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        assert_eq!(out.samples.len(), 1, "compute-apps rows are not samples");
        assert_eq!(out.samples[0].metrics.get(Field::GpuTemp), Some(41.0));
    }

    #[test]
    fn errors_keep_the_files_line_numbers_and_no_csv_is_refused() {
        let bad = CAPTURE.replace("GPU-1, 41", "GPU-1, hot");
        let mut out = DecodeOutput::default();
        decode_capture(bad.as_bytes(), &mut out);
        assert!(
            matches!(out.errors.as_slice(), [DecodeError::Line { line: 12, .. }]),
            "{:?}",
            out.errors
        );
        let none = "# $ nvidia-smi -L\nGPU 0: H100\n";
        let mut out = DecodeOutput::default();
        decode_capture(none.as_bytes(), &mut out);
        assert_eq!(out.errors[0].reason(), "unsupported_format");
        assert!(out.errors[0].to_string().contains("--query-gpu="));
    }

    #[test]
    fn query_reports_are_recognised() {
        assert!(is_query_report(
            b"\n==============NVSMI LOG==============\n\nTimestamp : x\n"
        ));
        assert!(is_query_report(
            b"Some text\n```\nAttached GPUs                             : 8\n"
        ));
        assert!(!is_query_report(b"DCGM_FI_DEV_GPU_TEMP{UUID=\"a\"} 1\n"));
    }
}
