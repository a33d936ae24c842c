//! The offline retraining loop on the service's own exports, as an
//! operator runs it (docs/models.md): `serve` on a simulated fleet with
//! exports on, `train` on the export root, `evaluate --challenger` against
//! the model in service (the built-in pipeline, whose scores the service
//! exported), `promote` into `models.dir`, and the same running service
//! reports the new model on `/v1/models`. A verdict the challenger lost is
//! never promoted.
//!
//! At CI size (a week of 160 GPUs) a model trained on the exports does not
//! beat the built-in pipeline on every check (measured: docs/performance.md
//! row 31), so the winning run opens the gate with its flags; the gate's
//! checks are unit-tested (`detector::commands::evaluate::verdict`) and the
//! refused promotion is checked here on a tie.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use forewarn_tests::service::wait_for;
use forewarn_tests::{forewarn, forewarn_bin, free_port, http_get, scratch};

/// Simulated GPUs: enough failures in a week to train on, small for CI.
const GPUS: usize = 160;
/// Event time exported before training: at least a week.
const DAYS: usize = 7;

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Finished hour partitions of the feature table.
fn finished_hours(export: &Path) -> usize {
    let Ok(dates) = std::fs::read_dir(export.join("features")) else {
        return 0;
    };
    let mut n = 0;
    for d in dates.flatten() {
        for h in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
            let done = std::fs::read_dir(h.path())
                .into_iter()
                .flatten()
                .flatten()
                .any(|f| f.file_name().to_string_lossy().ends_with(".parquet"));
            n += usize::from(done);
        }
    }
    n
}

fn model_version(port: u16) -> String {
    http_get(port, "/v1/models")
        .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
        .and_then(|v| v["version"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn train_on_exports_evaluate_promote_and_hot_reload() {
    let dir = scratch("retrain");
    let port = free_port();
    std::fs::create_dir_all(dir.join("models")).expect("models dir");
    std::fs::write(
        dir.join("forewarn.toml"),
        format!(
            r#"[source]
type = "simulator"
gpus = {GPUS}
seed = 5
speed = 0

[api]
listen = "127.0.0.1:{port}"

[models]
dir = "models"
watch_interval = "1s"

[export]
enabled = true
dir = "export"
"#
        ),
    )
    .expect("config");
    let log = std::fs::File::create(dir.join("serve.log")).expect("log");
    let mut serve = Killed(
        Command::new(forewarn_bin())
            .args(["serve", "--config", "forewarn.toml"])
            .current_dir(&dir)
            .env("FOREWARN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn serve"),
    );
    let export = dir.join("export");
    wait_for(
        "a week of exported feature partitions",
        Duration::from_secs(1800),
        || finished_hours(&export) >= DAYS * 24 + 2,
    );
    let builtin = model_version(port);
    assert!(builtin.starts_with("rules+rcf-"), "{builtin}");

    // Train on the export root, as the service wrote it.
    let out = forewarn(
        &[
            "train",
            "--data",
            "export",
            "--horizon",
            "24h",
            "--skip-invisible",
            "--out",
            "new.fwm",
            "--report",
            "train.json",
        ],
        &dir,
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("train.json")).expect("report"))
            .expect("report json");
    let read = &report["read"][0];
    // The real fleet, not one fleet per file.
    assert_eq!(read["gpus"], GPUS, "{}", stderr(&out));
    assert!(read["files"].as_u64().unwrap_or(0) > 1, "{read}");
    assert!(
        read["span_hours"].as_f64().unwrap_or(0.0) >= (DAYS * 24) as f64,
        "{read}"
    );
    assert!(read["failures"].as_u64().unwrap_or(0) > 0, "{read}");
    assert!(
        read["labels"]["alerts"]["notes"]["events"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{read}"
    );

    // Challenger against the built-in champion on the held-back window.
    let out = forewarn(
        &[
            "evaluate",
            "--challenger",
            "new.fwm",
            "--data",
            "export",
            "--models-dir",
            "models",
            "--verdict",
            "verdict.json",
            "--min-gain=-1",
            "--max-recall-loss",
            "1",
            "--max-alarm-ratio",
            "1000",
        ],
        &dir,
    );
    let verdict: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("verdict.json")).expect("verdict"))
            .expect("verdict json");
    assert_eq!(
        verdict["champion"]["version"],
        builtin.as_str(),
        "{verdict}"
    );
    assert_eq!(
        verdict["winner"],
        "challenger",
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );

    // Promote: the running service swaps it in, no restart.
    forewarn(
        &[
            "promote",
            "--verdict",
            "verdict.json",
            "--models-dir",
            "models",
        ],
        &dir,
    );
    wait_for(
        "the new model on /v1/models",
        Duration::from_secs(60),
        || {
            let v = model_version(port);
            v.contains("+gbdt-") || v.contains("+logistic-")
        },
    );
    assert!(
        serve.0.try_wait().expect("serve status").is_none(),
        "serve restarted or died"
    );

    // A challenger that does not beat the champion (itself) is refused.
    forewarn(
        &[
            "evaluate",
            "--challenger",
            "new.fwm",
            "--champion",
            "new.fwm",
            "--data",
            "export",
            "--since",
            "2d",
            "--verdict",
            "tie.json",
        ],
        &dir,
    );
    let out = Command::new(forewarn_bin())
        .args(["promote", "--verdict", "tie.json", "--models-dir", "models"])
        .current_dir(&dir)
        .output()
        .expect("spawn promote");
    assert!(!out.status.success());
    assert!(stderr(&out).contains("not promoted"), "{}", stderr(&out));
    drop(serve);
    std::fs::remove_dir_all(&dir).ok();
}
