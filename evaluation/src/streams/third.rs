//! A third set of families never tuned on, written on 2026-12-06 before any
//! change to the grader that the second set ([`super::fresh`]) prompted:
//! once that set has shaped a change it no longer tests one, so this one
//! is scored once, after the change is final (`streams --third`). Each
//! family copies the shape of an operations metric, not any benchmark:
//!
//! - `bursty`: request counts (Poisson, 2–50 a row) with short bursts of
//!   1–5 rows at 3–8 times the rate every 100–400 rows (normal); the event
//!   is the rate rising 2.5 fold for 300 rows, or an outage (no requests)
//!   for 100 rows;
//! - `scheduled`: a daily cycle (288 rows) with a batch job at the same
//!   hour every day (8 rows up); the event is the job running at another
//!   hour, or the day's level stepping up by half the cycle;
//! - `latency`: log-normal latencies with 1 % of rows 3–6 times slower
//!   (normal outliers); the event is a slowdown growing to twice the
//!   latency over 400 rows and staying;
//! - `two_shifts`: autocorrelated noise with two level shifts of about
//!   the same size (3–5 deviations), each an event: the second must be
//!   found although the first looked alike.
//!
//! Part of the stream benchmark (`streams/`).

use features::rng::Xoshiro256PlusPlus;

use super::corpus::{Stream, onset, poisson};

/// Rows of every stream.
const LEN: usize = 4_000;
/// A day, in rows.
const DAY: f64 = 288.0;

/// The families, in report order.
pub const FAMILIES: [&str; 4] = ["bursty", "scheduled", "latency", "two_shifts"];

/// `per_family` streams of each family for `seed`.
pub fn corpus(seed: u64, per_family: usize) -> Vec<Stream> {
    super::corpus::families(
        &FAMILIES,
        per_family,
        (seed, 4_000_037, 0x0007_41D5_E7A1),
        stream,
    )
}

/// A Poisson draw of mean `lambda`: 0 for none, a rounded Gaussian above
/// 30 (means here stay under 400), Knuth's below.
fn counts(rng: &mut Xoshiro256PlusPlus, lambda: f64) -> f64 {
    if lambda <= 0.0 {
        return 0.0;
    }
    if lambda > 30.0 {
        return (lambda + lambda.sqrt() * rng.next_gaussian())
            .round()
            .max(0.0);
    }
    poisson(rng, lambda)
}

fn stream(family: &'static str, seed: u64, index: usize) -> Stream {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let scale = 10f64.powf(rng.next_f64() * 4.0 - 2.0);
    let (a, b) = (rng.next_f64(), rng.next_f64());
    let at = onset(&mut rng, LEN);
    let mut values = Vec::with_capacity(LEN);
    let mut events = vec![at];
    match family {
        "bursty" => {
            let lambda = 2.0 + 48.0 * b;
            let (mut next, mut left, mut gain) = (100 + (rng.next_f64() * 300.0) as usize, 0, 1.0);
            for t in 0..LEN {
                if t == next {
                    left = 1 + (rng.next_f64() * 5.0) as usize;
                    gain = 3.0 + 5.0 * rng.next_f64();
                    next = t + 100 + (rng.next_f64() * 300.0) as usize;
                }
                let burst = if left > 0 {
                    left -= 1;
                    gain
                } else {
                    1.0
                };
                let event = match (t >= at, a < 0.5) {
                    (true, true) if t < at + 300 => 2.5,
                    (true, false) if t < at + 100 => 0.0,
                    _ => 1.0,
                };
                values.push(scale * counts(&mut rng, lambda * burst * event));
            }
        }
        "scheduled" => {
            let offset = rng.next_f64() * 10.0;
            let hour = (rng.next_f64() * DAY) as usize;
            let moved = (hour + 96 + (b * 96.0) as usize) % DAY as usize;
            for t in 0..LEN {
                let phase = t % DAY as usize;
                let day = t / DAY as usize;
                let today = at / DAY as usize;
                // The event day's job runs elsewhere; it starts at that day's run.
                let job_at = if a < 0.5 && day == today + 1 {
                    moved
                } else {
                    hour
                };
                let job = if phase >= job_at && phase < job_at + 8 {
                    1.0
                } else {
                    0.0
                };
                let step = if a >= 0.5 && t >= at { 0.5 } else { 0.0 };
                let cycle = (std::f64::consts::TAU * t as f64 / DAY).sin();
                values.push(scale * (offset + cycle + job + step + 0.1 * rng.next_gaussian()));
            }
            if a < 0.5 {
                events = vec![(today_start(at) + DAY as usize + moved).min(LEN - 1)];
            }
        }
        "latency" => {
            let sigma = 0.3 + 0.3 * b;
            let base = rng.next_f64() * 3.0;
            for t in 0..LEN {
                let slow = if t >= at {
                    (t - at).min(400) as f64 / 400.0 * std::f64::consts::LN_2
                } else {
                    0.0
                };
                let outlier = if rng.next_f64() < 0.01 {
                    (3.0 + 3.0 * rng.next_f64()).ln()
                } else {
                    0.0
                };
                let log = base + slow + outlier + sigma * rng.next_gaussian();
                values.push(scale * log.exp());
            }
        }
        "two_shifts" => {
            let phi = 0.8 * b;
            let innovation = (1.0 - phi * phi).sqrt();
            let second = (at + 1200).min(LEN - 200);
            let size = 3.0 + 2.0 * a;
            let (mut s1, mut s2) = (1.0, 1.0);
            if rng.next_f64() < 0.5 {
                s1 = -1.0;
            }
            if rng.next_f64() < 0.5 {
                s2 = -1.0;
            }
            let mut x = 0.0f64;
            for t in 0..LEN {
                x = phi * x + innovation * rng.next_gaussian();
                let mut level = 0.0;
                if t >= at {
                    level += s1 * size;
                }
                if t >= second {
                    level += s2 * size;
                }
                values.push(scale * (50.0 + level + x));
            }
            events = vec![at, second];
        }
        _ => {}
    }
    Stream::new(family, seed, index, values, events)
}

/// The first row of the day holding row `t`.
fn today_start(t: usize) -> usize {
    t - t % DAY as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_seeded_and_labelled_after_warm_up() {
        super::super::corpus::assert_seeded_and_labelled(corpus, FAMILIES.len(), LEN, 2);
    }
}
