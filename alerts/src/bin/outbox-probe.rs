//! outbox-probe: a crash-test driver for the alerts pipeline, spawned (and
//! SIGKILLed mid-storm, then restarted) by `tests/crash.rs`. It replays a
//! deterministic incident storm through engine -> router -> outbox ->
//! webhook delivery, as the detector would after a restart (re-reading its
//! input from the start), and exits once the outbox is empty.
//!
//! Usage: `outbox-probe <outbox dir> <webhook url> <gpus> <pace ms>`

use std::process::ExitCode;
use std::time::Duration;

use alerts::{AlertSystem, Labels, Observation, RawConfig, Reason, Scope, Severity};
use tokio_util::sync::CancellationToken;

/// Event-time step between evaluations (a telemetry interval).
const STEP_MS: i64 = 30_000;
/// GPUs turning bad per step.
const WAVE: usize = 20;
/// Steps a GPU stays bad.
const BAD_STEPS: usize = 6;

fn config(url: &str) -> Result<alerts::Config, alerts::ConfigError> {
    RawConfig::from_toml(&format!(
        r#"
        [lifecycle.default]
        for = "0s"
        resolve_after = "0s"
        [route]
        receiver = "hook"
        group_by = ["..."]
        group_wait = "0s"
        group_interval = "1s"
        repeat_interval = "24h"
        [[receivers]]
        type = "webhook"
        name = "hook"
        url = {{ value = "{url}" }}
        timeout = "2s"
        [outbox]
        initial_backoff = "50ms"
        max_backoff = "400ms"
        seed = 7
        "#
    ))?
    .validate()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, url, gpus, pace] = args.as_slice() else {
        eprintln!("usage: outbox-probe <outbox dir> <webhook url> <gpus> <pace ms>");
        return ExitCode::from(2);
    };
    let (Ok(gpus), Ok(pace)) = (gpus.parse::<usize>(), pace.parse::<u64>()) else {
        eprintln!("gpus and pace must be numbers");
        return ExitCode::from(2);
    };
    match run(dir, url, gpus, pace).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("outbox-probe: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(
    dir: &str,
    url: &str,
    gpus: usize,
    pace: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let cfg = config(url)?;
    let mut sys = AlertSystem::open_in(&cfg, std::path::Path::new(dir))?;
    let shutdown = CancellationToken::new();
    let workers = sys.spawn_delivery(&shutdown);
    let labels: Vec<Labels> = (0..gpus)
        .map(|i| [("gpu".to_owned(), format!("GPU-{i:04}"))].into())
        .collect();
    let reasons = [Reason {
        signal: "probe".into(),
        detail: "synthetic storm".into(),
    }];
    let steps = gpus.div_ceil(WAVE) + BAD_STEPS + 2;
    for step in 0..steps {
        let ts = 1_800_000_000_000 + step as i64 * STEP_MS;
        let mut events = Vec::new();
        for (i, l) in labels.iter().enumerate() {
            let start = i / WAVE;
            let bad = step >= start && step < start + BAD_STEPS;
            let obs = Observation {
                ts_ms: ts,
                kind: "storm",
                scope: Scope::Gpu,
                labels: l,
                severity: Severity::Critical,
                value: if bad { 0.95 } else { 0.05 },
                summary: "synthetic storm",
                reasons: &reasons,
                eta_hours: None,
                confirmed: false,
            };
            events.extend(sys.engine.observe(&obs));
        }
        events.extend(sys.engine.tick(ts));
        sys.router.push(&events);
        // Flush at the step and one group_interval later (both in event time).
        sys.router.flush(ts)?;
        sys.router.flush(ts + 1_000)?;
        tokio::time::sleep(Duration::from_millis(pace)).await;
    }
    while sys.outbox.pending("hook") > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    for w in workers {
        w.await??;
    }
    println!("done");
    Ok(())
}
