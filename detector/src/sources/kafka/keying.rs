//! How the input topic is keyed, read off the first messages: a rack's
//! GPUs should share a partition (docs/inputs/kafka.md), because a
//! partition is what one instance owns when several share the consumer
//! group, and host / rack correlation and the rack-cooling check judge
//! only what one instance holds. Telemetry keyed by GPU UUID spreads every
//! rack over the partitions: it still works on one instance, so this says
//! so loudly (a WARN naming what is lost, once) rather than refusing it.

use features::Sample;

/// Messages with a rack label looked at before judging.
const JUDGE_AFTER: u32 = 200;
/// Share of them keyed by a GPU UUID that counts as "keyed by GPU".
const GPU_KEYED_SHARE: f64 = 0.9;

/// What the keying check concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keying {
    /// Not judged yet.
    Unknown,
    /// Keys carry a rack, host or anything coarser than a GPU.
    Grouped,
    /// Keys are GPU UUIDs while samples carry racks.
    ByGpu { gpu_keyed: u32, of: u32 },
}

/// Watches message keys until it can judge the topic's keying.
#[derive(Debug, Default)]
pub struct KeyCheck {
    seen: u32,
    gpu_keyed: u32,
    done: bool,
}

impl KeyCheck {
    /// Looks at one message: its key and the samples it decoded to. Returns
    /// the verdict once, when it is reached; `Unknown` before and after.
    pub fn observe(&mut self, key: Option<&[u8]>, samples: &[Sample]) -> Keying {
        if self.done {
            return Keying::Unknown;
        }
        let Some(first) = samples.first() else {
            return Keying::Unknown;
        };
        if first.topo.rack.as_deref().is_none_or(str::is_empty) {
            return Keying::Unknown;
        }
        self.seen += 1;
        let k = key.and_then(|k| std::str::from_utf8(k).ok());
        if k.is_some_and(|k| samples.iter().any(|s| &*s.gpu == k)) {
            self.gpu_keyed += 1;
        }
        if self.seen < JUDGE_AFTER {
            return Keying::Unknown;
        }
        self.done = true;
        if f64::from(self.gpu_keyed) >= GPU_KEYED_SHARE * f64::from(self.seen) {
            Keying::ByGpu {
                gpu_keyed: self.gpu_keyed,
                of: self.seen,
            }
        } else {
            Keying::Grouped
        }
    }
}

/// Says what a verdict means, once, in the log.
pub fn report(verdict: Keying, topic: &str) {
    if let Keying::ByGpu { gpu_keyed, of } = verdict {
        tracing::warn!(
            topic,
            gpu_keyed,
            of,
            "the input topic is keyed by GPU UUID ({gpu_keyed} of the first {of} messages \
             with a rack label): a rack's GPUs are spread over every partition, so with \
             several forewarn instances in the group each judges host and rack correlation \
             and rack cooling on fragments of racks (one instance alone is unaffected); \
             key by rack, as docs/inputs/kafka.md says (`forewarn replay --key rack`)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(gpu: &str, rack: Option<&str>) -> Sample {
        let mut s = Sample::new(gpu, 0);
        s.topo.rack = rack.map(Into::into);
        s
    }

    fn judge(key_of: impl Fn(usize) -> String, rack: Option<&str>) -> Keying {
        let mut c = KeyCheck::default();
        for i in 0..1000 {
            let s = sample(&format!("GPU-{}", i % 64), rack);
            let v = c.observe(Some(key_of(i).as_bytes()), std::slice::from_ref(&s));
            if v != Keying::Unknown {
                return v;
            }
        }
        Keying::Unknown
    }

    #[test]
    fn gpu_keys_are_reported_and_rack_keys_are_not() {
        assert_eq!(
            judge(|i| format!("GPU-{}", i % 64), Some("r1")),
            Keying::ByGpu {
                gpu_keyed: JUDGE_AFTER,
                of: JUDGE_AFTER
            }
        );
        assert_eq!(judge(|_| "r1".into(), Some("r1")), Keying::Grouped);
        // Without rack labels there is nothing to keep together.
        assert_eq!(judge(|i| format!("GPU-{}", i % 64), None), Keying::Unknown);
        // Said once.
        let mut c = KeyCheck::default();
        let s = sample("GPU-1", Some("r1"));
        let verdicts = (0..1000)
            .map(|_| c.observe(Some(b"GPU-1"), std::slice::from_ref(&s)))
            .filter(|v| *v != Keying::Unknown)
            .count();
        assert_eq!(verdicts, 1);
    }
}
