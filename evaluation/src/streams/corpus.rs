//! The labelled stream corpus: seeded univariate streams of many families,
//! each with the rows where its events begin.
//!
//! Part of the stream benchmark (`streams/`): the detectors of `detect.rs`
//! run over these streams and `scoring.rs` scores them. Every stream has its
//! own background (scale, offset, autocorrelation, seasonality, heavy tails,
//! quantisation) so that a raw score means something different on each:
//! what a grade must survive. Families:
//!
//! - `spike`: one to three isolated spikes of 4–9 deviations;
//! - `level_shift`: the level moves by 3–6 deviations and stays;
//! - `trend`: a slope starts (0.5–2 % of a deviation per row);
//! - `variance`: the noise grows 3–5 fold;
//! - `seasonal_break`: the cycle's phase jumps or its period changes;
//! - `stuck`: the sensor freezes at its last value for 150–400 rows;
//! - `noise`: no event (false positives only);
//! - `gpu_thermal`, `gpu_straggler`: the GPU temperature and SM clock of a
//!   failing GPU from the fleet simulator (event at the precursor's onset);
//! - `gpu_healthy`: a healthy GPU's temperature beside it (no event; jobs
//!   come and go: benign look-alikes).

use datasets::simulator::{FailureKind, Scenario, SimConfig, Simulator};
use features::Field;
use features::rng::Xoshiro256PlusPlus;

/// Rows per synthetic stream.
pub const LEN: usize = 4000;
/// Events fall at or after this row (the detectors have warmed up).
const FIRST_EVENT: usize = 1000;

/// One labelled stream.
#[derive(Debug, Clone)]
pub struct Stream {
    /// `family/seed/index`.
    pub name: String,
    pub family: &'static str,
    /// NaN: missing.
    pub values: Vec<f64>,
    /// Rows where events begin, ascending.
    pub events: Vec<usize>,
}

impl Stream {
    /// Stream `index` of `family` drawn from `seed`, named
    /// `family/seed/index`.
    pub fn new(
        family: &'static str,
        seed: u64,
        index: usize,
        values: Vec<f64>,
        events: Vec<usize>,
    ) -> Stream {
        Stream {
            name: format!("{family}/{seed}/{index}"),
            family,
            values,
            events,
        }
    }
}

/// The synthetic families, in report order.
pub const SYNTHETIC: [&str; 7] = [
    "spike",
    "level_shift",
    "trend",
    "variance",
    "seasonal_break",
    "stuck",
    "noise",
];

/// `per_family` streams of each of `names`, stream `i` of family `f`
/// drawn by `make` from the seed `seed × mul + 1000 f + i`, xor `mix`:
/// every corpus's loop, each with its own constants.
pub fn families(
    names: &[&'static str],
    per_family: usize,
    (seed, mul, mix): (u64, u64, u64),
    make: fn(&'static str, u64, usize) -> Stream,
) -> Vec<Stream> {
    let mut out = Vec::with_capacity(names.len() * per_family);
    for (f, family) in names.iter().enumerate() {
        for i in 0..per_family {
            let s = seed.wrapping_mul(mul).wrapping_add((f * 1000 + i) as u64) ^ mix;
            out.push(make(family, s, i));
        }
    }
    out
}

/// A Poisson draw of mean `lambda` (Knuth's product of uniforms), for
/// means up to a few hundred, where `e^-λ` is still a normal `f64`. The
/// corpora's own rather than the simulator's `SimRng::poisson`: they draw
/// from the features crate's generator, and the streams (and every number
/// measured on them) stay as they are.
pub(super) fn poisson(rng: &mut Xoshiro256PlusPlus, lambda: f64) -> f64 {
    let limit = (-lambda).exp();
    let mut k = 0.0;
    let mut p = rng.next_f64();
    while p > limit {
        k += 1.0;
        p *= rng.next_f64();
    }
    k
}

/// A uniform whole number in `lo..lo + span`.
pub(super) fn between(rng: &mut Xoshiro256PlusPlus, lo: usize, span: usize) -> usize {
    lo + (rng.next_f64() * span as f64) as usize
}

/// The row of a later set's event in a stream of `len` rows: after its
/// first quarter (the detectors have warmed up) and 1,200 rows before its
/// end (the event has room to show).
pub(super) fn onset(rng: &mut Xoshiro256PlusPlus, len: usize) -> usize {
    len / 4 + (rng.next_f64() * (len - 1200 - len / 4) as f64) as usize
}

/// What a later set's stream draws first from its `seed`: its generator,
/// then its scale (0.01–100), a uniform share `b` and its event's row.
pub(super) fn start(seed: u64, len: usize) -> (Xoshiro256PlusPlus, f64, f64, usize) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let scale = 10f64.powf(rng.next_f64() * 4.0 - 2.0);
    let b = rng.next_f64();
    let at = onset(&mut rng, len);
    (rng, scale, b, at)
}

/// The checks every later set's test makes: `make` gives `families ×
/// per_family` streams, the same ones twice, of finite values, each with
/// ascending events (at most `max_events`), the first after the warm-up
/// quarter of `len` rows.
#[cfg(test)]
pub(super) fn assert_seeded_and_labelled(
    make: fn(u64, usize) -> Vec<Stream>,
    families: usize,
    len: usize,
    max_events: usize,
) {
    let a = make(5, 3);
    assert_eq!(a.len(), families * 3);
    for (x, y) in a.iter().zip(&make(5, 3)) {
        assert_eq!(x.values, y.values, "{} is not deterministic", x.name);
        assert!(x.values.iter().all(|v| v.is_finite()), "{}", x.name);
        assert!((1..=max_events).contains(&x.events.len()), "{}", x.name);
        assert!(x.events.windows(2).all(|w| w[0] < w[1]), "{}", x.name);
        assert!(x.events[0] >= len / 4 && x.events[0] < len, "{}", x.name);
    }
}

/// The corpus of `seed`: `per_family` streams of each synthetic family and
/// the simulator's GPU streams.
pub fn corpus(seed: u64, per_family: usize) -> Vec<Stream> {
    let mut out = families(&SYNTHETIC, per_family, (seed, 1_000_003, 0), synthetic);
    out.extend(gpu_streams(seed));
    out
}

/// The background every synthetic stream has: its own scale, offset,
/// AR(1) coefficient, cycle, tails and quantisation.
struct Background {
    offset: f64,
    scale: f64,
    phi: f64,
    period: f64,
    amplitude: f64,
    heavy: bool,
    step: f64,
    ar: f64,
}

impl Background {
    fn draw(rng: &mut Xoshiro256PlusPlus) -> Self {
        let scale = 10f64.powf(rng.next_f64() * 4.0 - 2.0);
        Background {
            offset: (rng.next_f64() * 200.0 - 50.0) * scale,
            scale,
            phi: if rng.next_f64() < 0.5 {
                0.0
            } else {
                rng.next_f64() * 0.9
            },
            period: 40.0 + rng.next_f64() * 260.0,
            amplitude: if rng.next_f64() < 0.5 {
                0.0
            } else {
                1.0 + rng.next_f64() * 4.0
            },
            heavy: rng.next_f64() < 0.25,
            step: if rng.next_f64() < 0.25 { 0.5 } else { 0.0 },
            ar: 0.0,
        }
    }

    /// Unit-deviation noise (AR(1) scaled to unit variance, sometimes
    /// heavy-tailed).
    fn noise(&mut self, rng: &mut Xoshiro256PlusPlus) -> f64 {
        let mut e = rng.next_gaussian();
        if self.heavy && rng.next_f64() < 0.02 {
            e *= 3.0;
        }
        self.ar = self.phi * self.ar + (1.0 - self.phi * self.phi).sqrt() * e;
        self.ar
    }

    fn cycle(&self, t: f64, phase: f64, period: f64) -> f64 {
        self.amplitude * (std::f64::consts::TAU * t / period + phase).sin()
    }

    /// A value in the stream's own units.
    fn emit(&self, unit: f64) -> f64 {
        let v = unit * self.scale;
        let v = if self.step > 0.0 {
            (v / (self.step * self.scale)).round() * self.step * self.scale
        } else {
            v
        };
        self.offset + v
    }
}

fn event_row(rng: &mut Xoshiro256PlusPlus, last: usize) -> usize {
    FIRST_EVENT + (rng.next_f64() * (last - FIRST_EVENT) as f64) as usize
}

fn synthetic(family: &'static str, seed: u64, index: usize) -> Stream {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut bg = Background::draw(&mut rng);
    let mut events = Vec::new();
    let sign = if rng.next_f64() < 0.5 { -1.0 } else { 1.0 };
    // Per family: event rows and the shape's parameters.
    let (a, b) = (rng.next_f64(), rng.next_f64());
    match family {
        "spike" => {
            let n = 1 + (a * 3.0) as usize;
            let gap = (LEN - 300 - FIRST_EVENT) / n;
            for k in 0..n {
                events.push(FIRST_EVENT + k * gap + (rng.next_f64() * (gap - 100) as f64) as usize);
            }
        }
        "noise" => {}
        _ => events.push(event_row(&mut rng, LEN - 800)),
    }
    let at = events.first().copied().unwrap_or(usize::MAX);
    let mut values = Vec::with_capacity(LEN);
    let mut stuck_at = f64::NAN;
    let stuck_len = 150 + (b * 250.0) as usize;
    let mut phase = 0.0;
    let mut period = bg.period;
    for t in 0..LEN {
        let e = bg.noise(&mut rng);
        let after = t >= at;
        let mut unit = e;
        match family {
            "spike" if events.contains(&t) => unit += sign * (4.0 + 5.0 * a),
            "level_shift" if after => unit += sign * (3.0 + 3.0 * a),
            "trend" if after => unit += sign * (0.005 + 0.015 * a) * (t - at) as f64,
            "variance" if after => unit *= 3.0 + 2.0 * a,
            "seasonal_break" if t == at => {
                if bg.amplitude == 0.0 {
                    bg.amplitude = 2.0 + 3.0 * a;
                }
                if b < 0.5 {
                    phase += std::f64::consts::PI * (0.5 + 0.5 * a);
                } else {
                    period *= if a < 0.5 { 0.5 } else { 2.0 };
                }
            }
            _ => {}
        }
        if family == "seasonal_break" && t < at && bg.amplitude == 0.0 {
            // The break needs a cycle to break: one from the start.
            bg.amplitude = 2.0 + 3.0 * a;
        }
        unit += bg.cycle(t as f64, phase, period);
        let mut v = bg.emit(unit);
        if family == "stuck" && t >= at && t < at + stuck_len {
            if stuck_at.is_nan() {
                stuck_at = values.last().copied().unwrap_or(v);
            }
            v = stuck_at;
        }
        values.push(v);
    }
    Stream::new(family, seed, index, values, events)
}

/// GPU metric streams from the fleet simulator: one failing GPU per kind
/// (its temperature for thermal degradation, its SM clock for a
/// straggler) and a healthy GPU's temperature, 64 h at one sample a minute.
fn gpu_streams(seed: u64) -> Vec<Stream> {
    let mut out = Vec::new();
    for (kind, field, family) in [
        (FailureKind::Thermal, Field::GpuTemp, "gpu_thermal"),
        (FailureKind::Straggler, Field::SmClock, "gpu_straggler"),
    ] {
        let cfg = SimConfig {
            gpus: 16,
            hours: 64.0,
            interval_s: 60,
            seed: seed.wrapping_mul(31).wrapping_add(kind as u64),
            scenario: Scenario::Only(kind),
            ..SimConfig::default()
        };
        let Ok(mut sim) = Simulator::new(cfg.clone()) else {
            continue;
        };
        let Some(label) = sim
            .labels()
            .iter()
            .find(|l| l.kind == kind && l.gpu.is_some())
            .cloned()
        else {
            continue;
        };
        let Some(gpu) = label.gpu.clone() else {
            continue;
        };
        let healthy = sim
            .gpus()
            .iter()
            .map(|g| g.uuid.clone())
            .find(|u| *u != gpu && !sim.labels().iter().any(|l| l.gpu.as_ref() == Some(u)));
        let ticks = sim.ticks() as usize;
        let mut failing = vec![f64::NAN; ticks];
        let mut calm = vec![f64::NAN; ticks];
        let mut samples = Vec::new();
        let mut k = 0;
        while sim.next_tick(&mut samples).is_some() {
            for s in &samples {
                if s.gpu == gpu {
                    failing[k] = s.metrics.get(field).unwrap_or(f64::NAN);
                } else if Some(&s.gpu) == healthy.as_ref() && kind == FailureKind::Thermal {
                    calm[k] = s.metrics.get(Field::GpuTemp).unwrap_or(f64::NAN);
                }
            }
            samples.clear();
            k += 1;
        }
        let row = (label.onset_ms - cfg.start_ms) / cfg.interval_ms();
        // Only an onset the detectors can see after their warm-up, and the
        // stream up to the failure (a failed GPU stops reporting).
        let end = label
            .failure_ms
            .map(|f| ((f - cfg.start_ms) / cfg.interval_ms()) as usize)
            .unwrap_or(ticks)
            .min(ticks);
        if row >= FIRST_EVENT as i64 && (row as usize) + 100 < end {
            failing.truncate(end);
            out.push(Stream {
                name: format!("{family}/{seed}"),
                family,
                values: failing,
                events: vec![row as usize],
            });
        }
        if healthy.is_some() && kind == FailureKind::Thermal {
            out.push(Stream {
                name: format!("gpu_healthy/{seed}"),
                family: "gpu_healthy",
                values: calm,
                events: Vec::new(),
            });
        }
    }
    out
}
