//! Size limits on what a decoded sample may carry, checked by the
//! [`super::Decoder`] right after decoding, before anything is kept: a GPU
//! id, a topology label or an unknown metric's name longer than its limit,
//! or more unknown metrics than the limit, refuses the sample with the
//! reason `too_long`; a message or line longer than [`MAX_UNIT_BYTES`] is
//! refused whole (`too_large`). These bound the memory one broken or
//! hostile exporter can take, whatever the count of its samples.

use crate::error::DecodeError;
use crate::sample::Sample;

/// Longest GPU id (a UUID is 40 bytes; MIG ids are longer).
pub const MAX_GPU_ID_BYTES: usize = 128;
/// Longest topology label (host, rack, cluster, model, job).
pub const MAX_LABEL_BYTES: usize = 256;
/// Most unknown metrics kept per sample.
pub const MAX_EXTRA_METRICS: usize = 64;
/// Longest message or JSON line (a dcgm-exporter scrape file, decoded
/// whole, is not a unit in this sense).
pub const MAX_UNIT_BYTES: usize = 1 << 20;

/// Moves samples over the limits from `samples` to `errors`; `first_index`
/// numbers the samples in error messages.
pub fn enforce(samples: &mut Vec<Sample>, errors: &mut Vec<DecodeError>) {
    if samples.iter().all(within) {
        return;
    }
    samples.retain(|s| match violation(s) {
        None => true,
        Some((field, len, max)) => {
            errors.push(DecodeError::TooLong {
                gpu: cut(&s.gpu, 64).to_string(),
                field,
                len,
                max,
            });
            false
        }
    });
}

fn within(s: &Sample) -> bool {
    violation(s).is_none()
}

fn violation(s: &Sample) -> Option<(&'static str, usize, usize)> {
    if s.gpu.len() > MAX_GPU_ID_BYTES {
        return Some(("gpu", s.gpu.len(), MAX_GPU_ID_BYTES));
    }
    let t = &s.topo;
    for (name, v) in [
        ("host", &t.host),
        ("rack", &t.rack),
        ("cluster", &t.cluster),
        ("model", &t.model),
        ("job", &t.job),
    ] {
        if let Some(v) = v
            && v.len() > MAX_LABEL_BYTES
        {
            return Some((name, v.len(), MAX_LABEL_BYTES));
        }
    }
    if s.extra.len() > MAX_EXTRA_METRICS {
        return Some(("metrics", s.extra.len(), MAX_EXTRA_METRICS));
    }
    if let Some((k, _)) = s.extra.iter().find(|(k, _)| k.len() > MAX_LABEL_BYTES) {
        return Some(("metric name", k.len(), MAX_LABEL_BYTES));
    }
    None
}

/// The first `max` bytes of `s`, on a character boundary.
pub fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn long_labels_and_ids_refuse_the_sample_with_the_field_named() {
        let ok = Sample::new("GPU-1", 0);
        let mut long_host = Sample::new("GPU-2", 0);
        long_host.topo.host = Some(Arc::from("h".repeat(10 << 20)));
        let long_id = Sample::new("G".repeat(200), 0);
        let mut samples = vec![ok, long_host, long_id];
        let mut errors = Vec::new();
        enforce(&mut samples, &mut errors);
        assert_eq!(samples.len(), 1);
        assert_eq!(errors.len(), 2);
        assert!(errors[0].to_string().contains("host"), "{}", errors[0]);
        assert_eq!(errors[0].reason(), "too_long");
        assert!(errors[1].to_string().contains("gpu"));
    }
}
