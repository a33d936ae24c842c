//! The Parquet exports end to end on a real directory: partitioning by
//! event time, rolling (grace, caps, open-partition bound), crash leftovers,
//! sampling, and the three tables' round trips.

use std::num::{NonZeroU32, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, Float32Array, StringArray};
use arrow::compute::concat_batches;
use datasets::export::{
    AlertRow, AlertTable, ExportConfig, ExportTable, FEATURE_VERSION_KEY, FeatureTable,
    PartitionedWriter, ScoreRow, ScoreTable, feature_batch, feature_schema, list_files,
    metadata_value, read_file,
};
use features::{FEATURE_COUNT, FEATURE_SCHEMA_VERSION, FeatureRow, Phase, Topology};

const H: i64 = 3_600_000;
/// 2026-11-29T00:00:00Z.
const DAY: i64 = 1_795_910_400_000;

/// A fresh, empty directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("forewarn-export-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn row(gpu: &str, ts_ms: i64, k: usize) -> FeatureRow {
    let mut values = [f32::NAN; FEATURE_COUNT];
    for (i, v) in values.iter_mut().enumerate().skip(k % 3) {
        *v = (k * 31 + i) as f32 * 0.5;
    }
    FeatureRow {
        ts_ms,
        gpu: Arc::from(gpu),
        topo: Topology {
            host: Some(Arc::from("node-1")),
            rack: k.is_multiple_of(2).then(|| Arc::from("r07")),
            cluster: Some(Arc::from("east-1")),
            model: None,
            job: Some(Arc::from("train-llm-17")),
        },
        phase: Phase::ALL[k % 4],
        values,
    }
}

fn cfg(root: &Path) -> ExportConfig {
    let mut c = ExportConfig::new(root, "w1");
    c.fsync = false;
    c
}

/// Every file under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).expect("prefix");
                out.push(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn rows_in(files: &[PathBuf]) -> usize {
    files
        .iter()
        .map(|p| {
            read_file(p)
                .expect("read")
                .iter()
                .map(|b| b.num_rows())
                .sum::<usize>()
        })
        .sum()
}

fn paths(root: &Path, table: &str) -> Vec<PathBuf> {
    list_files(root, table, i64::MIN, i64::MAX)
        .expect("list")
        .into_iter()
        .map(|f| f.path)
        .collect()
}

#[test]
fn rows_over_three_hours_round_trip_through_three_partitions() {
    let root = scratch("roundtrip");
    let mut c = cfg(&root);
    c.row_group_rows = NonZeroUsize::new(7).expect("non-zero");
    let mut w = PartitionedWriter::new(FeatureTable::new(), c).expect("writer");
    let mut by_hour: Vec<Vec<FeatureRow>> = vec![Vec::new(); 3];
    for k in 0..90 {
        let ts = DAY + 17 * H + (k as i64) * 2 * 60_000; // every 2 min from 17:00
        let r = row(if k % 2 == 0 { "GPU-a" } else { "GPU-b" }, ts, k);
        w.push(&r).expect("push");
        by_hour[k * 2 / 60].push(r);
    }
    let stats = w.close().expect("close");
    assert_eq!(stats.rows_written, 90);
    assert_eq!(stats.files_finished, 3);
    assert_eq!(
        tree(&root),
        [
            "features/date=2026-11-29/hour=17/part-00000000-w1.parquet",
            "features/date=2026-11-29/hour=18/part-00000001-w1.parquet",
            "features/date=2026-11-29/hour=19/part-00000002-w1.parquet",
        ]
    );
    let files = list_files(&root, "features", i64::MIN, i64::MAX).expect("list");
    assert_eq!(files.len(), 3);
    let schema = feature_schema();
    for (f, rows) in files.iter().zip(&by_hour) {
        let meta = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&f.path).expect("open"),
        )
        .expect("parquet");
        assert_eq!(
            meta.metadata().num_row_groups(),
            5,
            "30 rows in groups of 7"
        );
        let back = read_file(&f.path).expect("read");
        let back = concat_batches(&schema, &back).expect("concat");
        // NaN != NaN in arrays too, so compare the bytes of the IPC-free form.
        let want = feature_batch(&schema, rows).expect("batch");
        assert_eq!(format!("{back:?}"), format!("{want:?}"));
        assert_eq!(back.num_rows(), 30);
        assert_eq!(
            metadata_value(&f.path, FEATURE_VERSION_KEY).expect("metadata"),
            Some(FEATURE_SCHEMA_VERSION.to_string())
        );
    }
    // Time-range listing picks partitions by hour overlap.
    let mid = list_files(&root, "features", DAY + 18 * H + 5, DAY + 18 * H + 6).expect("list");
    assert_eq!(mid.len(), 1);
    assert_eq!(mid[0].hour_start_ms, DAY + 18 * H);
    let two = list_files(&root, "features", DAY + 17 * H + 1, DAY + 19 * H).expect("list");
    assert_eq!(two.len(), 2);
    std::fs::remove_dir_all(&root).expect("cleanup");
}

#[test]
fn an_hour_is_finished_only_after_the_lateness_grace() {
    let root = scratch("grace");
    let mut c = cfg(&root);
    c.lateness_grace = Duration::from_secs(600);
    let mut w = PartitionedWriter::new(FeatureTable::new(), c).expect("writer");
    let table = root.join("features");
    w.push(&row("g", DAY + 10 * H + H - 10_000, 0))
        .expect("10:59:50");
    w.push(&row("g", DAY + 11 * H + 10_000, 1))
        .expect("11:00:10");
    w.push(&row("g", DAY + 11 * H - 5_000, 2))
        .expect("10:59:55, within grace");
    w.push(&row("g", DAY + 11 * H + 599_000, 3))
        .expect("11:09:59");
    assert!(
        paths(&root, "features").is_empty(),
        "hour 10 is still in its grace"
    );
    assert_eq!(w.open_partitions(), 2);
    w.push(&row("g", DAY + 11 * H + 600_000, 4))
        .expect("11:10:00");
    assert_eq!(
        tree(&table),
        [
            "date=2026-11-29/hour=10/part-00000000-w1.parquet",
            "date=2026-11-29/hour=11/part-00000001-w1.parquet.tmp",
        ]
    );
    assert_eq!(rows_in(&paths(&root, "features")), 2, "both hour-10 rows");
    assert_eq!(w.stats().late_rows, 0);
    // Later than the grace: still written, to a new file of its hour.
    w.push(&row("g", DAY + 11 * H - 1_000, 5))
        .expect("10:59:59, late");
    assert_eq!(w.stats().late_rows, 1);
    let stats = w.close().expect("close");
    assert_eq!(stats.rows_written, 6);
    assert_eq!(
        tree(&table),
        [
            "date=2026-11-29/hour=10/part-00000000-w1.parquet",
            "date=2026-11-29/hour=10/part-00000002-w1.parquet",
            "date=2026-11-29/hour=11/part-00000001-w1.parquet",
        ]
    );
    std::fs::remove_dir_all(&root).expect("cleanup");
}

#[test]
fn files_roll_at_the_row_and_byte_caps() {
    let root = scratch("caps");
    let mut c = cfg(&root);
    c.max_file_rows = 10;
    c.row_group_rows = NonZeroUsize::new(4).expect("non-zero");
    let mut w = PartitionedWriter::new(FeatureTable::new(), c).expect("writer");
    for k in 0..25 {
        w.push(&row("g", DAY + k, k as usize)).expect("push");
    }
    assert_eq!(paths(&root, "features").len(), 2, "two full files finished");
    w.close().expect("close");
    let files = paths(&root, "features");
    let counts: Vec<usize> = files
        .iter()
        .map(|p| rows_in(std::slice::from_ref(p)))
        .collect();
    assert_eq!(counts, [10, 10, 5]);

    let root2 = scratch("bytecap");
    let mut c = cfg(&root2);
    c.max_file_bytes = 1;
    c.row_group_rows = NonZeroUsize::new(5).expect("non-zero");
    let mut w = PartitionedWriter::new(FeatureTable::new(), c).expect("writer");
    for k in 0..12 {
        w.push(&row("g", DAY + k, k as usize)).expect("push");
    }
    w.close().expect("close");
    let files = paths(&root2, "features");
    let counts: Vec<usize> = files
        .iter()
        .map(|p| rows_in(std::slice::from_ref(p)))
        .collect();
    assert_eq!(counts, [5, 5, 2], "every row group fills a 1-byte cap");
    std::fs::remove_dir_all(&root).expect("cleanup");
    std::fs::remove_dir_all(&root2).expect("cleanup");
}

#[test]
fn too_many_open_hours_finish_the_oldest() {
    let root = scratch("maxopen");
    let mut c = cfg(&root);
    c.max_open_partitions = NonZeroUsize::new(2).expect("non-zero");
    c.lateness_grace = Duration::from_secs(6 * 3600);
    let mut w = PartitionedWriter::new(FeatureTable::new(), c).expect("writer");
    for (k, hour) in [3, 1, 2].into_iter().enumerate() {
        w.push(&row("g", DAY + hour * H, k)).expect("push");
    }
    assert_eq!(w.open_partitions(), 2);
    let done = list_files(&root, "features", i64::MIN, i64::MAX).expect("list");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].hour_start_ms, DAY + H, "hour 1 is the oldest");
    drop(w);
    assert_eq!(paths(&root, "features").len(), 3, "drop finishes the rest");
    assert!(tree(&root).iter().all(|p| !p.ends_with(".tmp")));
    std::fs::remove_dir_all(&root).expect("cleanup");
}

#[test]
fn crash_leftovers_are_removed_and_sequence_numbers_continue() {
    let root = scratch("crash");
    let mut w = PartitionedWriter::new(FeatureTable::new(), cfg(&root)).expect("writer");
    w.push(&row("g", DAY, 0)).expect("push");
    w.flush_all().expect("flush"); // part-0 finished
    w.push(&row("g", DAY + 1, 1)).expect("push"); // part-1 open
    std::mem::forget(w); // a crash: no footer, no rename
    let other = PartitionedWriter::new(FeatureTable::new(), ExportConfig::new(&root, "w2"));
    let mut other = other.expect("writer w2");
    other.push(&row("g", DAY + 2, 2)).expect("push");
    std::mem::forget(other); // another writer's file, possibly still live
    let hour0 = "features/date=2026-11-29/hour=00";
    assert_eq!(
        tree(&root),
        [
            format!("{hour0}/part-00000000-w1.parquet"),
            format!("{hour0}/part-00000000-w2.parquet.tmp"),
            format!("{hour0}/part-00000001-w1.parquet.tmp"),
        ]
    );
    let mut w = PartitionedWriter::new(FeatureTable::new(), cfg(&root)).expect("restart");
    assert_eq!(w.stats().leftovers_removed, 1);
    w.push(&row("g", DAY + 3, 3)).expect("push");
    w.close().expect("close");
    assert_eq!(
        tree(&root),
        [
            format!("{hour0}/part-00000000-w1.parquet"),
            format!("{hour0}/part-00000000-w2.parquet.tmp"),
            format!("{hour0}/part-00000002-w1.parquet"),
        ],
        "w2's file is not ours to touch; our sequence skips the crashed part"
    );
    assert_eq!(paths(&root, "features").len(), 2, "readers skip .tmp files");
    std::fs::remove_dir_all(&root).expect("cleanup");
}

#[test]
fn a_bad_root_is_an_error_naming_the_path() {
    let dir = scratch("badroot");
    let file = dir.join("not-a-dir");
    std::fs::write(&file, b"x").expect("write");
    let err = PartitionedWriter::new(FeatureTable::new(), cfg(&file))
        .err()
        .expect("a file is not a root");
    let msg = err.to_string();
    assert!(msg.contains(&*file.to_string_lossy()), "{msg}");
    assert!(msg.starts_with("export root"), "{msg}");
    let err = list_files(&dir.join("missing"), "features", 0, 1).expect_err("missing");
    assert!(err.to_string().contains("missing"), "{err}");
    let err = PartitionedWriter::new(FeatureTable::new(), ExportConfig::new(&dir, "a/b"))
        .err()
        .expect("bad id");
    assert!(err.to_string().contains("writer_id"), "{err}");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn sampling_keeps_every_nth_row_per_gpu() {
    let root = scratch("sampling");
    let mut c = cfg(&root);
    c.sample_every = NonZeroU32::new(3).expect("non-zero");
    let mut w = PartitionedWriter::new(FeatureTable::new(), c).expect("writer");
    for k in 0..9 {
        w.push(&row("GPU-a", DAY + k * 1000, 0)).expect("push");
        w.push(&row("GPU-b", DAY + k * 1000, 1)).expect("push");
    }
    w.push(&row("GPU-c", DAY + 9_000, 2)).expect("push");
    let stats = w.close().expect("close");
    assert_eq!(stats.rows_in, 19);
    assert_eq!(stats.rows_sampled_out, 12);
    assert_eq!(stats.rows_written, 7);
    let files = paths(&root, "features");
    let batch =
        concat_batches(&feature_schema(), &read_file(&files[0]).expect("read")).expect("concat");
    let ts = batch
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .expect("ts_ms");
    let kept: Vec<i64> = ts.values().iter().map(|t| (t - DAY) / 1000).collect();
    assert_eq!(kept, [0, 0, 3, 3, 6, 6, 9]);
    std::fs::remove_dir_all(&root).expect("cleanup");
}

fn score(ts_ms: i64, gpu: &str, risk: f32) -> ScoreRow {
    ScoreRow {
        ts_ms,
        gpu: Arc::from(gpu),
        host: Some(Arc::from("node-0042")),
        rack: None,
        cluster: Some(Arc::from("east-1")),
        job: None,
        risk,
        state: Arc::from(if risk > 0.5 { "critical" } else { "ok" }),
        kind: (risk > 0.5).then(|| Arc::from("hbm_ecc_trend")),
        components: vec![risk, 0.0, 1.0 - risk],
        reasons: r#"[{"signal":"x","detail":"y"}]"#.to_string(),
        eta_hours: (risk > 0.5).then_some(9.0),
        model_version: Arc::from("rcf-1"),
    }
}

#[test]
fn scores_round_trip_with_the_detectors_components() {
    let root = scratch("scores");
    let table = ScoreTable::new(&["hard_failure", "gpu_lost", "hbm_ecc_trend"]).expect("table");
    let schema = table.schema();
    assert_eq!(schema.field(9).name(), "risk_hard_failure");
    let mut w = PartitionedWriter::new(table.clone(), cfg(&root)).expect("writer");
    let rows = vec![score(DAY + 5, "GPU-1", 0.9), score(DAY + 6, "GPU-2", 0.1)];
    w.push_all(&rows).expect("push");
    w.close().expect("close");
    let files = paths(&root, "scores");
    assert_eq!(files.len(), 1);
    let back = concat_batches(&schema, &read_file(&files[0]).expect("read")).expect("concat");
    assert_eq!(back, table.to_batch(&rows).expect("batch"));
    let eta = back
        .column_by_name("eta_hours")
        .expect("eta")
        .as_any()
        .downcast_ref::<Float32Array>()
        .expect("f32");
    assert_eq!((eta.value(0), eta.is_null(1)), (9.0, true));
    assert_eq!(
        metadata_value(&files[0], "forewarn.components").expect("meta"),
        Some("hard_failure,gpu_lost,hbm_ecc_trend".to_string())
    );
    // A row with the wrong number of components is refused, not mangled.
    let mut bad = score(DAY, "GPU-3", 0.2);
    bad.components.pop();
    let err = table.to_batch(&[bad]).expect_err("2 of 3 components");
    assert!(err.to_string().contains("GPU-3"), "{err}");
    assert!(ScoreTable::new(&["a", "a"]).is_err());
    assert!(ScoreTable::new(&["Bad Name"]).is_err());
    std::fs::remove_dir_all(&root).expect("cleanup");
}

const CONTRACT_EVENT: &str = r#"{
  "ts": "2026-11-29T17:03:00Z",
  "status": "firing",
  "severity": "critical",
  "kind": "hbm_ecc_trend",
  "scope": "gpu",
  "labels": {"gpu": "GPU-3b1c", "host": "node-0042", "rack": "r07", "cluster": "east-1", "job": "train-llm-17", "model": "NVIDIA H100 80GB HBM3"},
  "dedup_key": "forewarn/gpu/GPU-3b1c/hbm_ecc_trend",
  "summary": "GPU-3b1c on node-0042: correctable ECC rate 40/h",
  "risk": 0.93,
  "eta_hours": 9.0,
  "reasons": [{"signal": "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "detail": "rate 40/h vs peer median 3.1/h"}]
}"#;

#[test]
fn alert_events_round_trip_with_the_whole_event_as_json() {
    let root = scratch("alerts");
    let row = AlertRow::from_json(CONTRACT_EVENT).expect("contract event");
    assert_eq!(row.ts_ms, DAY + 17 * H + 3 * 60_000);
    assert_eq!(row.labels[0].as_deref(), Some("GPU-3b1c"));
    let mut w = PartitionedWriter::new(AlertTable::new(), cfg(&root)).expect("writer");
    w.push(&row).expect("push");
    w.close().expect("close");
    let files = list_files(&root, "alerts", DAY + 17 * H, DAY + 18 * H).expect("list");
    assert_eq!(files.len(), 1);
    assert!(files[0].path.to_string_lossy().contains("date=2026-11-29"));
    let back = read_file(&files[0].path).expect("read");
    let event = back[0]
        .column_by_name("event")
        .expect("event column")
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("utf8");
    let v: serde_json::Value = serde_json::from_str(event.value(0)).expect("json");
    assert_eq!(v["reasons"][0]["signal"], "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL");
    let dedup = back[0]
        .column_by_name("dedup_key")
        .expect("dedup_key")
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("utf8");
    assert_eq!(dedup.value(0), "forewarn/gpu/GPU-3b1c/hbm_ecc_trend");
    let bad = CONTRACT_EVENT.replace("\"firing\"", "\"exploded\"");
    let err = AlertRow::from_json(&bad).expect_err("bad status");
    assert!(err.to_string().contains("exploded"), "{err}");
    std::fs::remove_dir_all(&root).expect("cleanup");
}
