//! A seventh set of families never tuned on, written on 2026-12-07 after the
//! known states (`models::grading::known`) were built and the sixth set
//! ([`super::sixth`]) scored once: scored once, after the grade's next
//! change is final (`streams --seventh`). Whole-number and repeating
//! streams, where a row often repeats an earlier one exactly (what the
//! known states act on), as infrastructure metrics are:
//!
//! - `int_temperature`: a GPU's temperature in whole degrees following its
//!   load, busy and idle periods of 100–300 rows each, with a reading's
//!   ±1 °C dither; the event is the busy temperature 4 °C higher for 300
//!   rows from the first busy row at or after the drawn onset (the same
//!   load running hotter; an idle GPU shows nothing);
//! - `counter_resets`: a monotone counter growing by Poisson increments,
//!   reset to 0 every 400–800 rows (a process restart); the event is the
//!   increments tripling for 200 rows;
//! - `small_counts`: counts of 0–3 a row with a rare normal burst of
//!   5–8; the event is 200 rows of zeros (a source gone silent), every one
//!   of whose rows has been seen before;
//! - `heartbeat`: a 1 every 3–5 rows and 0 between; the event is 200 rows
//!   with every other beat missing.
//!
//! Part of the stream benchmark (`streams/`).

use super::corpus::{Stream, between, poisson, start};

/// Rows of every stream.
const LEN: usize = 4_000;

/// The families, in report order.
pub const FAMILIES: [&str; 4] = [
    "int_temperature",
    "counter_resets",
    "small_counts",
    "heartbeat",
];

/// `per_family` streams of each family for `seed`.
pub fn corpus(seed: u64, per_family: usize) -> Vec<Stream> {
    super::corpus::families(
        &FAMILIES,
        per_family,
        (seed, 8_000_009, 0x0007_5EED_BEEF),
        stream,
    )
}

fn stream(family: &'static str, seed: u64, index: usize) -> Stream {
    let (mut rng, _scale, b, mut at) = start(seed, LEN);
    let mut values = Vec::with_capacity(LEN);
    let during = |t: usize, len: usize| t >= at && t < at + len;
    // The int_temperature event's first row, when it differs from `at`.
    let mut onset = None;
    match family {
        "int_temperature" => {
            let (idle, busy) = (35.0 + 10.0 * b, 65.0 + 10.0 * b);
            let (mut temp, mut busy_now, mut left) = (idle, false, 0usize);
            for t in 0..LEN {
                if left == 0 {
                    busy_now = !busy_now;
                    left = between(&mut rng, 100, 200);
                }
                left -= 1;
                if onset.is_none() && busy_now && t >= at {
                    onset = Some(t);
                }
                let hot = match onset {
                    Some(o) if busy_now && t < o + 300 => 4.0,
                    _ => 0.0,
                };
                let target = if busy_now { busy + hot } else { idle };
                temp += (target - temp) / 20.0;
                let dither = rng.next_f64() - 0.5;
                values.push((temp + dither).round());
            }
        }
        "counter_resets" => {
            let lambda = 1.0 + 4.0 * b;
            let (mut total, mut next) = (0.0, between(&mut rng, 400, 400));
            for t in 0..LEN {
                if t == next {
                    total = 0.0;
                    next = t + between(&mut rng, 400, 400);
                }
                let rate = if during(t, 200) { 3.0 * lambda } else { lambda };
                total += poisson(&mut rng, rate);
                values.push(total);
            }
        }
        "small_counts" => {
            let lambda = 0.3 + 0.7 * b;
            for t in 0..LEN {
                let v = if during(t, 200) {
                    0.0
                } else if rng.next_f64() < 1.0 / 400.0 {
                    between(&mut rng, 5, 4) as f64
                } else {
                    poisson(&mut rng, lambda).min(3.0)
                };
                values.push(v);
            }
        }
        "heartbeat" => {
            let period = between(&mut rng, 3, 3);
            let mut beat = 0usize;
            for t in 0..LEN {
                let v = if t % period == 0 {
                    beat += 1;
                    // Every other beat missing during the event.
                    if during(t, 200) && beat.is_multiple_of(2) {
                        0.0
                    } else {
                        1.0
                    }
                } else {
                    0.0
                };
                values.push(v);
            }
        }
        _ => {}
    }
    at = onset.unwrap_or(at);
    Stream::new(family, seed, index, values, vec![at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_seeded_and_labelled_after_warm_up() {
        super::super::corpus::assert_seeded_and_labelled(corpus, FAMILIES.len(), LEN, 1);
    }

    /// Each event shows in its own stream from its labelled row: the hotter
    /// GPU is busy there, the silent source is silent, beats go missing.
    #[test]
    fn every_event_is_in_the_data_at_its_label() {
        for s in corpus(101, 6).into_iter().chain(corpus(102, 6)) {
            let at = s.events[0];
            let (before, during) = (&s.values[..at], &s.values[at..at + 200]);
            let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
            let ones = |v: &[f64]| v.iter().filter(|&&x| x == 1.0).count();
            match s.family {
                "int_temperature" => assert!(max(during) >= max(before) + 2.0, "{}", s.name),
                "small_counts" => assert!(during.iter().all(|&x| x == 0.0), "{}", s.name),
                "heartbeat" => assert!(
                    ones(during) * 3 <= ones(&before[before.len() - 200..]) * 2,
                    "{}",
                    s.name
                ),
                _ => {}
            }
        }
    }
}
