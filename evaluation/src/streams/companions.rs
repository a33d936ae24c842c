//! Streams of several metrics for the stream benchmark: each labelled
//! stream beside normal companions (`streams --companions N`), so that the
//! grade is also judged the way `forewarn score` reads a CSV of several
//! metrics — one forest over all of them, single rows, the event in one
//! metric among others that only wander.
//!
//! Companions take turns: a noisy sine (period 20–220 rows, amplitude
//! 1–6, noise 0.5) and a slow AR(1) walk (φ 0.90–0.99, unit noise), each
//! with its own draws; nothing in them is an event.

use features::rng::Xoshiro256PlusPlus;

use super::corpus::Stream;

/// The stream's values and `n` companions', row after row (`1 + n` values
/// a row); `seed` draws the companions.
pub fn rows(stream: &Stream, n: usize, seed: u64) -> Vec<f64> {
    let len = stream.values.len();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let cols: Vec<Vec<f64>> = (0..n)
        .map(|k| {
            if k % 2 == 0 {
                sine(len, &mut rng)
            } else {
                walk(len, &mut rng)
            }
        })
        .collect();
    let mut out = Vec::with_capacity(len * (1 + n));
    for (t, v) in stream.values.iter().enumerate() {
        out.push(*v);
        out.extend(cols.iter().map(|c| c[t]));
    }
    out
}

fn sine(len: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<f64> {
    let period = 20.0 + 200.0 * rng.next_f64();
    let amp = 1.0 + 5.0 * rng.next_f64();
    let level = 50.0 * rng.next_f64();
    (0..len)
        .map(|t| level + amp * (t as f64 / period).sin() + 0.5 * rng.next_gaussian())
        .collect()
}

fn walk(len: usize, rng: &mut Xoshiro256PlusPlus) -> Vec<f64> {
    let phi = 0.9 + 0.09 * rng.next_f64();
    let mut x = 0.0;
    (0..len)
        .map(|_| {
            x = phi * x + rng.next_gaussian();
            100.0 + x
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_comes_first_and_companions_are_seeded() {
        let s = Stream {
            name: "x".into(),
            family: "spikes",
            values: vec![1.0, 2.0, 3.0],
            events: vec![1],
        };
        let a = rows(&s, 2, 7);
        assert_eq!(a.len(), 9);
        assert_eq!([a[0], a[3], a[6]], [1.0, 2.0, 3.0]);
        assert_eq!(a, rows(&s, 2, 7), "same seed, same companions");
        assert_ne!(a, rows(&s, 2, 8));
        assert_eq!(rows(&s, 0, 7), s.values);
    }
}
