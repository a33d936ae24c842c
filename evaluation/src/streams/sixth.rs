//! A sixth set of families never tuned on, written on 2026-12-07 after the
//! fifth ([`super::fifth`]) was scored once on unchanged code (the grade lost
//! its standard profile there to the raw score), before anything is tried on
//! the grader for it: scored once, after the next change is final
//! (`streams --sixth`). Shapes of infrastructure metrics, no benchmark's:
//!
//! - `cpu_steps`: utilisation in per cent that moves between arbitrary
//!   workload levels every 100–400 rows (each drawn anew, 10–80 %); the
//!   event is saturation, pinned at 97–100 % for 200 rows;
//! - `two_modes`: each row drawn from one of two modes (a cache hit or
//!   miss, a near or far memory node), the far one 20–40 % of the time;
//!   the event is the far mode taking 75 % of the rows for 300 rows;
//! - `loss_rate`: a loss fraction near zero (a few in ten thousand) with
//!   short normal bursts of 1–3 % now and then; the event is a floor of
//!   half a per cent for 300 rows, well under any burst;
//! - `batch_jobs`: a quiet baseline with a batch job every 280–320 rows that
//!   raises it by a fixed amount for 30–50 rows; the event is a job that
//!   runs for 180 rows.
//!
//! Part of the stream benchmark (`streams/`).

use super::corpus::{Stream, between, start};

/// Rows of every stream.
const LEN: usize = 4_000;

/// The families, in report order.
pub const FAMILIES: [&str; 4] = ["cpu_steps", "two_modes", "loss_rate", "batch_jobs"];

/// `per_family` streams of each family for `seed`.
pub fn corpus(seed: u64, per_family: usize) -> Vec<Stream> {
    super::corpus::families(
        &FAMILIES,
        per_family,
        (seed, 7_000_003, 0x0006_CAFE_D00D),
        stream,
    )
}

fn stream(family: &'static str, seed: u64, index: usize) -> Stream {
    let (mut rng, scale, b, mut at) = start(seed, LEN);
    let mut values = Vec::with_capacity(LEN);
    match family {
        "cpu_steps" => {
            let noise = 1.0 + 3.0 * b;
            let (mut level, mut left) = (40.0, 0usize);
            for t in 0..LEN {
                if left == 0 {
                    level = 10.0 + 70.0 * rng.next_f64();
                    left = between(&mut rng, 100, 300);
                }
                left -= 1;
                let v = if t >= at && t < at + 200 {
                    100.0 - 3.0 * rng.next_f64()
                } else {
                    (level + noise * rng.next_gaussian()).clamp(0.0, 100.0)
                };
                values.push(v);
            }
        }
        "two_modes" => {
            let (near, far) = (scale * 10.0, scale * (25.0 + 15.0 * b));
            let usual = 0.2 + 0.2 * rng.next_f64();
            for t in 0..LEN {
                let share = if t >= at && t < at + 300 { 0.75 } else { usual };
                let mode = if rng.next_f64() < share { far } else { near };
                values.push(mode * (1.0 + 0.05 * rng.next_gaussian()));
            }
        }
        "loss_rate" => {
            let base = 0.0002 + 0.0003 * b;
            let mut burst = 0usize;
            for t in 0..LEN {
                if burst == 0 && rng.next_f64() < 1.0 / 250.0 {
                    burst = between(&mut rng, 2, 6);
                }
                let mut v = base * (1.0 + 0.5 * rng.next_gaussian()).max(0.0);
                if burst > 0 {
                    burst -= 1;
                    v += 0.01 + 0.02 * rng.next_f64();
                }
                if t >= at && t < at + 300 {
                    v += 0.005;
                }
                values.push(v);
            }
        }
        "batch_jobs" => {
            let lift = 5.0 + 10.0 * b;
            let mut next = between(&mut rng, 280, 40);
            let mut until = 0usize;
            // The event is the first job starting at or after `at`.
            let mut long = None;
            for t in 0..LEN {
                if t == next {
                    let len = if long.is_none() && t >= at {
                        long = Some(t);
                        180
                    } else {
                        between(&mut rng, 30, 20)
                    };
                    until = t + len;
                    next = t + between(&mut rng, 280, 40).max(len + 20);
                }
                let job = if t < until { lift } else { 0.0 };
                values.push(scale * (10.0 + job + rng.next_gaussian()));
            }
            // Its first 50 rows look like any job; the window is where it
            // outstays one.
            at = long.map_or(at, |t| t + 50);
        }
        _ => {}
    }
    Stream::new(family, seed, index, values, vec![at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_seeded_and_labelled_after_warm_up() {
        super::super::corpus::assert_seeded_and_labelled(corpus, FAMILIES.len(), LEN, 1);
    }
}
