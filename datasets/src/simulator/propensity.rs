//! Failure propensity: why a few GPUs cause most failures. Each GPU gets a
//! weight from a Pareto distribution with α = 1 truncated at 3000× the
//! minimum, drawn by stratified sampling (one draw per 1/n quantile, in
//! shuffled order) so a fleet's tail has the same shape for every seed. Over
//! a long run the top 1 % of GPUs then cause about half of all failures
//! (`tests::power_law_top_percent_share`). `failures` turns weights into
//! failure times; the long-run sampler here checks the law cheaply.

use super::rng::SimRng;

/// Truncation of the Pareto tail, as a multiple of the smallest weight.
const PROPENSITY_CAP: f64 = 3_000.0;

/// Failure propensity of `n` GPUs, normalized to mean 1: stratified draws
/// from Pareto(α = 1) truncated at [`PROPENSITY_CAP`].
pub fn propensity_weights(n: usize, rng: &mut SimRng) -> Vec<f64> {
    let mut strata: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut strata);
    let w: Vec<f64> = strata
        .iter()
        .map(|k| {
            let u = (*k as f64 + rng.f64()) / n as f64;
            (1.0 / u.max(1e-12)).min(PROPENSITY_CAP)
        })
        .collect();
    let mean = w.iter().sum::<f64>() / n.max(1) as f64;
    w.into_iter().map(|x| x / mean).collect()
}

/// Long-run failure counts per GPU when failed GPUs are repaired and return
/// to service (Poisson with rate `rate_per_gpu_day × weight`): the sampler
/// the power-law check runs on, without generating telemetry.
pub fn long_run_failure_counts(
    weights: &[f64],
    rate_per_gpu_day: f64,
    days: f64,
    rng: &mut SimRng,
) -> Vec<u64> {
    weights
        .iter()
        .map(|w| rng.poisson(rate_per_gpu_day * w * days))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulator::rng::Stream;

    /// Over 2,000 GPUs × 180 days, the top 1 % of GPUs by failure count
    /// cause about half of all failures.
    #[test]
    fn power_law_top_percent_share() {
        for seed in [1u64, 2, 3, 17] {
            let w = propensity_weights(2_000, &mut SimRng::stream(seed, Stream::Propensity));
            let mut c = long_run_failure_counts(
                &w,
                0.006,
                180.0,
                &mut SimRng::stream(seed, Stream::Failures),
            );
            let total: u64 = c.iter().sum();
            c.sort_unstable_by(|a, b| b.cmp(a));
            let top: u64 = c[..20].iter().sum();
            let share = top as f64 / total as f64;
            assert!(total > 1_000, "seed {seed}: only {total} failures");
            assert!(
                (0.35..=0.65).contains(&share),
                "seed {seed}: top 1% share {share:.3}"
            );
        }
    }

    #[test]
    fn weights_have_mean_one() {
        let w = propensity_weights(1_000, &mut SimRng::new(5));
        let mean = w.iter().sum::<f64>() / 1_000.0;
        assert!((mean - 1.0).abs() < 1e-9);
        assert!(w.iter().all(|x| *x > 0.0));
    }
}
