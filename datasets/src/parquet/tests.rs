//! Round trips through an in-memory buffer and a file.

use features::{Field, Sample};

use super::*;

fn samples(n: usize) -> Vec<Sample> {
    (0..n)
        .map(|i| {
            let mut s = Sample::new(
                format!("GPU-{}", i % 7),
                1_795_971_600_000 + (i as i64 / 7) * 30_000,
            )
            .with(Field::GpuTemp, 40.0 + (i % 30) as f64)
            .with(Field::EccSbeVolTotal, (i / 100) as f64);
            if i % 3 == 0 {
                s.metrics.set(Field::PowerUsage, 612.5);
            }
            s.topo.host = Some(format!("node-{:04}", i % 2).into());
            s.topo.job = (i % 5 != 0).then(|| "train-1".into());
            s
        })
        .collect()
}

#[test]
fn round_trip_is_exact_and_deterministic() {
    let input = samples(150_000);
    let write = || {
        let mut w = TelemetryWriter::new(
            Vec::new(),
            &WriterOptions {
                row_group_rows: 50_000,
                ..Default::default()
            },
        )
        .expect("writer");
        for s in &input {
            w.push(s).expect("push");
        }
        assert_eq!(w.rows(), 150_000);
        w.finish().expect("finish")
    };
    let bytes = write();
    assert_eq!(bytes, write(), "same rows, same bytes");

    let dir = std::env::temp_dir().join(format!("fw-parquet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let path = dir.join("t.parquet");
    std::fs::write(&path, &bytes).expect("write file");
    let mut r = TelemetryReader::open(&path).expect("open");
    assert_eq!(r.total_rows(), 150_000);
    let mut back = Vec::new();
    let mut batches = 0;
    while r.next_batch(&mut back).expect("batch").is_some() {
        batches += 1;
    }
    assert!(batches > 10, "streams in batches, got {batches}");
    assert_eq!(back.len(), input.len());
    assert_eq!(back, input, "missing stays missing, values exact");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn non_parquet_file_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("fw-parquet-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let path = dir.join("x.parquet");
    std::fs::write(&path, b"not parquet at all").expect("write");
    assert!(TelemetryReader::open(&path).is_err());
    assert!(
        TelemetryReader::open(&dir.join("missing.parquet"))
            .is_err_and(|e| e.to_string().contains("missing.parquet"))
    );
    std::fs::remove_dir_all(&dir).ok();
}
