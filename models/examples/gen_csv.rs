//! Writes the seeded CSV that `forewarn score`'s end-to-end benchmark reads
//! (BENCHMARKS.md, random cut forest): a header, then `rows` lines of an
//! RFC 3339 timestamp (one a second from 2026-01-01) and `metrics` noisy
//! sines with different periods, plus a spike every 50,000 rows so the
//! scorer has something to find. Usage:
//! `cargo run --release -p models --example gen_csv -- [rows] [metrics] [seed] > rcf1m.csv`
//! (defaults 1000000 3 7).

use std::io::{BufWriter, Write};

use features::time::format_rfc3339_s;
use models::rng::Xoshiro256PlusPlus;

fn main() -> std::io::Result<()> {
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let (rows, metrics, seed) = (arg(1, 1_000_000), arg(2, 3) as usize, arg(3, 7));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut out = BufWriter::new(std::io::stdout().lock());
    write!(out, "timestamp")?;
    for j in 0..metrics {
        write!(out, ",m{j}")?;
    }
    writeln!(out)?;
    // 2026-01-01T00:00:00Z
    const START: i64 = 1_767_225_600;
    for t in 0..rows {
        write!(out, "{}", format_rfc3339_s((START + t as i64) * 1000))?;
        for j in 0..metrics {
            let period = 60.0 + 37.0 * j as f64;
            let mut v = 10.0 * (t as f64 / period).sin() + rng.next_gaussian();
            if t % 50_000 == 49_999 && j == t as usize / 50_000 % metrics {
                v += 25.0;
            }
            write!(out, ",{v:.4}")?;
        }
        writeln!(out)?;
    }
    out.flush()
}
