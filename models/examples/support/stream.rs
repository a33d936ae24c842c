//! The input of the forest's speed measurements, shared by
//! `benches/rcf.rs`, `examples/rcf_throughput.rs` and
//! `examples/rcf_replay.rs` (included with `#[path]`), so that all three
//! measure the same stream: `metrics` noisy sines with different periods,
//! a telemetry-like signal.

use models::rng::Xoshiro256PlusPlus;

/// `n` rows of `metrics` values from the seeded stream.
pub fn noisy_sines(metrics: usize, n: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|t| {
            (0..metrics)
                .map(|j| 10.0 * (t as f64 / (20.0 + 7.0 * j as f64)).sin() + rng.next_gaussian())
                .collect()
        })
        .collect()
}
