//! An eighth set of families never tuned on, written after the stuck values
//! (e7746f4) and the seventh set's scoring, before any next grader change:
//! `streams --eighth`, to be scored once after that change. Each probes
//! the edges of what the grader now does:
//!
//! - `dither_freeze`: a sensor read to 0.1 with noise of a few tenths; the
//!   event is the sensor freezing for 300 rows while its last digit still
//!   toggles between two neighbouring readings (no run of equal values:
//!   the stuck values do not apply, only the spread collapses);
//! - `missed_cron`: noise with a spike every 50–150 rows (a scheduled job,
//!   a couple of rows of jitter); the event is three spikes in a row not
//!   coming (the job stopped), labelled where the first was due;
//! - `slow_leak`: a garbage-collected heap, a ramp every 100–300 rows back
//!   down to its base; the event is the base creeping up after every
//!   collection from then on (a leak);
//! - `pinned`: a utilisation around 70 % with wide noise, clipped at 100
//!   (so short runs of exactly 100 are normal); the event is 300 rows
//!   pinned at 100.
//!
//! Part of the stream benchmark (`streams/`).

use super::corpus::{Stream, between, start};

/// Rows of every stream.
const LEN: usize = 4_000;

/// The families, in report order.
pub const FAMILIES: [&str; 4] = ["dither_freeze", "missed_cron", "slow_leak", "pinned"];

/// `per_family` streams of each family for `seed`.
pub fn corpus(seed: u64, per_family: usize) -> Vec<Stream> {
    super::corpus::families(
        &FAMILIES,
        per_family,
        (seed, 9_000_011, 0x0008_C0FF_EE00),
        stream,
    )
}

/// `x` read to one decimal.
fn tenths(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn stream(family: &'static str, seed: u64, index: usize) -> Stream {
    let (mut rng, scale, b, mut at) = start(seed, LEN);
    let mut values = Vec::with_capacity(LEN);
    let during = |t: usize, len: usize| t >= at && t < at + len;
    match family {
        "dither_freeze" => {
            let (base, noise) = (40.0 + 30.0 * b, 0.2 + 0.3 * rng.next_f64());
            let mut level = base;
            let mut frozen = f64::NAN;
            for t in 0..LEN {
                level += 0.02 * (base - level) + 0.05 * rng.next_gaussian();
                let read = tenths(level + noise * rng.next_gaussian());
                let v = if during(t, 300) {
                    if frozen.is_nan() {
                        frozen = read;
                    }
                    // The last digit toggles now and then, nothing more.
                    if rng.next_f64() < 0.3 {
                        tenths(frozen + 0.1)
                    } else {
                        frozen
                    }
                } else {
                    read
                };
                values.push(v);
            }
        }
        "missed_cron" => {
            let period = between(&mut rng, 50, 100);
            let height = 5.0 + 3.0 * b;
            let mut next = between(&mut rng, 10, period);
            let mut missed = 0;
            let mut first_missed = None;
            for t in 0..LEN {
                let mut v = rng.next_gaussian();
                if t == next {
                    if t >= at && missed < 3 {
                        missed += 1;
                        first_missed = first_missed.or(Some(t));
                    } else {
                        v += height;
                    }
                    next = t + period - 2 + between(&mut rng, 0, 5);
                }
                values.push(scale * (10.0 + v));
            }
            at = first_missed.unwrap_or(at);
        }
        "slow_leak" => {
            let period = between(&mut rng, 100, 200);
            let (mut base, mut heap, mut left) = (20.0, 20.0, period);
            for t in 0..LEN {
                heap += 60.0 / period as f64 * (0.5 + rng.next_f64());
                left -= 1;
                if left == 0 {
                    if t >= at {
                        base += 1.5 + b;
                    }
                    heap = base;
                    left = period;
                }
                values.push(scale * (heap + 0.5 * rng.next_gaussian()));
            }
        }
        "pinned" => {
            let spread = 12.0 + 8.0 * b;
            let mut level: f64 = 70.0;
            for t in 0..LEN {
                level += 0.05 * (70.0 - level) + rng.next_gaussian();
                let v = if during(t, 300) {
                    100.0
                } else {
                    (level + spread * rng.next_gaussian()).clamp(0.0, 100.0)
                };
                values.push(v);
            }
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

    /// Each event shows in its own stream from its labelled row: the frozen
    /// sensor never leaves two readings, the job's spikes stop, the heap's
    /// floor rises, the utilisation sits at 100.
    #[test]
    fn every_event_is_in_the_data_at_its_label() {
        for s in corpus(101, 6).into_iter().chain(corpus(102, 6)) {
            let at = s.events[0];
            let (before, during) = (&s.values[at - 300..at], &s.values[at..at + 300]);
            let max = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
            let min = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
            match s.family {
                "dither_freeze" => {
                    assert!(max(during) - min(during) <= 0.11, "{}", s.name);
                    assert!(max(before) - min(before) > 0.5, "{}", s.name);
                }
                "missed_cron" => {
                    let spikes = |v: &[f64]| {
                        let floor = min(v) + (max(v) - min(v)) / 2.0;
                        v.iter().filter(|&&x| x > floor).count()
                    };
                    assert!(max(&s.values[at..at + 100]) < max(before), "{}", s.name);
                    assert!(spikes(before) >= 2, "{}", s.name);
                }
                "slow_leak" => {
                    let late = &s.values[at + 800..at + 1100];
                    assert!(min(late) > min(before) + 0.05 * (max(before) - min(before)));
                }
                "pinned" => assert!(during.iter().all(|&x| x == 100.0), "{}", s.name),
                _ => {}
            }
        }
    }
}
