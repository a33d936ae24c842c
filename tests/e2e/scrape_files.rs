//! Saved scrapes and nvidia-smi output through `forewarn backtest` and
//! `forewarn features`, on the real captures of `features/tests/fixtures/`:
//! timestamp-less dcgm-exporter scrapes take their scrape time (file name,
//! `--scrape-time`) and every scrape is kept; `nvidia-smi -q` output is
//! refused saying what to run instead; a run that decodes nothing fails
//! saying so.

use std::path::Path;
use std::process::{Command, Output};

use forewarn_tests::{forewarn_bin, scratch};
use serde_json::Value;

const SCRAPE: &str = "../features/tests/fixtures/dcgm-exporter/metrics-k8s-rtx4000ada.prom";
const GPU: &str = "GPU-a8394b51-c086-568a-9f1a-c1e1c934c44c";

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(forewarn_bin())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("spawn forewarn")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn fixture(rel: &str) -> String {
    std::fs::canonicalize(rel)
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
        .display()
        .to_string()
}

#[test]
fn a_directory_of_timestamped_scrapes_gives_one_sample_per_gpu_per_scrape() {
    let dir = scratch("scrape-dir");
    let scrapes = dir.join("scrapes");
    std::fs::create_dir_all(&scrapes).expect("dir");
    // Out of order on purpose: the names' times set the order.
    for t in ["21-01-30", "21-00-00", "21-01-00", "21-00-30"] {
        std::fs::copy(SCRAPE, scrapes.join(format!("dcgm-2026-12-03T{t}Z.prom"))).expect("copy");
    }
    let out = run(
        &dir,
        &[
            "backtest",
            "--input",
            "scrapes",
            "--alerts-out",
            "a.jsonl",
            "--dead-letter",
            "dl.jsonl",
        ],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("backtest: 4 samples of 1 GPUs") && err.contains("0 undecodable, 0 rejected"),
        "four scrapes of one GPU, none a duplicate: {err}"
    );
    assert!(
        err.contains("scrape time 2026-12-03T21:00:00Z from the file's name"),
        "{err}"
    );
}

#[test]
fn the_scrape_time_flag_sets_a_single_scrapes_time() {
    let dir = scratch("scrape-flag");
    let scrape = fixture(SCRAPE);
    let out = run(
        &dir,
        &[
            "backtest",
            "--input",
            &scrape,
            "--scrape-time",
            "2026-12-03T21:30:00Z",
            "--alerts-out",
            "a.jsonl",
            "--dead-letter",
            "dl.jsonl",
        ],
    );
    // One scrape leaves the GPU on probation, so nothing is scored: that
    // fails, saying why; its dead letter names the sample's event time.
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nothing was scored") && err.contains("1 unconfirmed_gpu"),
        "{err}"
    );
    let dl = std::fs::read_to_string(dir.join("dl.jsonl")).expect("dead letters");
    let rec: Value = serde_json::from_str(dl.lines().next().expect("one")).expect("json");
    let payload: Value =
        serde_json::from_str(rec["payload"].as_str().expect("payload")).expect("json");
    assert_eq!(payload["gpu"], GPU);
    assert_eq!(
        payload["ts_ms"], 1_796_333_400_000i64,
        "2026-12-03T21:30:00Z"
    );
    // Two timestamp-less scrapes cannot share one scrape time.
    let twice = run(
        &dir,
        &[
            "backtest",
            "--input",
            &scrape,
            &scrape,
            "--scrape-time",
            "1796333400000",
            "--alerts-out",
            "a.jsonl",
        ],
    );
    assert!(!twice.status.success());
    assert!(
        stderr(&twice).contains("--scrape-time is the time of one scrape"),
        "{}",
        stderr(&twice)
    );
}

#[test]
fn nvidia_smi_reports_are_refused_and_captures_decode_but_score_nothing() {
    let dir = scratch("nvsmi-files");
    let report = fixture("../features/tests/fixtures/nvidia-smi/h100-80gb-hbm3-560.35.03-full.txt");
    for cmd in ["backtest", "features"] {
        let out = run(&dir, &[cmd, "--input", &report]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert!(
            err.contains("`nvidia-smi -q` output, which forewarn does not decode")
                && err.contains("nvidia-smi --query-gpu=timestamp,uuid,"),
            "{cmd}: {err}"
        );
    }
    let capture = fixture("../features/tests/fixtures/nvidia-smi/h100-80gb-hbm3-590.48.01.txt");
    let out = run(
        &dir,
        &["backtest", "--input", &capture, "--alerts-out", "a.jsonl"],
    );
    let err = stderr(&out);
    assert!(
        err.contains("backtest: 2 samples") && err.contains("0 undecodable"),
        "the idle and load --query-gpu rows: {err}"
    );
    // Two snapshots of a GPU are not telemetry: nothing is scored, and the
    // run fails saying what to record instead.
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nothing was scored") && err.contains("a snapshot (an nvidia-smi capture"),
        "{err}"
    );
}

#[test]
fn nothing_decoded_is_an_error_that_says_where_the_dead_letters_went() {
    let dir = scratch("nothing-decoded");
    std::fs::write(dir.join("junk.txt"), "hello world\nthis is not telemetry\n").expect("junk");
    let out = run(
        &dir,
        &[
            "backtest",
            "--input",
            "junk.txt",
            "--alerts-out",
            "a.jsonl",
            "--dead-letter",
            "dl.jsonl",
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nothing could be decoded from junk.txt: 0 samples, 2 undecodable (2 bad_line); dead letters in dl.jsonl"),
        "{err}"
    );
    let out = run(
        &dir,
        &["features", "--input", "junk.txt", "--out", "f.parquet"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("nothing could be decoded") && err.contains("--dead-letter FILE"),
        "{err}"
    );
}
