//! The simulator's only source of randomness: xoshiro256++ seeded through
//! splitmix64 (Blackman & Vigna, <https://prng.di.unimi.it/>), from
//! `rand_xoshiro` through [`features::rng`], which pins its seeding and
//! outputs.
//!
//! Every random choice in a simulation derives from `SimConfig::seed` through
//! [`SimRng::stream`], one independent stream per concern (topology, schedule,
//! failures, noise, dirty data), so changing one knob, such as turning dirty
//! data on, does not reshuffle the others. The distributions below are
//! written out (not `rand`'s) so a simulated fleet stays byte-identical across
//! crate versions: `rand`'s algorithms may change between releases.

use features::rng::Xoshiro256PlusPlus;
pub use features::rng::splitmix64;

/// Named streams, so that the stream a concern uses is fixed by its name and
/// not by the order streams happen to be created in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Stream {
    Topology = 1,
    Schedule = 2,
    Failures = 3,
    Noise = 4,
    Dirty = 5,
    Propensity = 6,
    /// The `RandomPrecursors` scenario's own draws.
    Precursors = 7,
    /// Scrape offsets and jitter (`SimConfig::spread_scrapes`).
    Scrapes = 8,
}

/// The simulator's generator: forewarn's xoshiro256++ ([`features::rng`])
/// with named streams and forks.
#[derive(Debug, Clone)]
pub struct SimRng {
    x: Xoshiro256PlusPlus,
}

impl SimRng {
    /// A generator seeded from `seed` by splitmix64 (never all-zero state).
    pub fn new(seed: u64) -> Self {
        SimRng {
            x: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The independent stream `stream` of the simulation seeded with `seed`.
    pub fn stream(seed: u64, stream: Stream) -> Self {
        let mut sm = seed ^ (stream as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
        SimRng::new(splitmix64(&mut sm))
    }

    /// A child generator for sub-entity `index` (a host, a job) of this one,
    /// without advancing `self`.
    pub fn fork(&self, index: u64) -> Self {
        let s = self.x.state();
        let mut sm = s[0] ^ s[3].rotate_left(17) ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        SimRng::new(splitmix64(&mut sm))
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.x.next_u64()
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi).
    #[inline]
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }

    /// Log-uniform in [lo, hi): durations spread over orders of magnitude.
    pub fn log_range(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + (hi.ln() - lo.ln()) * self.f64()).exp()
    }

    /// Uniform integer in [0, n); 0 when `n` is 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift; the bias is < n / 2^64, irrelevant here.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p`.
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }

    /// An approximately standard normal value from one draw: the sum of four
    /// 16-bit uniforms (Irwin–Hall), rescaled. Bounded to ±3.46, which suits
    /// sensor noise and keeps the hot path to a single `next_u64`.
    #[inline]
    pub fn noise(&mut self) -> f64 {
        let x = self.next_u64();
        let sum = (x & 0xFFFF) + (x >> 16 & 0xFFFF) + (x >> 32 & 0xFFFF) + (x >> 48);
        (sum as f64 / 65_536.0 - 2.0) * 1.732_050_807_568_877_2
    }

    /// A standard normal value (Box–Muller), for construction-time draws.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.f64();
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }

    /// A Poisson count with the given mean: one draw when the mean is tiny
    /// (the common case for background error counters), Knuth's product
    /// method up to 30, a rounded normal above.
    pub fn poisson(&mut self, mean: f64) -> u64 {
        if mean <= 0.0 || !mean.is_finite() {
            return 0;
        }
        if mean < 0.02 {
            return u64::from(self.f64() < mean);
        }
        if mean < 30.0 {
            let limit = (-mean).exp();
            let mut k = 0;
            let mut p = self.f64();
            while p > limit {
                k += 1;
                p *= self.f64();
            }
            return k;
        }
        (mean + mean.sqrt() * self.normal()).round().max(0.0) as u64
    }

    /// A burst size ≥ 1 with the given mean (geometric; 1 when the mean is
    /// 1 or less, without a draw).
    pub fn geometric(&mut self, mean: f64) -> u64 {
        if mean <= 1.0 || !mean.is_finite() {
            return 1;
        }
        let u = 1.0 - self.f64();
        1 + (u.ln() / (1.0 - 1.0 / mean).ln()).floor().min(1e9) as u64
    }

    /// Index picked with probability proportional to `weights`; the last
    /// index when all weights are zero.
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.f64() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len().saturating_sub(1)
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vector_splitmix() {
        // First outputs of splitmix64 seeded with 0 (reference implementation).
        let mut s = 0u64;
        assert_eq!(splitmix64(&mut s), 0xE220_A839_7B1D_CDAF);
        assert_eq!(splitmix64(&mut s), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn streams_are_deterministic_and_distinct() {
        let a: Vec<u64> = (0..4)
            .map(|_| SimRng::stream(7, Stream::Noise).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut n = SimRng::stream(7, Stream::Noise);
        let mut d = SimRng::stream(7, Stream::Dirty);
        assert_ne!(n.next_u64(), d.next_u64());
    }

    #[test]
    fn distributions_have_the_right_moments() {
        let mut r = SimRng::new(1);
        let n = 200_000;
        let mean = |f: &mut dyn FnMut() -> f64| (0..n).map(|_| f()).sum::<f64>() / n as f64;
        assert!((mean(&mut || r.f64()) - 0.5).abs() < 0.01);
        let mut r2 = SimRng::new(2);
        assert!(mean(&mut || r2.noise()).abs() < 0.02);
        let mut r3 = SimRng::new(3);
        assert!((mean(&mut || r3.noise().powi(2)) - 1.0).abs() < 0.03);
        let mut r4 = SimRng::new(4);
        assert!((mean(&mut || r4.poisson(3.5) as f64) - 3.5).abs() < 0.05);
        let mut r5 = SimRng::new(5);
        assert!((mean(&mut || r5.poisson(80.0) as f64) - 80.0).abs() < 0.3);
        let mut r6 = SimRng::new(6);
        assert!((mean(&mut || r6.exp(2.0)) - 2.0).abs() < 0.05);
        let mut r7 = SimRng::new(7);
        assert!(mean(&mut || r7.below(10) as f64) < 4.6);
    }
}
