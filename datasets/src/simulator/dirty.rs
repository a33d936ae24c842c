//! Dirty data, when `SimConfig::dirty` is on: the transport faults a real
//! telemetry pipeline sees. Samples are dropped, duplicated, or held back one
//! tick (a small reorder), and some messages arrive malformed: bytes the
//! decoder must reject (truncated JSON, missing `gpu`, absurd or non-finite
//! values, bad timestamps, non-UTF-8 garbage). A malformed message replaces
//! the sample it was carrying.
//!
//! Uses its own RNG stream, so a dirty run's underlying telemetry is the
//! clean run's, minus and plus the faults.

use std::io::Write as _;

use features::{Field, Sample};

use super::rng::SimRng;

/// Per-sample probabilities (dcgm-exporter scrapes behind Kafka lose or
/// repeat well under 1 %).
const P_DROP: f64 = 0.002;
const P_DUPLICATE: f64 = 0.001;
const P_REORDER: f64 = 0.001;
const P_MALFORMED: f64 = 0.000_5;
const P_ANY: f64 = P_DROP + P_DUPLICATE + P_REORDER + P_MALFORMED;

#[derive(Debug, Clone)]
pub(crate) struct Dirty {
    rng: SimRng,
    /// Held back this tick, emitted at the end of the next one.
    held: Vec<Sample>,
    /// Held back during the previous tick.
    releasing: Vec<Sample>,
    malformed: Vec<Vec<u8>>,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

impl Dirty {
    pub fn new(rng: SimRng) -> Dirty {
        Dirty {
            rng,
            held: Vec::new(),
            releasing: Vec::new(),
            malformed: Vec::new(),
            dropped: 0,
            duplicated: 0,
            reordered: 0,
        }
    }

    /// Starts a tick: what was held back last tick will be released at its end.
    pub fn begin_tick(&mut self) {
        std::mem::swap(&mut self.held, &mut self.releasing);
    }

    /// Applies a fault, or not, to the sample just pushed onto `out`: drop
    /// it, send it twice, hold it back a tick, or replace it with a malformed
    /// message. Working on the pushed sample avoids moving it twice.
    #[inline]
    pub fn after_push(&mut self, out: &mut Vec<Sample>) {
        let u = self.rng.f64();
        if u >= P_ANY {
            return;
        }
        let Some(s) = out.pop() else { return };
        if u < P_DROP {
            self.dropped += 1;
        } else if u < P_DROP + P_DUPLICATE {
            self.duplicated += 1;
            out.push(s.clone());
            out.push(s);
        } else if u < P_DROP + P_DUPLICATE + P_REORDER {
            self.reordered += 1;
            self.held.push(s);
        } else {
            let m = malformed(&s, &mut self.rng);
            self.malformed.push(m);
        }
    }

    /// Ends a tick: late samples from the previous tick arrive after this
    /// tick's; on the last tick nothing stays held.
    pub fn end_tick(&mut self, out: &mut Vec<Sample>, last: bool) {
        out.append(&mut self.releasing);
        if last {
            out.append(&mut self.held);
        }
    }

    /// Malformed messages since the last call.
    pub fn take_malformed(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.malformed)
    }
}

/// One undecodable rendering of `s`.
pub(crate) fn malformed(s: &Sample, rng: &mut SimRng) -> Vec<u8> {
    let temp = s.metrics.get(Field::GpuTemp).unwrap_or(40.0);
    let host = s.topo.host.as_deref().unwrap_or("node-0000");
    let mut b = Vec::with_capacity(160);
    // Writing to a Vec cannot fail.
    let _ = match rng.below(6) {
        0 => {
            // Truncated in flight.
            let full = format!(
                r#"{{"ts":{},"gpu":"{}","host":"{host}","metrics":{{"DCGM_FI_DEV_GPU_TEMP":{temp},"DCGM_FI_DEV_POWER_USAGE":1"#,
                s.ts_ms, s.gpu
            );
            let cut = full.len() * 3 / 4;
            b.extend_from_slice(&full.as_bytes()[..cut]);
            Ok(())
        }
        1 => write!(
            b,
            r#"{{"ts":{},"host":"{host}","metrics":{{"DCGM_FI_DEV_GPU_TEMP":{temp}}}}}"#,
            s.ts_ms
        ),
        2 => write!(
            b,
            r#"{{"ts":{},"gpu":"{}","metrics":{{"DCGM_FI_DEV_GPU_TEMP":{}}}}}"#,
            s.ts_ms,
            s.gpu,
            9_000.0 + temp
        ),
        3 => write!(
            b,
            r#"{{"ts":{},"gpu":"{}","metrics":{{"DCGM_FI_DEV_POWER_USAGE":NaN}}}}"#,
            s.ts_ms, s.gpu
        ),
        4 => write!(
            b,
            r#"{{"ts":"2026-13-45T99:00:00Z","gpu":"{}","metrics":{{"DCGM_FI_DEV_GPU_TEMP":{temp}}}}}"#,
            s.gpu
        ),
        _ => {
            b.extend_from_slice(&[0xFF, 0xFE, 0x00]);
            for _ in 0..4 {
                b.extend_from_slice(&rng.next_u64().to_le_bytes());
            }
            Ok(())
        }
    };
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_malformed_shape_is_reported_by_the_decoder() {
        let s = Sample::new(
            "GPU-3b1c5e2a-8f0d-4c6e-9a71-2d4f6b8c0e13",
            1_793_491_200_000,
        )
        .with(Field::GpuTemp, 64.0);
        let mut rng = SimRng::new(4);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let m = malformed(&s, &mut rng);
            seen.insert(m.first().copied());
            let out = features::decode(&m, s.ts_ms);
            // An out-of-range value leaves its field missing and keeps the
            // record (still reported); every other shape decodes nothing.
            assert!(
                out.samples
                    .iter()
                    .all(|x| x.metrics.get(Field::GpuTemp).is_none()),
                "decoded {:?} from {:?}",
                out.samples,
                String::from_utf8_lossy(&m)
            );
            assert!(
                !out.errors.is_empty(),
                "no error for {:?}",
                String::from_utf8_lossy(&m)
            );
        }
        assert!(seen.len() >= 2);
    }
}
