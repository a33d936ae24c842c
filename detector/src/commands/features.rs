//! `forewarn features`: runs recorded telemetry through the feature stage
//! and writes the feature vectors as Parquet, one row per accepted sample:
//! `ts`, `gpu`, topology, `phase`, then one `Float32` column per
//! [`features::FEATURE_NAMES`] entry (NaN = missing). The schema version is
//! stored in the file's key-value metadata. For training, attribution
//! studies and eyeballing what the models see.
//!
//! Inputs: Parquet telemetry (`datasets::parquet`), native JSON lines,
//! dcgm-exporter text or nvidia-smi CSV (`features::decode`). Files are read
//! in the order given; each must be in event-time order per GPU (text files
//! are sorted by time after decoding).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use arrow::array::{ArrayRef, Float32Builder, Int64Builder, StringBuilder};
use arrow::datatypes::{DataType, Field as ArrowField, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use clap::Args;
use datasets::parquet::TelemetryReader;
use features::{
    Encoding, FEATURE_NAMES, FEATURE_SCHEMA_VERSION, FeatureConfig, FeatureEngine, FeatureRow,
    Sample, decode, sniff,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

/// Rows per Parquet record batch (and row group flush unit).
const BATCH_ROWS: usize = 65_536;

/// Compute workload-aware features from telemetry files and write them as
/// Parquet.
#[derive(Args, Debug)]
pub struct FeaturesArgs {
    /// Telemetry files: `.parquet` (from `forewarn simulate`), native JSON
    /// lines, dcgm-exporter text or nvidia-smi CSV.
    #[arg(long, required = true, num_args = 1..)]
    pub input: Vec<PathBuf>,
    /// Output Parquet file.
    #[arg(long, default_value = "features.parquet")]
    pub out: PathBuf,
    /// Feature-stage configuration as JSON (`FeatureConfig`; missing
    /// fields take their defaults).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Runs `forewarn features`.
pub fn run(args: &FeaturesArgs) -> anyhow::Result<()> {
    let cfg = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str::<FeatureConfig>(&text)
                .with_context(|| format!("parsing feature config {}", path.display()))?
        }
        None => FeatureConfig::default(),
    };
    let mut engine = FeatureEngine::new(cfg).context("invalid feature config")?;
    let file =
        File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut sink = FeatureSink::new(file)?;
    let mut stats = Stats::default();
    for path in &args.input {
        if path.extension().is_some_and(|e| e == "parquet") {
            run_parquet(path, &mut engine, &mut sink, &mut stats)?;
        } else {
            run_text(path, &mut engine, &mut sink, &mut stats)?;
        }
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
) -> anyhow::Result<()> {
    let mut reader =
        TelemetryReader::open(path).with_context(|| format!("opening {}", path.display()))?;
    let pb = crate::progress::bar(reader.total_rows(), "samples");
    let mut samples = Vec::new();
    while reader
        .next_batch(&mut samples)
        .with_context(|| format!("reading {}", path.display()))?
        .is_some()
    {
        process(engine, &samples, sink, stats)?;
        pb.inc(samples.len() as u64);
        samples.clear();
    }
    pb.finish_and_clear();
    Ok(())
}

fn run_text(
    path: &Path,
    engine: &mut FeatureEngine,
    sink: &mut FeatureSink,
    stats: &mut Stats,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut samples = Vec::new();
    if sniff(&bytes) == Some(Encoding::Native) {
        for line in bytes.split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let out = decode(line, 0);
            stats.decode_errors += out.errors.len() as u64;
            samples.extend(out.samples);
        }
    } else {
        let out = decode(&bytes, 0);
        stats.decode_errors += out.errors.len() as u64;
        samples = out.samples;
    }
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
    Ok(())
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

/// Buffers rows and writes them as Arrow record batches.
struct FeatureSink {
    writer: ArrowWriter<File>,
    schema: SchemaRef,
    rows: Vec<FeatureRow>,
}

/// The Arrow schema of the export.
pub fn feature_schema() -> SchemaRef {
    let mut fields = vec![
        ArrowField::new("ts_ms", DataType::Int64, false),
        ArrowField::new("gpu", DataType::Utf8, false),
    ];
    for name in ["host", "rack", "cluster", "model", "job", "phase_label"] {
        fields.push(ArrowField::new(name, DataType::Utf8, true));
    }
    for name in FEATURE_NAMES {
        fields.push(ArrowField::new(name, DataType::Float32, true));
    }
    Arc::new(Schema::new(fields))
}

impl FeatureSink {
    fn new(file: File) -> anyhow::Result<Self> {
        let schema = feature_schema();
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_key_value_metadata(Some(vec![KeyValue::new(
                "forewarn.feature_schema_version".to_string(),
                FEATURE_SCHEMA_VERSION.to_string(),
            )]))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .context("creating the Parquet writer")?;
        Ok(FeatureSink {
            writer,
            schema,
            rows: Vec::with_capacity(BATCH_ROWS),
        })
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let batch = to_batch(&self.schema, &self.rows)?;
        self.writer
            .write(&batch)
            .context("writing a feature batch")?;
        self.rows.clear();
        Ok(())
    }

    fn finish(mut self) -> anyhow::Result<()> {
        self.flush()?;
        self.writer.close().context("closing the Parquet file")?;
        Ok(())
    }
}

/// Rows → one record batch of [`feature_schema`].
pub fn to_batch(schema: &SchemaRef, rows: &[FeatureRow]) -> anyhow::Result<RecordBatch> {
    let n = rows.len();
    let mut ts = Int64Builder::with_capacity(n);
    let mut gpu = StringBuilder::with_capacity(n, n * 40);
    let mut topo: Vec<StringBuilder> = (0..6).map(|_| StringBuilder::new()).collect();
    for r in rows {
        ts.append_value(r.ts_ms);
        gpu.append_value(&*r.gpu);
        let t = &r.topo;
        for (b, v) in topo
            .iter_mut()
            .zip([&t.host, &t.rack, &t.cluster, &t.model, &t.job])
        {
            b.append_option(v.as_deref());
        }
        topo[5].append_value(r.phase.label());
    }
    let mut columns: Vec<ArrayRef> = vec![Arc::new(ts.finish()), Arc::new(gpu.finish())];
    columns.extend(topo.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    for i in 0..FEATURE_NAMES.len() {
        let mut col = Float32Builder::with_capacity(n);
        for r in rows {
            col.append_value(r.values[i]);
        }
        columns.push(Arc::new(col.finish()));
    }
    RecordBatch::try_new(schema.clone(), columns).context("building a feature batch")
}

#[cfg(test)]
mod tests {
    use super::*;
    use features::Field;

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
        let (mut rows, mut events, mut rejected) = (Vec::new(), Vec::new(), Vec::new());
        engine.process_batch(&samples, &mut rows, &mut events, &mut rejected);
        let schema = feature_schema();
        let batch = to_batch(&schema, &rows).expect("batch");
        let path = std::env::temp_dir().join(format!(
            "forewarn-features-test-{}.parquet",
            std::process::id()
        ));
        let mut w =
            ArrowWriter::try_new(File::create(&path).expect("create"), schema.clone(), None)
                .expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            File::open(&path).expect("open"),
        )
        .expect("reader")
        .build()
        .expect("build");
        let back: Vec<RecordBatch> = reader.collect::<Result<_, _>>().expect("read");
        assert_eq!(back.len(), 1);
        assert_eq!(back[0], batch);
        assert_eq!(batch.num_columns(), 8 + FEATURE_NAMES.len());
        assert_eq!(batch.num_rows(), 5);
        std::fs::remove_file(&path).expect("remove the temporary file");
    }
}
