//! `forewarn train`'s reader on the service's exports: an export root or
//! its feature table is one fleet, whatever the number of hourly files,
//! writers (shards) and late files; each GPU's rows arrive in event-time
//! order; `.tmp` files are never read; the time range filters; failures are
//! read off the stitched histories and labels apply across files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datasets::export::{ExportConfig, FeatureTable, PartitionedWriter};
use datasets::training::{Dataset, Fates, Interner, SetConfig, Split, build, split_of};
use features::{Col, FEATURE_COUNT, FeatureRow, Phase, Topology};

const H: i64 = 3_600_000;
/// 2026-11-29T00:00:00Z.
const DAY: i64 = 1_795_910_400_000;
const MIN: i64 = 60_000;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("forewarn-trainexp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn row(gpu: usize, ts_ms: i64, dbe: bool) -> FeatureRow {
    let mut values = [0.0f32; FEATURE_COUNT];
    values[Col::EccDbeDelta as usize] = if dbe { 1.0 } else { 0.0 };
    FeatureRow {
        ts_ms,
        gpu: Arc::from(format!("GPU-{gpu:03}")),
        topo: Topology {
            host: Some(Arc::from(format!("node-{}", gpu / 8))),
            rack: None,
            cluster: None,
            model: None,
            job: None,
        },
        phase: Phase::ALL[0],
        values,
    }
}

/// 16 GPUs over `hours`, one row per GPU every 10 min, GPUs split over two
/// writers (shards) as the service splits them; GPU 3 fails (a DBE) at
/// hour 30. One late row per writer lands in a second file of hour 2.
fn write_fleet(root: &Path, hours: i64) {
    let mut writers: Vec<PartitionedWriter<FeatureTable>> = (0..2)
        .map(|w| {
            let mut c = ExportConfig::new(root, format!("node-shard{w}"));
            c.fsync = false;
            PartitionedWriter::new(FeatureTable::new(), c).expect("writer")
        })
        .collect();
    for step in 0..hours * 6 {
        let ts = DAY + step * 10 * MIN;
        for g in 0..16 {
            let dbe = g == 3 && ts >= DAY + 30 * H;
            writers[g % 2].push(&row(g, ts, dbe)).expect("push");
        }
        // Past hour 4 plus the grace: a row of hour 2 arrives late.
        if step == 5 * 6 {
            for (w, wr) in writers.iter_mut().enumerate() {
                wr.push(&row(w, DAY + 2 * H + 25 * MIN + 1, false))
                    .expect("late row");
            }
        }
    }
    for w in writers {
        w.close().expect("close");
    }
    // A file being written: never read.
    let tmp = root.join("features/date=2026-11-29/hour=05/part-00009999-other.parquet.tmp");
    std::fs::write(tmp, b"not parquet yet").expect("tmp");
}

#[test]
fn an_export_root_is_one_fleet_in_event_time_order() {
    let root = scratch("fleet");
    write_fleet(&root, 48);
    for arg in [root.clone(), root.join("features")] {
        let data = Dataset::open(&arg, None, None).expect("dataset");
        assert!(data.files.len() > 48, "{} files", data.files.len());
        assert_eq!(data.export_root.as_deref(), Some(root.as_path()));
        let fates = Fates::scan(&data, &[], |_| {}).expect("scan");
        assert_eq!(fates.gpu_count(), 16, "16 GPUs, not one fleet per file");
        assert_eq!(fates.failures(), 1);
        let f = &fates.fates[fates.gpus.get("GPU-003").expect("gpu 3") as usize];
        assert_eq!(f.failure_ms, Some(DAY + 30 * H));
        assert_eq!(fates.rows, 16 * 48 * 6 + 2);
        assert_eq!(fates.start_ms, DAY);

        // Ordered: every GPU's rows by event time, the late rows in place.
        let mut last = [i64::MIN; 16];
        let (mut gpus, mut hosts) = (Interner::default(), Interner::default());
        let n = data
            .for_each_row(
                &mut gpus,
                &mut hosts,
                None,
                true,
                |r| {
                    let g = r.gpu as usize;
                    assert!(r.ts_ms >= last[g], "GPU {g} went back in time");
                    last[g] = r.ts_ms;
                },
                |_| {},
            )
            .expect("rows");
        assert_eq!(n, fates.rows);
    }
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn the_time_range_filters_files_and_rows() {
    let root = scratch("range");
    write_fleet(&root, 48);
    let data =
        Dataset::open(&root, Some(DAY + 24 * H + 30 * MIN), Some(DAY + 36 * H)).expect("range");
    let fates = Fates::scan(&data, &[], |_| {}).expect("scan");
    assert_eq!(fates.start_ms, DAY + 24 * H + 30 * MIN);
    assert!(fates.end_ms < DAY + 36 * H);
    assert_eq!(fates.rows, 16 * (11 * 6 + 3));
    assert!(data.files.len() <= 2 * 12 + 2, "{} files", data.files.len());
    // Nothing in range: an error that says so.
    let e = Dataset::open(&root, Some(DAY + 100 * H), None).expect_err("empty");
    assert!(e.to_string().contains("no finished feature files"), "{e}");
    // Not an export at all.
    let e =
        Dataset::open(&root.join("features/date=2026-11-29"), None, None).expect_err("date dir");
    assert!(e.to_string().contains("neither"), "{e}");
    std::fs::remove_dir_all(&root).ok();
}

#[test]
fn sets_from_an_export_train_before_the_cut_and_respect_the_row_cap() {
    let root = scratch("sets");
    write_fleet(&root, 96);
    let data = Dataset::open(&root, None, None).expect("dataset");
    let fates = Fates::scan(&data, &[], |_| {}).expect("scan");
    let cfg = SetConfig {
        horizon_ms: 6 * H,
        negative_rate: 1.0,
        positive_rate: 1.0,
        time_cut: Some(0.5),
        ..SetConfig::default()
    };
    let sets = build(
        &data,
        &fates,
        &cfg,
        1,
        |r, out| out.push(r.ts_ms as f32),
        |_| {},
    )
    .expect("sets");
    let cut = fates.cut_ms(0.5);
    assert!(sets.train.ts_ms.iter().all(|t| t + 6 * H <= cut));
    assert!(sets.validation.ts_ms.iter().all(|t| *t >= cut));
    // GPU 3 fails at hour 30, before the cut (hour 48): 6 h of positives,
    // in training when its GPU trains, else none (held-out rows start at
    // the cut).
    let total = sets.train.positives() + sets.calibration.positives() + sets.validation.positives();
    let split = split_of(&cfg, &fates, "GPU-003", DAY + 24 * H);
    assert_eq!(total, if split == Some(Split::Train) { 36 } else { 0 });
    let all = sets.train.len() + sets.calibration.len() + sets.validation.len();

    let capped = SetConfig {
        max_rows: Some(all / 10),
        ..cfg
    };
    let small = build(
        &data,
        &fates,
        &capped,
        1,
        |r, out| out.push(r.ts_ms as f32),
        |_| {},
    )
    .expect("capped");
    let n = small.train.len() + small.calibration.len() + small.validation.len();
    assert!(
        n <= all / 10 + all / 50,
        "{n} rows kept of {all}, cap {}",
        all / 10
    );
    assert!(n >= all / 40, "{n} rows kept of {all}");
    std::fs::remove_dir_all(&root).ok();
}
