//! Writes the seed corpus of every fuzz target into `fuzz/corpus/<target>/`
//! from the project's own fixtures and config examples, and from states
//! built by the library crates (alert engine and router snapshots, small
//! forests). Run from the repository root:
//! `cargo run --manifest-path fuzz/Cargo.toml --example make_seeds`.
//! The committed corpus is this output after `cargo fuzz cmin` and the
//! inputs fuzzing found (see docs/fuzzing.md).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use alerts::{AlertEngine, Dispatcher, Observation, RawConfig, Router, Scope, Severity};
use features::DecodeOutput;
use features::decode::prom;
use models::rcf::{Forest, ThresholdedForest};

const FIXTURES: &str = "features/tests/fixtures";

fn put(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("fuzz/corpus").join(target);
    fs::create_dir_all(&dir).expect("corpus dir");
    fs::write(dir.join(name), bytes).expect("write seed");
}

fn read(path: &str) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e} (run from the repo root)"))
}

/// The `--query-gpu … --format=csv` tables (header + rows) of a capture.
fn csv_tables(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("timestamp, ") && l.contains("uuid") {
            let rows: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|r| !r.trim().is_empty() && !r.starts_with('$'))
                .take(2)
                .copied()
                .collect();
            out.push(format!("{l}\n{}\n", rows.join("\n")));
        }
    }
    out
}

fn decoders() {
    let scrape = read(&format!(
        "{FIXTURES}/dcgm-exporter/metrics-k8s-rtx4000ada.prom"
    ));
    put("decode_prom", "rtx4000ada.prom", scrape.as_bytes());
    put("decode_stream", "rtx4000ada.prom", scrape.as_bytes());
    put(
        "decode_prom",
        "small.prom",
        b"# HELP DCGM_FI_DEV_GPU_TEMP t\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n\
DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"h1\",modelName=\"H100\"} 61 1767225600000\n\
DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",Hostname=\"h1\"} 301.5 1767225600000\n\
dcgm_ecc_dbe_volatile_total{uuid=\"GPU-b\",pod_name=\"p\"} 9223372036854775794\n\
DCGM_EXP_XID_ERRORS_COUNT{UUID=\"GPU-a\",xid=\"79\"} 1\n",
    );
    for (i, file) in [
        "nvidia-smi/h100-80gb-hbm3-590.48.01.txt",
        "nvidia-smi/h200-590.48.01.txt",
    ]
    .iter()
    .enumerate()
    {
        for (j, t) in csv_tables(&read(&format!("{FIXTURES}/{file}")))
            .iter()
            .enumerate()
        {
            put("decode_nvsmi", &format!("table-{i}-{j}.csv"), t.as_bytes());
            if j == 0 {
                put("decode_stream", &format!("table-{i}.csv"), t.as_bytes());
            }
        }
    }
    // Native JSON: the scrape's samples written back in the native format.
    let mut out = DecodeOutput::default();
    prom::decode_into(scrape.as_bytes(), 1_767_225_600_000, &mut out);
    let json: Vec<String> = out
        .samples
        .iter()
        .map(|s| serde_json::to_string(s).expect("sample json"))
        .collect();
    put("decode_native", "object.json", json[0].as_bytes());
    put(
        "decode_native",
        "array.json",
        format!("[{}]", json.join(",")).as_bytes(),
    );
    put(
        "decode_native",
        "epoch.json",
        br#"{"ts":1767225600000,"gpu":"GPU-1","host":"h","rack":"r","cluster":"c","model":"H100","job":"7","metrics":{"DCGM_FI_DEV_GPU_TEMP":60,"DCGM_FI_DEV_XID_ERRORS":79,"custom_metric":1.5}}"#,
    );
    put(
        "decode_stream",
        "lines.jsonl",
        format!("{}\n", json.join("\n")).as_bytes(),
    );
    let adapter = |ts: &str, name: &str, v: &str, uuid: &str| {
        format!(
            r#"{{"timestamp":"{ts}","value":"{v}","name":"{name}","labels":{{"UUID":"{uuid}","Hostname":"h1","gpu":"0","__name__":"{name}"}}}}"#
        )
    };
    let lines = [
        adapter("2026-01-01T00:00:00Z", "DCGM_FI_DEV_GPU_TEMP", "61", "GPU-a"),
        adapter("2026-01-01T00:00:00Z", "DCGM_FI_DEV_POWER_USAGE", "300.5", "GPU-a"),
        adapter("2026-01-01T00:00:00Z", "DCGM_FI_DEV_GPU_TEMP", "NaN", "GPU-b"),
        adapter("2026-01-01T00:00:03Z", "DCGM_FI_DEV_GPU_TEMP", "+Inf", "GPU-a"),
        r#"{"timestamp":1767225605000,"value":42,"name":"DCGM_FI_DEV_SM_CLOCK","labels":{"UUID":"GPU-a"}}"#.to_owned(),
    ];
    put("decode_adapter", "lines.jsonl", lines.join("\n").as_bytes());
    put(
        "decode_stream",
        "adapter.jsonl",
        lines.join("\n").as_bytes(),
    );
}

fn configs() {
    for path in [
        "docs/forewarn.example.toml",
        "detector/src/config/default_alerts.toml",
        "detector/src/config/testdata/e2e-kafka-routes.toml",
        "detector/src/config/testdata/files.toml",
        "detector/src/config/testdata/durations.toml",
    ] {
        let name = Path::new(path)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(path);
        put("config", name, read(path).as_bytes());
    }
}

fn cbor<T: serde::Serialize>(v: &T) -> Vec<u8> {
    let mut out = Vec::new();
    ciborium::into_writer(v, &mut out).expect("cbor");
    out
}

fn alert_states() {
    let cfg = RawConfig::from_toml(&read("detector/src/config/default_alerts.toml"))
        .and_then(|r| r.validate())
        .expect("default alerts");
    let mut engine = AlertEngine::new(cfg.engine.clone());
    let mut dispatcher = Dispatcher::new(Router::new(&cfg.route), HashMap::new());
    let t0 = 1_767_225_600_000i64;
    for step in 0..40i64 {
        for (g, host) in [("GPU-a", "h1"), ("GPU-b", "h1"), ("GPU-c", "h2")] {
            let labels: BTreeMap<String, String> = [
                ("gpu", g),
                ("host", host),
                ("rack", "r1"),
                ("cluster", "c1"),
                ("job", "j1"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
            for (kind, value) in [
                (
                    "gpu_hard_failure",
                    if step > 5 && g == "GPU-a" { 1.0 } else { 0.0 },
                ),
                (
                    "gpu_lost",
                    if step > 20 && g == "GPU-c" { 1.0 } else { 0.0 },
                ),
                ("thermal", 0.1 * (step % 10) as f64),
            ] {
                let events = engine.observe(&Observation {
                    ts_ms: t0 + step * 30_000,
                    kind,
                    scope: Scope::Gpu,
                    labels: &labels,
                    severity: Severity::Critical,
                    value,
                    summary: "seed",
                    reasons: &[],
                    eta_hours: None,
                    confirmed: false,
                });
                for e in &events {
                    dispatcher.push(e);
                }
            }
        }
        for e in engine.tick(t0 + step * 30_000) {
            dispatcher.push(&e);
        }
        if step == 30 {
            put(
                "restore_alerts",
                "engine-mid.cbor",
                &cbor(&engine.snapshot()),
            );
            put(
                "restore_alerts",
                "router-mid.cbor",
                &cbor(&dispatcher.snapshot()),
            );
        }
    }
    put("restore_alerts", "engine.cbor", &cbor(&engine.snapshot()));
    put(
        "restore_alerts",
        "router.cbor",
        &cbor(&dispatcher.snapshot()),
    );
    put(
        "restore_alerts",
        "engine-empty.cbor",
        &cbor(&AlertEngine::new(cfg.engine.clone()).snapshot()),
    );
}

fn forests() {
    for (name, trees, sample, dims, shingle, points) in [
        ("cold", 2, 8, 2, 1, 3),
        ("small", 3, 8, 2, 1, 40),
        ("shingled", 2, 16, 1, 3, 60),
    ] {
        let mut f = Forest::builder()
            .trees(trees)
            .sample_size(sample)
            .input_dimensions(dims)
            .shingle_size(shingle)
            .output_after(4)
            .seed(7)
            .build()
            .expect("forest");
        for i in 0..points {
            let row: Vec<f64> = (0..dims)
                .map(|d| ((i * 7 + d * 3) % 11) as f64 / 10.0)
                .collect();
            f.update(&row).expect("update");
        }
        put(
            "restore_rcf",
            &format!("{name}.json"),
            f.to_json().expect("json").as_bytes(),
        );
        if name == "small" {
            let mut t = ThresholdedForest::new(
                f,
                models::grading::GraderConfig {
                    differences: false,
                    ..Default::default()
                },
            )
            .expect("thresholded");
            for i in 0..20 {
                let _ = t.process(&[(i % 5) as f64 / 5.0, 0.5]);
            }
            put(
                "restore_rcf",
                "thresholded.json",
                t.to_json().expect("json").as_bytes(),
            );
        }
    }
}

fn main() {
    decoders();
    configs();
    alert_states();
    forests();
}
