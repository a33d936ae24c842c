//! [`PartitionedWriter`]: the service's continuous export of one table into
//! hourly partitions by event time (layout in [`super::layout`]).
//!
//! Each open partition has one `.parquet.tmp` file and a buffer of at most
//! `row_group_rows` rows; a full buffer becomes one row group on disk, so
//! memory is bounded by `row_group_rows × max_open_partitions` rows plus
//! one row group being encoded. A file is finished (footer, fsync, rename to
//! `.parquet`) when the event-time watermark passes the end of its hour by
//! the lateness grace, when it reaches its row or byte cap, when more than
//! `max_open_partitions` partitions are open (the oldest hour goes), on
//! [`PartitionedWriter::flush_all`], [`PartitionedWriter::close`] and drop.
//! Readers only ever see finished files.
//!
//! A row later than the grace is still written (nothing valid is dropped):
//! it opens a new file in its old partition, counted in
//! [`ExportStats::late_rows`], and that file is finished at the next roll.
//!
//! Restart: leftover `.tmp` files of this writer id (a crash) have no
//! footer and cannot be read, so they are removed
//! ([`ExportStats::leftovers_removed`]); the sequence number continues after
//! the highest one this writer id has on disk, so names never collide.
//! Writer ids must be unique among writers running at once (e.g.
//! `<host>-shard<N>`) and stable across restarts.

use std::collections::HashMap;
use std::fs::File;
use std::num::{NonZeroU32, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use super::ExportError;
use super::layout::{self, HOUR_MS, TMP_SUFFIX};
use super::table::ExportTable;

/// Settings of one [`PartitionedWriter`].
#[derive(Debug, Clone)]
pub struct ExportConfig {
    /// The export root; the table's directory is `<root>/<table>`.
    pub root: PathBuf,
    /// Part of every file name: unique among running writers, stable across
    /// restarts (leftovers of this id are cleaned up on start).
    pub writer_id: String,
    /// How long (in event time) after an hour ends its partition stays open
    /// for late samples. 10 min by default: more than the pipeline's
    /// out-of-order window, small enough that an hour is readable soon.
    pub lateness_grace: Duration,
    /// Rows buffered per open partition before they are written as one row
    /// group. 16 Ki by default: ~7 MB of feature rows (~430 B each), large enough for
    /// good compression.
    pub row_group_rows: NonZeroUsize,
    /// Partitions open at once; opening one more finishes the oldest hour.
    /// 3 by default: the current hour, the previous one within its grace,
    /// and one for a late straggler.
    pub max_open_partitions: NonZeroUsize,
    /// A file is finished once it holds this many rows (4 Mi by default).
    pub max_file_rows: u64,
    /// … or this many bytes on disk (256 MiB by default).
    pub max_file_bytes: u64,
    /// Keep every Nth row per GPU (the first one of each GPU included);
    /// rows without a GPU are always kept. 1 (every row) by default.
    pub sample_every: NonZeroU32,
    /// fsync each file before its rename, so a crash cannot leave a
    /// finished name on incomplete data. On by default.
    pub fsync: bool,
}

impl ExportConfig {
    /// Defaults for everything but where and who.
    pub fn new(root: impl Into<PathBuf>, writer_id: impl Into<String>) -> Self {
        ExportConfig {
            root: root.into(),
            writer_id: writer_id.into(),
            lateness_grace: Duration::from_secs(600),
            row_group_rows: NonZeroUsize::new(16 * 1024).expect("non-zero"),
            max_open_partitions: NonZeroUsize::new(3).expect("non-zero"),
            max_file_rows: 4 * 1024 * 1024,
            max_file_bytes: 256 * 1024 * 1024,
            sample_every: NonZeroU32::MIN,
            fsync: true,
        }
    }

    fn validate(&self) -> Result<i64, ExportError> {
        if !layout::valid_writer_id(&self.writer_id) {
            return Err(ExportError::config(
                "writer_id",
                format!(
                    "{:?} must be 1-64 ASCII letters, digits, '_' or '-'",
                    self.writer_id
                ),
            ));
        }
        if self.max_file_rows == 0 || self.max_file_bytes == 0 {
            return Err(ExportError::config(
                "max_file_rows / max_file_bytes",
                "a file cap must be positive",
            ));
        }
        i64::try_from(self.lateness_grace.as_millis())
            .ok()
            .filter(|g| *g <= 24 * HOUR_MS)
            .ok_or_else(|| ExportError::config("lateness_grace", "must be at most 24 h"))
    }
}

/// Counters of one writer since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Rows pushed.
    pub rows_in: u64,
    /// Rows skipped by `sample_every`.
    pub rows_sampled_out: u64,
    /// Rows in finished files.
    pub rows_written: u64,
    /// Rows that arrived after their hour's grace (written to a new file).
    pub late_rows: u64,
    /// Files finished (renamed to `.parquet`).
    pub files_finished: u64,
    /// Row groups written.
    pub row_groups: u64,
    /// `.tmp` files of this writer id removed on start.
    pub leftovers_removed: u64,
}

/// One open partition file.
struct OpenFile<R> {
    hour: i64,
    tmp: PathBuf,
    path: PathBuf,
    writer: ArrowWriter<File>,
    buf: Vec<R>,
    /// Rows already in row groups.
    rows: u64,
}

/// Writes rows of one table into hourly partitions; see the module docs.
pub struct PartitionedWriter<T: ExportTable> {
    table: T,
    schema: SchemaRef,
    props: WriterProperties,
    cfg: ExportConfig,
    dir: PathBuf,
    grace_ms: i64,
    open: Vec<OpenFile<T::Row>>,
    next_seq: u64,
    /// Highest event time pushed.
    watermark: i64,
    /// The earliest close time of an open partition that is still ahead of
    /// the watermark: the sweep runs only when the watermark passes it.
    next_deadline: i64,
    /// Rows seen per GPU, for `sample_every` (empty when it is 1).
    seen: HashMap<Box<str>, u32>,
    stats: ExportStats,
}

impl<T: ExportTable> PartitionedWriter<T> {
    /// Creates `<root>/<table>` if needed, removes this writer id's leftover
    /// `.tmp` files and continues its sequence numbers.
    pub fn new(table: T, cfg: ExportConfig) -> Result<Self, ExportError> {
        let grace_ms = cfg.validate()?;
        let dir = cfg.root.join(table.name());
        let root_err = |source| ExportError::Root {
            path: dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(root_err)?;
        let mut stats = ExportStats::default();
        let mut next_seq = 0;
        for (_, part) in layout::partitions(&dir).map_err(root_err)? {
            let entries = std::fs::read_dir(&part).map_err(|e| ExportError::io(&part, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| ExportError::io(&part, e))?;
                let name = entry.file_name();
                let Some((seq, id, done)) = name.to_str().and_then(layout::parse_file_name) else {
                    continue;
                };
                if id != cfg.writer_id {
                    continue;
                }
                next_seq = next_seq.max(seq + 1);
                if !done {
                    let path = entry.path();
                    std::fs::remove_file(&path).map_err(|e| ExportError::io(&path, e))?;
                    stats.leftovers_removed += 1;
                }
            }
        }
        Ok(PartitionedWriter {
            schema: table.schema(),
            props: table.properties(),
            table,
            dir,
            grace_ms,
            open: Vec::with_capacity(cfg.max_open_partitions.get()),
            cfg,
            next_seq,
            watermark: i64::MIN,
            next_deadline: i64::MAX,
            seen: HashMap::new(),
            stats,
        })
    }

    /// The table's directory, `<root>/<table>`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn table(&self) -> &T {
        &self.table
    }

    pub fn stats(&self) -> &ExportStats {
        &self.stats
    }

    /// Partitions with a file open.
    pub fn open_partitions(&self) -> usize {
        self.open.len()
    }

    /// Appends one row (cloned if kept). May write a row group or finish
    /// files; an error names the file and leaves the writer usable.
    pub fn push(&mut self, row: &T::Row) -> Result<(), ExportError> {
        self.stats.rows_in += 1;
        if !self.keep(row) {
            self.stats.rows_sampled_out += 1;
            return Ok(());
        }
        let ts = T::event_ms(row);
        if ts > self.watermark {
            self.watermark = ts;
            if ts >= self.next_deadline {
                self.finish_expired()?;
            }
        }
        let hour = layout::hour_of(ts);
        if self.deadline(hour) <= self.watermark {
            self.stats.late_rows += 1;
        }
        let idx = match self.open.iter().position(|f| f.hour == hour) {
            Some(i) => i,
            None => self.open_partition(hour)?,
        };
        let f = &mut self.open[idx];
        f.buf.push(row.clone());
        if f.buf.len() >= self.cfg.row_group_rows.get()
            || f.rows + f.buf.len() as u64 >= self.cfg.max_file_rows
        {
            self.write_group(idx)?;
        }
        Ok(())
    }

    /// [`push`](Self::push) for each row.
    pub fn push_all(&mut self, rows: &[T::Row]) -> Result<(), ExportError> {
        rows.iter().try_for_each(|r| self.push(r))
    }

    /// Finishes every open file: all rows pushed so far become readable.
    /// Tries every file; returns the first error.
    pub fn flush_all(&mut self) -> Result<(), ExportError> {
        let mut first = Ok(());
        while let Some(f) = self.open.pop() {
            let r = self.finish(f);
            if first.is_ok() {
                first = r;
            }
        }
        self.next_deadline = i64::MAX;
        first
    }

    /// Finishes every open file and returns the counters. Prefer this to
    /// drop, which has to swallow errors.
    pub fn close(mut self) -> Result<ExportStats, ExportError> {
        self.flush_all()?;
        Ok(self.stats.clone())
    }

    /// Event time at which `hour`'s partition is finished.
    fn deadline(&self, hour: i64) -> i64 {
        (hour + 1)
            .saturating_mul(HOUR_MS)
            .saturating_add(self.grace_ms)
    }

    fn keep(&mut self, row: &T::Row) -> bool {
        let n = self.cfg.sample_every.get();
        if n == 1 {
            return true;
        }
        let Some(gpu) = T::gpu(row) else {
            return true;
        };
        match self.seen.get_mut(gpu) {
            Some(c) => {
                *c = (*c + 1) % n;
                *c == 0
            }
            None => {
                self.seen.insert(gpu.into(), 0);
                true
            }
        }
    }

    /// Finishes the partitions whose grace has passed.
    fn finish_expired(&mut self) -> Result<(), ExportError> {
        let mut first = Ok(());
        let mut i = 0;
        while i < self.open.len() {
            if self.deadline(self.open[i].hour) <= self.watermark {
                let f = self.open.swap_remove(i);
                let r = self.finish(f);
                if first.is_ok() {
                    first = r;
                }
            } else {
                i += 1;
            }
        }
        self.next_deadline = self
            .open
            .iter()
            .map(|f| self.deadline(f.hour))
            .min()
            .unwrap_or(i64::MAX);
        first
    }

    /// Opens a file for `hour`, finishing the oldest hour first if too many
    /// are open. Returns its index.
    fn open_partition(&mut self, hour: i64) -> Result<usize, ExportError> {
        if self.open.len() >= self.cfg.max_open_partitions.get() {
            let oldest = self
                .open
                .iter()
                .enumerate()
                .min_by_key(|(_, f)| f.hour)
                .map(|(i, _)| i)
                .expect("at least one partition is open");
            let f = self.open.swap_remove(oldest);
            self.finish(f)?;
        }
        let dir = self.dir.join(layout::partition_dir(hour));
        std::fs::create_dir_all(&dir).map_err(|e| ExportError::io(&dir, e))?;
        let path = dir.join(layout::file_name(self.next_seq, &self.cfg.writer_id));
        let tmp = path.with_extension(&TMP_SUFFIX[1..]);
        let file = File::create(&tmp).map_err(|e| ExportError::io(&tmp, e))?;
        self.next_seq += 1;
        let writer = ArrowWriter::try_new(file, self.schema.clone(), Some(self.props.clone()))
            .map_err(|e| ExportError::parquet(&tmp, e))?;
        let deadline = self.deadline(hour);
        if deadline > self.watermark {
            self.next_deadline = self.next_deadline.min(deadline);
        }
        self.open.push(OpenFile {
            hour,
            tmp,
            path,
            writer,
            buf: Vec::with_capacity(self.cfg.row_group_rows.get().min(4096)),
            rows: 0,
        });
        Ok(self.open.len() - 1)
    }

    /// Writes the buffer of `open[idx]` as one row group; finishes the file
    /// if it reached a cap.
    fn write_group(&mut self, idx: usize) -> Result<(), ExportError> {
        let f = &mut self.open[idx];
        write_buffer(&self.table, f, &mut self.stats)?;
        if f.rows >= self.cfg.max_file_rows
            || f.writer.bytes_written() as u64 >= self.cfg.max_file_bytes
        {
            let f = self.open.swap_remove(idx);
            self.finish(f)?;
        }
        Ok(())
    }

    /// Writes what is buffered, the footer, syncs and renames. On error the
    /// `.tmp` file is removed (its rows are lost and the error says where).
    fn finish(&mut self, mut f: OpenFile<T::Row>) -> Result<(), ExportError> {
        let tmp = std::mem::take(&mut f.tmp);
        let path = std::mem::take(&mut f.path);
        let fsync = self.cfg.fsync;
        let result = write_buffer(&self.table, &mut f, &mut self.stats).and_then(|()| {
            let rows = f.rows;
            let file = f
                .writer
                .into_inner()
                .map_err(|e| ExportError::parquet(&tmp, e))?;
            if fsync {
                file.sync_all().map_err(|e| ExportError::io(&tmp, e))?;
            }
            drop(file);
            std::fs::rename(&tmp, &path).map_err(|e| ExportError::io(&path, e))?;
            Ok(rows)
        });
        match result {
            Ok(rows) => {
                self.stats.files_finished += 1;
                self.stats.rows_written += rows;
                Ok(())
            }
            Err(e) => {
                // Best effort: a footer-less file must not linger.
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        }
    }
}

/// The buffer of `f` → one row group.
fn write_buffer<T: ExportTable>(
    table: &T,
    f: &mut OpenFile<T::Row>,
    stats: &mut ExportStats,
) -> Result<(), ExportError> {
    if f.buf.is_empty() {
        return Ok(());
    }
    let batch = table.to_batch(&f.buf)?;
    f.writer
        .write(&batch)
        .and_then(|()| f.writer.flush())
        .map_err(|e| ExportError::parquet(&f.tmp, e))?;
    f.rows += f.buf.len() as u64;
    f.buf.clear();
    stats.row_groups += 1;
    Ok(())
}

impl<T: ExportTable> Drop for PartitionedWriter<T> {
    /// Finishes open files; errors are lost here, so call
    /// [`PartitionedWriter::close`] where they matter.
    fn drop(&mut self) {
        let _ = self.flush_all();
    }
}
