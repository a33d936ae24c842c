//! The built-in simulated fleet as a source: the demo of `forewarn serve`
//! with no Kafka configured. Event time advances one interval per tick; the
//! source sleeps so that it advances `speed` times faster than real time.

use std::time::{Duration, Instant};

use datasets::simulator::{SimConfig, Simulator};
use features::Sample;

/// Runs the simulator, handing each tick's samples to `f`, paced at
/// `speed`× real time (0 = as fast as possible). Stops when `f` says so or
/// the simulation ends.
pub fn run(
    cfg: SimConfig,
    speed: f64,
    stop: &dyn Fn() -> bool,
    mut f: impl FnMut(Vec<Sample>) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let interval_ms = f64::from(cfg.interval_s) * 1000.0;
    let mut sim = Simulator::new(cfg)?;
    let started = Instant::now();
    let mut ticks = 0u64;
    let mut total = 0u64;
    loop {
        if stop() {
            break;
        }
        let mut buf = Vec::new();
        if sim.next_tick(&mut buf).is_none() {
            break;
        }
        total += buf.len() as u64;
        f(buf)?;
        ticks += 1;
        if speed > 0.0 {
            let due = Duration::from_secs_f64(ticks as f64 * interval_ms / 1000.0 / speed);
            let elapsed = started.elapsed();
            if due > elapsed {
                std::thread::sleep(due - elapsed);
            }
        }
    }
    Ok(total)
}
