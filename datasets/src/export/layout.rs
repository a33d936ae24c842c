//! The on-disk layout of exports, shared by the writer and the reader:
//! `<root>/<table>/date=YYYY-MM-DD/hour=HH/part-<seq>-<writer>.parquet`,
//! partitioned by the rows' event time in UTC. A file being written ends in
//! `.parquet.tmp` and is renamed when finished, so a `.parquet` file is
//! always complete.

use std::path::{Path, PathBuf};

use features::time::{civil_from_days, days_from_civil};

/// Milliseconds per hour: the partition width.
pub const HOUR_MS: i64 = 3_600_000;
/// Suffix of finished files.
pub const FILE_SUFFIX: &str = ".parquet";
/// Suffix of files being written.
pub const TMP_SUFFIX: &str = ".parquet.tmp";

/// The hour (hours since the epoch, UTC) holding an event time.
pub fn hour_of(ts_ms: i64) -> i64 {
    ts_ms.div_euclid(HOUR_MS)
}

/// `date=YYYY-MM-DD/hour=HH` of an hour since the epoch.
pub fn partition_dir(hour: i64) -> PathBuf {
    let (y, m, d) = civil_from_days(hour.div_euclid(24));
    let h = hour.rem_euclid(24);
    PathBuf::from(format!("date={y:04}-{m:02}-{d:02}")).join(format!("hour={h:02}"))
}

/// The date directory name → days since the epoch.
pub(crate) fn parse_date_dir(name: &str) -> Option<i64> {
    let v = name.strip_prefix("date=")?;
    let b = v.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y: i64 = v[0..4].parse().ok()?;
    let m: u32 = v[5..7].parse().ok()?;
    let d: u32 = v[8..10].parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    days_from_civil(y, m, d)
}

/// The hour directory name → hour of the day.
pub(crate) fn parse_hour_dir(name: &str) -> Option<i64> {
    let v = name.strip_prefix("hour=")?;
    let h: i64 = (v.len() == 2).then(|| v.parse().ok())??;
    (0..24).contains(&h).then_some(h)
}

/// The file name of part `seq` by `writer` (finished form).
pub fn file_name(seq: u64, writer: &str) -> String {
    format!("part-{seq:08}-{writer}{FILE_SUFFIX}")
}

/// Whether `id` can be a writer id: non-empty ASCII letters, digits, `_`
/// and `-` (no `.`, so names parse back unambiguously).
pub fn valid_writer_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A part file's name → (sequence number, writer id, finished?).
pub(crate) fn parse_file_name(name: &str) -> Option<(u64, &str, bool)> {
    let (stem, done) = if let Some(s) = name.strip_suffix(TMP_SUFFIX) {
        (s, false)
    } else {
        (name.strip_suffix(FILE_SUFFIX)?, true)
    };
    let (seq, writer) = stem.strip_prefix("part-")?.split_once('-')?;
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) || !valid_writer_id(writer) {
        return None;
    }
    Some((seq.parse().ok()?, writer, done))
}

/// Every partition directory of a table, as (hour, path), in hour order.
pub(crate) fn partitions(table_dir: &Path) -> std::io::Result<Vec<(i64, PathBuf)>> {
    let mut out = Vec::new();
    for date in std::fs::read_dir(table_dir)? {
        let date = date?;
        let Some(day) = date.file_name().to_str().and_then(parse_date_dir) else {
            continue;
        };
        if !date.file_type()?.is_dir() {
            continue;
        }
        for hour in std::fs::read_dir(date.path())? {
            let hour = hour?;
            let Some(h) = hour.file_name().to_str().and_then(parse_hour_dir) else {
                continue;
            };
            if hour.file_type()?.is_dir() {
                out.push((day * 24 + h, hour.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dirs_round_trip() {
        // 2026-11-29T17:03:00Z
        let ts = 1_795_971_780_000;
        let hour = hour_of(ts);
        let dir = partition_dir(hour);
        assert_eq!(dir, Path::new("date=2026-11-29").join("hour=17"));
        let day = parse_date_dir("date=2026-11-29").expect("date");
        assert_eq!(day * 24 + parse_hour_dir("hour=17").expect("hour"), hour);
        assert_eq!(parse_hour_dir("hour=24"), None);
        assert_eq!(parse_date_dir("date=2026-13-01"), None);
        // Before the epoch still lands in the right hour.
        assert_eq!(
            partition_dir(hour_of(-1)),
            Path::new("date=1969-12-31").join("hour=23")
        );
    }

    #[test]
    fn file_names_parse_back() {
        let name = file_name(42, "shard-3");
        assert_eq!(name, "part-00000042-shard-3.parquet");
        assert_eq!(parse_file_name(&name), Some((42, "shard-3", true)));
        assert_eq!(
            parse_file_name("part-00000042-shard-3.parquet.tmp"),
            Some((42, "shard-3", false))
        );
        assert_eq!(parse_file_name("part-x-a.parquet"), None);
        assert_eq!(parse_file_name("other.parquet"), None);
        assert!(!valid_writer_id("a.b"));
        assert!(!valid_writer_id(""));
    }
}
