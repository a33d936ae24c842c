//! Replays criterion's forest benchmarks (`benches/rcf.rs`) outside
//! criterion, in rounds, for A/B runs of two builds on a machine whose
//! speed drifts: each round is timed alone and the fastest and median
//! round are printed, so a slow stretch spoils a few rounds, not the run.
//! Usage:
//! `cargo run --release -p models --example rcf_replay -- [mode] [rounds] [per_round] [stride] [box_cache_min_mass]`
//! (defaults `score 10 4000 7 16`). `score`: 70,000 updates of the
//! benchmark's stream, then `per_round` scores of every `stride`-th row
//! (criterion's score bench uses 7; 0 repeats one query, 1 takes
//! consecutive rows). `update`: 20,000 updates, then `per_round`
//! `score_and_update` calls per round. Prints `fastest median checksum`
//! in µs per call.

use models::rcf::Forest;
#[path = "support/stream.rs"]
mod stream;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize, default: usize| -> Result<usize, String> {
        args.get(i).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| format!("argument {i} ({s:?}) is not a count"))
        })
    };
    let mode = args.get(1).map_or("score", String::as_str);
    let (rounds, per, stride, mass) = (num(2, 10)?, num(3, 4000)?, num(4, 7)?, num(5, 16)?);
    if rounds == 0 || per == 0 {
        return Err("rounds and per_round must be at least 1".into());
    }
    let warm = match mode {
        "score" => 70_000,
        "update" => 20_000,
        other => return Err(format!("mode {other:?}: expected score or update").into()),
    };
    // The benchmark's stream: two noisy sines, seed 2.
    let total = 120_000.max(warm + rounds * per);
    let rows = stream::noisy_sines(2, total, 2);
    let mut f = Forest::builder()
        .trees(50)
        .sample_size(256)
        .input_dimensions(2)
        .shingle_size(4)
        .box_cache_min_mass(mass)
        .seed(17)
        .build()?;
    for r in &rows[..warm] {
        f.update(r)?;
    }
    let (mut times, mut sum, mut j) = (Vec::with_capacity(rounds), 0.0, 0usize);
    let rest = &rows[20_000..];
    for k in 0..rounds {
        let start = std::time::Instant::now();
        if mode == "score" {
            for _ in 0..per {
                sum += f.score(&rest[j % rest.len()])?;
                j += stride;
            }
        } else {
            for r in &rows[warm + k * per..warm + (k + 1) * per] {
                sum += f.score_and_update(r)?;
            }
        }
        times.push(start.elapsed().as_secs_f64() * 1e6 / per as f64);
    }
    times.sort_by(f64::total_cmp);
    println!("{:.3} {:.3} {sum:.1}", times[0], times[times.len() / 2]);
    Ok(())
}
