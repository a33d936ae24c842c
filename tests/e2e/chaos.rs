//! Bad time and floods can neither mislead nor sink `forewarn backtest`: a
//! simulated fleet's telemetry mixed with impossible timestamps (i64::MAX,
//! year 2100 first in the file, year 1970 for a new GPU), a source whose
//! clock ratchets +500 s per sample, 1 MB host names, garbage lines and a
//! flood of distinct one-sample GPU ids gives exactly the clean run's alert
//! file (to the byte), and every injected record is dead-lettered with its reason.
//!
//! The flood is 100,000 ids here; `FOREWARN_CHAOS_FLOOD=1000000` runs the
//! acceptance size (see docs/performance.md for the RSS measured on it).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use forewarn_tests::{forewarn, scratch, simulate_fleet};
use serde_json::Value;

fn ts_of(line: &str) -> Option<i64> {
    let v: Value = serde_json::from_str(line).ok()?;
    match &v["ts"] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => features::time::parse_timestamp(s),
        _ => None,
    }
}

fn sample(ts: i64, gpu: &str, host: &str) -> String {
    format!(
        r#"{{"ts":{ts},"gpu":"{gpu}","host":"{host}","rack":"r-x","metrics":{{"DCGM_FI_DEV_GPU_TEMP":55,"DCGM_FI_DEV_POWER_USAGE":300,"DCGM_FI_DEV_GPU_UTIL":90}}}}"#
    )
}

#[test]
fn bad_clocks_floods_and_garbage_leave_the_fleets_alerts_unchanged() {
    let flood: usize = std::env::var("FOREWARN_CHAOS_FLOOD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = scratch("chaos");
    simulate_fleet(&dir, 64, 6, 31, Some(0.4));
    let clean = std::fs::read_to_string(dir.join("sim/telemetry.jsonl")).expect("telemetry");
    let lines: Vec<&str> = clean.lines().collect();
    let t0 = ts_of(lines[0]).expect("first ts");

    // The mixed file: liars first, then the fleet with everything else
    // spread through it.
    let mut mixed = String::with_capacity(clean.len() + flood * 200);
    let mut injected = 0usize;
    let push = |out: &mut String, line: &str| {
        out.push_str(line);
        out.push('\n');
    };
    push(&mut mixed, &sample(i64::MAX, "GPU-max", "evil-0"));
    push(&mut mixed, &sample(4_102_444_800_000, "GPU-2100", "evil-0"));
    injected += 2;
    let mut flooded = 0usize;
    let big_host = "h".repeat(1 << 20);
    for (i, line) in lines.iter().enumerate() {
        push(&mut mixed, line);
        let ts = ts_of(line).unwrap_or(t0);
        if i % 97 == 0 {
            // The ratchet: +500 s per sample of its own.
            let k = (i / 97) as i64;
            push(
                &mut mixed,
                &sample(t0 + k * 500_000, "GPU-ratchet", "evil-1"),
            );
            injected += 1;
        }
        if i % 1_001 == 500 {
            push(
                &mut mixed,
                &sample(1_000, &format!("GPU-1970-{i}"), "evil-2"),
            );
            push(
                &mut mixed,
                &sample(253_402_300_799_000, "GPU-9999", "evil-2"),
            );
            push(&mut mixed, "{\"ts\": 12, \"gpu\": ");
            push(&mut mixed, "not json at all");
            injected += 4;
        }
        if i % 2_003 == 7 && injected < 400 {
            push(
                &mut mixed,
                &sample(ts, &format!("GPU-bighost-{i}"), &big_host),
            );
            injected += 1;
        }
        // The flood, spread evenly over the fleet's telemetry.
        while flooded < flood && flooded * lines.len() < (i + 1) * flood {
            let _ = writeln!(
                mixed,
                "{}",
                sample(
                    ts,
                    &format!("GPU-flood-{flooded:07}"),
                    &format!("flood-{}", flooded % 512)
                )
            );
            flooded += 1;
        }
    }
    while flooded < flood {
        let ts = ts_of(lines[lines.len() - 1]).unwrap_or(t0);
        let _ = writeln!(
            mixed,
            "{}",
            sample(ts, &format!("GPU-flood-{flooded:07}"), "flood-0")
        );
        flooded += 1;
    }
    std::fs::write(dir.join("mixed.jsonl"), &mixed).expect("mixed file");
    drop(mixed);

    forewarn(
        &[
            "backtest",
            "--input",
            "sim/telemetry.jsonl",
            "--alerts-out",
            "clean.jsonl",
        ],
        &dir,
    );
    let out = forewarn(
        &[
            "backtest",
            "--input",
            "mixed.jsonl",
            "--alerts-out",
            "mixed-alerts.jsonl",
            "--dead-letter",
            "dead.jsonl",
        ],
        &dir,
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    // The same alert file, to the byte.
    let clean_alerts = std::fs::read_to_string(dir.join("clean.jsonl")).expect("clean alerts");
    let mixed_alerts = std::fs::read_to_string(dir.join("mixed-alerts.jsonl")).expect("alerts");
    assert!(!clean_alerts.is_empty(), "the clean fleet pages");
    assert!(
        clean_alerts == mixed_alerts,
        "the mixed run's alerts differ from the clean run's:\n--- clean\n{clean_alerts}\n--- mixed\n{mixed_alerts}"
    );

    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for line in std::fs::read_to_string(dir.join("dead.jsonl"))
        .expect("dead letters")
        .lines()
    {
        let v: Value = serde_json::from_str(line).expect("dead letter JSON");
        *reasons
            .entry(v["reason"].as_str().unwrap_or("?").to_owned())
            .or_default() += 1;
        assert!(
            line.len() < 8 * 1024,
            "dead letters stay small: {} bytes",
            line.len()
        );
    }
    eprintln!("dead letters by reason: {reasons:?}");
    for r in [
        "implausible_timestamp",
        "ahead_of_fleet",
        "stale_first_sample",
        "too_large",
        "invalid_json",
        "unconfirmed_gpu",
    ] {
        assert!(reasons.contains_key(r), "no `{r}` dead letter: {reasons:?}");
    }
    assert!(
        reasons["unconfirmed_gpu"] >= flood,
        "every flood sample is dead-lettered: {reasons:?}"
    );
    if std::env::var_os("FOREWARN_CHAOS_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
