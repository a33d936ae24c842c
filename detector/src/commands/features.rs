//! `forewarn features`: runs recorded telemetry through the feature stage
//! and writes the feature vectors as Parquet, one row per accepted sample:
//! `ts`, `gpu`, topology, `phase`, then one `Float32` column per
//! [`features::FEATURE_NAMES`] entry (NaN = missing). The schema version is
//! stored in the file's key-value metadata. For training, attribution
//! studies and eyeballing what the models see.
//!
//! Inputs: Parquet telemetry (`datasets::parquet`), JSON lines of native
//! samples or prometheus-kafka-adapter metrics, dcgm-exporter text or
//! nvidia-smi CSV (the file source's [`FileReader`], which gives scrapes
//! their scrape time). Files are read in the order given (a directory: its
//! files in scrape-time order); each must be in event-time order per GPU
//! (text files are sorted by time after decoding). Decoding nothing at all
//! is an error.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use datasets::export::FeatureFileWriter;
use datasets::parquet::TelemetryReader;
use features::{FeatureConfig, FeatureEngine, FeatureRow, Sample};

use crate::sources::DeadLetters;
use crate::sources::file::{self, FileReader, ReadOptions};
use crate::state::SharedState;

/// Rows per Parquet record batch (and row group flush unit).
const BATCH_ROWS: usize = 65_536;

/// Compute workload-aware features from telemetry files and write them as
/// Parquet.
#[derive(Args, Debug)]
pub struct FeaturesArgs {
    /// Telemetry files: `.parquet` (from `forewarn simulate`), JSON lines
    /// (native samples or prometheus-kafka-adapter metrics), dcgm-exporter
    /// text or nvidia-smi CSV; a directory stands for its files.
    #[arg(long, required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Scrape time of a dcgm-exporter scrape without timestamps (RFC 3339
    /// or unix ms); default: a time in the file's name, else its
    /// modification time.
    #[arg(long, value_parser = file::parse_scrape_time)]
    pub scrape_time: Option<i64>,
    /// Undecodable records go here with their reason (JSON lines).
    #[arg(long)]
    pub dead_letter: Option<PathBuf>,
    /// Output Parquet file.
    #[arg(long, default_value = "features.parquet")]
    pub out: PathBuf,
    /// The service's config (`forewarn.toml`, as `serve --config`): its
    /// `[features]` table sets the feature stage, so exported features match
    /// what the service computes. Default: the built-in settings.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Runs `forewarn features`.
pub fn run(args: &FeaturesArgs) -> anyhow::Result<()> {
    let cfg = match &args.config {
        Some(_) => crate::config::RawConfig::load(args.config.as_deref())?.features,
        None => FeatureConfig::default(),
    };
    let mut engine = FeatureEngine::new(cfg).context("invalid feature config")?;
    let file =
        File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut sink = FeatureSink {
        writer: FeatureFileWriter::new(file, &args.out.display().to_string())?,
        rows: Vec::with_capacity(BATCH_ROWS),
    };
    let mut stats = Stats::default();
    let mut text = Text {
        reader: FileReader::new(ReadOptions {
            scrape_time_ms: args.scrape_time,
        }),
        dead: DeadLetters::open(args.dead_letter.as_deref())?,
    };
    let mut read = 0u64;
    for path in file::expand(&args.input)? {
        read += if path.extension().is_some_and(|e| e == "parquet") {
            run_parquet(&path, &mut engine, &mut sink, &mut stats)?
        } else {
            text.run(&path, &mut engine, &mut sink, &mut stats)?
        };
    }
    text.dead.flush();
    stats.decode_errors = text.dead.count();
    if read == 0 {
        anyhow::bail!(crate::commands::backtest::nothing_decoded(
            &args.input,
            &text.dead,
            args.dead_letter.as_deref()
        ));
    }
    sink.finish()?;
    let c = engine.counters();
    tracing::info!(
        rows = c.rows,
        duplicates = c.duplicates,
        absorbed = c.absorbed,
        late = c.late,
        ahead = c.ahead,
        decode_errors = stats.decode_errors,
        events = stats.events,
        out = %args.out.display(),
        "features written"
    );
    Ok(())
}

#[derive(Debug, Default)]
struct Stats {
    decode_errors: u64,
    events: u64,
}

fn run_parquet(
    path: &Path,
    engine: &mut FeatureEngine,
    sink: &mut FeatureSink,
    stats: &mut Stats,
) -> anyhow::Result<u64> {
    let mut reader =
        TelemetryReader::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut read = 0u64;
    let pb = crate::progress::bar(reader.total_rows(), "samples");
    let mut samples = Vec::new();
    while reader
        .next_batch(&mut samples)
        .with_context(|| format!("reading {}", path.display()))?
        .is_some()
    {
        process(engine, &samples, sink, stats)?;
        pb.inc(samples.len() as u64);
        read += samples.len() as u64;
        samples.clear();
    }
    pb.finish_and_clear();
    Ok(read)
}

/// Text inputs: one reader (scrape times, refusals) and one dead-letter
/// place for all of them.
struct Text {
    reader: FileReader,
    dead: DeadLetters,
}

impl Text {
    fn run(
        &mut self,
        path: &Path,
        engine: &mut FeatureEngine,
        sink: &mut FeatureSink,
        stats: &mut Stats,
    ) -> anyhow::Result<u64> {
        let state = SharedState::new();
        let mut samples = Vec::new();
        self.reader
            .read(path, &state, &mut self.dead, &mut |batch| {
                samples.extend(batch);
                Ok(())
            })?;
        samples.sort_by_key(|s| s.ts_ms);
        let pb = crate::progress::bar(samples.len() as u64, "samples");
        // One batch per event time (a tick of the fleet), bounded in size.
        let mut start = 0;
        while start < samples.len() {
            let ts = samples[start].ts_ms;
            let end = samples[start..]
                .iter()
                .position(|s| s.ts_ms != ts)
                .map_or(samples.len(), |n| start + n)
                .min(start + BATCH_ROWS);
            process(engine, &samples[start..end], sink, stats)?;
            pb.inc((end - start) as u64);
            start = end;
        }
        pb.finish_and_clear();
        Ok(samples.len() as u64)
    }
}

fn process(
    engine: &mut FeatureEngine,
    samples: &[Sample],
    sink: &mut FeatureSink,
    stats: &mut Stats,
) -> anyhow::Result<()> {
    let (mut events, mut rejected) = (Vec::new(), Vec::new());
    engine.process_batch(samples, &mut sink.rows, &mut events, &mut rejected);
    for (i, e) in &rejected {
        tracing::debug!(index = i, reason = e.reason(), error = %e, "sample rejected");
    }
    stats.events += events.len() as u64;
    if sink.rows.len() >= BATCH_ROWS {
        sink.flush()?;
    }
    Ok(())
}

/// Buffers rows and writes them as record batches of the shared feature
/// schema ([`datasets::export::feature_schema`]).
struct FeatureSink {
    writer: FeatureFileWriter<File>,
    rows: Vec<FeatureRow>,
}

impl FeatureSink {
    fn flush(&mut self) -> anyhow::Result<()> {
        self.writer
            .write_rows(&self.rows)
            .context("writing a feature batch")?;
        self.rows.clear();
        Ok(())
    }

    fn finish(mut self) -> anyhow::Result<()> {
        self.flush()?;
        self.writer.finish().context("closing the Parquet file")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::DataType;
    use features::{FEATURE_NAMES, FEATURE_SCHEMA_VERSION, Field};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    /// The file keeps the layout `forewarn features` has always written:
    /// same column names, types, nullability and version metadata.
    #[test]
    fn writes_one_column_per_feature_and_reads_back() {
        let mut engine = FeatureEngine::new(FeatureConfig::default()).expect("config");
        let samples: Vec<Sample> = (0..5)
            .map(|k| {
                Sample::new("GPU-1", 1_000_000 + k * 30_000)
                    .with(Field::GpuTemp, 50.0)
                    .with(Field::PowerUsage, 300.0)
            })
            .collect();
        let path = std::env::temp_dir().join(format!(
            "forewarn-features-test-{}.parquet",
            std::process::id()
        ));
        let mut sink = FeatureSink {
            writer: FeatureFileWriter::new(File::create(&path).expect("create"), "test")
                .expect("writer"),
            rows: Vec::new(),
        };
        let mut stats = Stats::default();
        process(&mut engine, &samples, &mut sink, &mut stats).expect("process");
        let want = datasets::export::feature_batch(&datasets::export::feature_schema(), &sink.rows)
            .expect("batch");
        sink.finish().expect("finish");

        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).expect("open"))
            .expect("reader");
        let kv = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .expect("key-value metadata");
        assert!(kv.iter().any(|e| e.key == "forewarn.feature_schema_version"
            && e.value.as_deref() == Some(FEATURE_SCHEMA_VERSION.to_string().as_str())));
        let schema = builder.schema().clone();
        let lead = [
            ("ts_ms", DataType::Int64, false),
            ("gpu", DataType::Utf8, false),
            ("host", DataType::Utf8, true),
            ("rack", DataType::Utf8, true),
            ("cluster", DataType::Utf8, true),
            ("model", DataType::Utf8, true),
            ("job", DataType::Utf8, true),
            ("phase_label", DataType::Utf8, true),
        ];
        assert_eq!(schema.fields().len(), lead.len() + FEATURE_NAMES.len());
        for (f, (name, ty, nullable)) in schema.fields().iter().zip(lead.clone()) {
            assert_eq!(
                (f.name().as_str(), f.data_type(), f.is_nullable()),
                (name, &ty, nullable)
            );
        }
        for (f, name) in schema.fields().iter().skip(lead.len()).zip(FEATURE_NAMES) {
            assert_eq!(
                (f.name().as_str(), f.data_type(), f.is_nullable()),
                (name, &DataType::Float32, true)
            );
        }
        let back: Vec<_> = builder
            .build()
            .expect("build")
            .collect::<Result<_, _>>()
            .expect("read");
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].num_rows(), 5);
        assert_eq!(format!("{:?}", back[0]), format!("{want:?}"));
        std::fs::remove_file(&path).expect("remove the temporary file");
    }
}
