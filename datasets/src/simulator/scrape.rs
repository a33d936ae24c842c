//! Scrape times, when `SimConfig::spread_scrapes` is on: Prometheus spreads
//! its targets over the scrape interval and stamps each scrape with the
//! time it ran, so a real fleet's hosts report at their own fixed offset
//! within the interval, a little early or late each time, and all GPUs of
//! one host (one dcgm-exporter) share each timestamp. Off, every sample
//! carries its tick's time. The physics still run on the tick; only the
//! timestamps move, less than one interval. Its own RNG stream.

use super::rng::{SimRng, Stream};

#[derive(Debug, Clone)]
pub(crate) struct Scrapes {
    /// Per host, its offset within the interval.
    offsets: Vec<i64>,
    /// Each scrape lands up to this much early or late.
    jitter_ms: i64,
    rng: SimRng,
}

impl Scrapes {
    pub fn new(seed: u64, hosts: usize, interval_ms: i64) -> Scrapes {
        let jitter_ms = (interval_ms / 10).min(1_000);
        let mut rng = SimRng::stream(seed, Stream::Scrapes);
        let span = (interval_ms - 2 * jitter_ms).max(1);
        let offsets = (0..hosts)
            .map(|_| rng.below(span as u64) as i64 + jitter_ms)
            .collect();
        Scrapes {
            offsets,
            jitter_ms,
            rng,
        }
    }

    /// The timestamp of host `host`'s scrape of the tick at `tick_ms`:
    /// within `[tick_ms, tick_ms + interval)`, increasing from tick to tick.
    pub fn at(&mut self, host: usize, tick_ms: i64) -> i64 {
        let jitter = self.rng.below(2 * self.jitter_ms as u64 + 1) as i64 - self.jitter_ms;
        tick_ms + self.offsets.get(host).copied().unwrap_or(0) + jitter
    }
}
