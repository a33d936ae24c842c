//! `forewarn simulate`: deterministic bytes, every format decodes.

use forewarn_tests::{forewarn, scratch};

#[test]
fn same_seed_gives_identical_parquet_and_labels() {
    let dir = scratch("sim-det");
    let args = |out: &str| {
        vec![
            "simulate", "--gpus", "48", "--hours", "3", "--seed", "11", "--format", "parquet",
            "--out", out,
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    for out in ["a", "b"] {
        let a = args(out);
        forewarn(&a.iter().map(String::as_str).collect::<Vec<_>>(), &dir);
    }
    for f in ["telemetry.parquet", "labels.parquet", "labels.csv"] {
        let a = std::fs::read(dir.join("a").join(f)).expect("a");
        let b = std::fs::read(dir.join("b").join(f)).expect("b");
        assert!(!a.is_empty(), "{f} empty");
        assert_eq!(a, b, "{f} differs between runs with the same seed");
    }
    let other = [
        "simulate", "--gpus", "48", "--hours", "3", "--seed", "12", "--format", "parquet", "--out",
        "c",
    ];
    forewarn(&other, &dir);
    assert_ne!(
        std::fs::read(dir.join("a/telemetry.parquet")).ok(),
        std::fs::read(dir.join("c/telemetry.parquet")).ok()
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn jsonl_and_prom_outputs_decode_back() {
    let dir = scratch("sim-formats");
    for format in ["jsonl", "prom"] {
        forewarn(
            &[
                "simulate", "--gpus", "16", "--hours", "0.5", "--format", format, "--out", format,
            ],
            &dir,
        );
        let bytes =
            std::fs::read(dir.join(format).join(format!("telemetry.{format}"))).expect("telemetry");
        let out = if format == "jsonl" {
            let mut out = features::decode::DecodeOutput::default();
            features::decode::native::decode_lines(&bytes, &mut out);
            out
        } else {
            features::decode(&bytes, 0)
        };
        assert!(out.errors.is_empty(), "{format}: {:?}", out.errors.first());
        assert_eq!(
            out.samples.len(),
            16 * 60,
            "{format}: 16 GPUs × 60 intervals of 30 s"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_flags_are_clear_errors() {
    let dir = scratch("sim-bad");
    let out = std::process::Command::new(forewarn_tests::forewarn_bin())
        .args(["simulate", "--gpus", "0", "--out", "x"])
        .current_dir(&dir)
        .output()
        .expect("spawn");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gpus"), "error names the flag: {err}");
    std::fs::remove_dir_all(&dir).ok();
}
