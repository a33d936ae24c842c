//! Per-tree time-decayed reservoir sample: decides which stream points a tree keeps.
//!
//! The sample is a weighted sample without replacement where the point that
//! arrived at time `t` has weight `exp(time_decay * t)`, so recent points are
//! kept with higher probability and `1 / time_decay` is the effective memory.
//! With `time_decay = 0` it is a uniform reservoir over the whole stream.
//!
//! Implementation: Efraimidis and Spirakis' A-ExpJ ("Weighted random sampling
//! with a reservoir", IPL 2006). Each kept point has key `kappa = E / w` with
//! `E ~ Exp(1)`; the sample is the `capacity` smallest keys. Instead of drawing a
//! key for every arriving point, we draw the *time of the next acceptance*
//! directly, so rejecting a point costs one integer comparison. Because the
//! weights are geometric, the jump has a closed form. Keys are stored as `f32`
//! relative to `base_time` and rescaled when the weights would grow large.

use serde::{Deserialize, Serialize};

use crate::rng::Xoshiro256PlusPlus;

/// Rescale keys once weights reach `exp(REBASE_EXPONENT)`; small enough that an
/// `f32` key of a point kept that long stays far from overflow.
const REBASE_EXPONENT: f64 = 16.0;

/// Outcome of offering a point to a full or filling sampler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Acceptance {
    /// Key the new point will be stored with.
    pub(crate) key: f32,
    /// Point (store handle) of the sample entry dropped to make room, if the
    /// sample is full.
    pub(crate) evict: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Sampler {
    capacity: usize,
    time_decay: f64,
    /// Max-heap of keys: the root is the entry evicted next.
    keys: Vec<f32>,
    /// Each entry's point, as the store handle of the tree leaf holding it
    /// (parallel to `keys`).
    points: Vec<u32>,
    /// Time at which weights equal 1.
    base_time: u64,
    /// Once full: the next time index that will be accepted.
    next_accept: u64,
}

impl Sampler {
    pub(crate) fn new(capacity: usize, time_decay: f64) -> Self {
        Self {
            capacity,
            time_decay,
            keys: Vec::with_capacity(capacity),
            points: Vec::with_capacity(capacity),
            base_time: 0,
            next_accept: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.keys.len() >= self.capacity
    }

    pub(crate) fn points(&self) -> &[u32] {
        &self.points
    }

    /// The entries' points, to rewrite after the store moved them.
    pub(in crate::rcf) fn points_mut(&mut self) -> &mut [u32] {
        &mut self.points
    }

    /// Decides whether the point arriving at time `t` is kept. Times must be
    /// offered in increasing order. Does not modify the sample: call `commit`
    /// with the new entry's point if this returns `Some`.
    #[inline]
    pub(crate) fn offer(&mut self, t: u64, rng: &mut Xoshiro256PlusPlus) -> Option<Acceptance> {
        if self.is_full() {
            if t < self.next_accept {
                return None;
            }
            debug_assert_eq!(t, self.next_accept, "a scheduled acceptance was skipped");
            self.maybe_rebase(t);
            // The accepted point's key is Exp(1) truncated below the current
            // maximum key, scaled by its weight (A-ExpJ's second draw).
            let w = self.weight(t);
            let limit = f64::from(self.keys[0]) * w;
            let u = rng.next_f64();
            let e = -(-u * (-(-limit).exp_m1())).ln_1p();
            let key = ((e / w) as f32).min(self.keys[0]);
            Some(Acceptance {
                key,
                evict: Some(self.points[0]),
            })
        } else {
            self.maybe_rebase(t);
            let e = -rng.next_f64_open0().ln();
            let key = clamp_key(e / self.weight(t));
            Some(Acceptance { key, evict: None })
        }
    }

    /// Records the accepted point (the handle of the leaf holding it) and,
    /// once the sample is full, schedules the next acceptance.
    pub(crate) fn commit(
        &mut self,
        t: u64,
        acc: Acceptance,
        point: u32,
        rng: &mut Xoshiro256PlusPlus,
    ) {
        if acc.evict.is_some() {
            self.keys[0] = acc.key;
            self.points[0] = point;
            self.sift_down(0);
        } else {
            self.keys.push(acc.key);
            self.points.push(point);
            self.sift_up(self.keys.len() - 1);
        }
        if self.is_full() {
            self.schedule_after(t, rng);
        }
    }

    /// Draws how far to jump: the next point whose cumulative weight since `t`
    /// exceeds `Exp(1) / max_key` is accepted.
    fn schedule_after(&mut self, t: u64, rng: &mut Xoshiro256PlusPlus) {
        let threshold = f64::from(self.keys[0]).max(f64::MIN_POSITIVE);
        let x = -rng.next_f64_open0().ln() / threshold;
        let lambda = self.time_decay;
        let steps = if lambda > 0.0 {
            // sum_{s=t+1}^{t+n} e^{lambda (s - base)} >= x, solved for n.
            let first = (lambda * (t + 1 - self.base_time) as f64).exp();
            (x * lambda.exp_m1() / first).ln_1p() / lambda
        } else {
            x
        };
        let steps = if steps.is_finite() {
            steps.ceil().max(1.0)
        } else {
            1e18
        };
        self.next_accept = t.saturating_add(steps.min(1e18) as u64);
    }

    #[inline]
    fn weight(&self, t: u64) -> f64 {
        (self.time_decay * (t - self.base_time) as f64).exp()
    }

    fn maybe_rebase(&mut self, t: u64) {
        let exponent = self.time_decay * (t - self.base_time) as f64;
        if exponent > REBASE_EXPONENT {
            // Moving the base multiplies every key by the same factor, which keeps
            // the heap order (f32 multiplication is monotone).
            let factor = exponent.exp() as f32;
            for k in &mut self.keys {
                *k = (*k * factor).min(f32::MAX);
            }
            self.base_time = t;
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.keys[parent] >= self.keys[i] {
                break;
            }
            self.keys.swap(parent, i);
            self.points.swap(parent, i);
            i = parent;
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.keys.len();
        loop {
            let l = 2 * i + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && self.keys[r] > self.keys[l] {
                r
            } else {
                l
            };
            if self.keys[i] >= self.keys[c] {
                break;
            }
            self.keys.swap(i, c);
            self.points.swap(i, c);
            i = c;
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.keys.capacity() * 4 + self.points.capacity() * 4
    }

    /// Heap order holds, every key is finite and positive, the capacity is
    /// the forest's sample size, and the times are not ahead of `next_t`
    /// (the time of the next point offered): a restored sampler whose
    /// scheduled acceptance is already past, or whose weights are based in
    /// the future, would break `offer`'s invariants on the first update.
    pub(crate) fn is_consistent(&self, capacity: usize, next_t: u64) -> bool {
        self.capacity == capacity
            && capacity > 0
            && self.time_decay.is_finite()
            && self.time_decay >= 0.0
            && self.base_time <= next_t
            && (!self.is_full() || self.next_accept >= next_t)
            && self.keys.len() == self.points.len()
            && self.keys.len() <= self.capacity
            && self.keys.iter().all(|k| k.is_finite() && *k >= 0.0)
            && (1..self.keys.len()).all(|i| self.keys[(i - 1) / 2] >= self.keys[i])
    }
}

fn clamp_key(k: f64) -> f32 {
    (k as f32).clamp(0.0, f32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a sampler alone, tracking which times are in the sample.
    fn run(capacity: usize, decay: f64, n: u64, seed: u64) -> Vec<u64> {
        let mut s = Sampler::new(capacity, decay);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut times = vec![0u64; capacity];
        let mut free: Vec<u32> = (0..capacity as u32).rev().collect();
        for t in 0..n {
            if let Some(acc) = s.offer(t, &mut rng) {
                let slot = match acc.evict {
                    Some(l) => l,
                    None => free.pop().expect("free slot while filling"),
                };
                times[slot as usize] = t;
                s.commit(t, acc, slot, &mut rng);
            }
        }
        assert!(s.is_consistent(capacity, n));
        times
    }

    #[test]
    fn uniform_reservoir_covers_history() {
        // With no decay, about half of a sample should come from the first half.
        let mut early = 0;
        for seed in 0..20 {
            early += run(100, 0.0, 10_000, seed)
                .iter()
                .filter(|&&t| t < 5_000)
                .count();
        }
        let frac = early as f64 / 2000.0;
        assert!((frac - 0.5).abs() < 0.05, "fraction from first half {frac}");
    }

    #[test]
    fn decay_prefers_recent_points() {
        // Exponential weights with rate 1/1000: the median age of a large
        // sample drawn from a long stream is well under 1000 * ln 2 + capacity.
        let times = run(256, 1.0 / 1000.0, 50_000, 3);
        let mut ages: Vec<u64> = times.iter().map(|t| 49_999 - t).collect();
        ages.sort_unstable();
        let median = ages[ages.len() / 2];
        assert!(median < 1500, "median age {median}");
        assert!(
            ages[ages.len() - 1] < 20_000,
            "oldest {}",
            ages[ages.len() - 1]
        );
    }
}
