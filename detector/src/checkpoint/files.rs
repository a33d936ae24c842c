//! The checkpoint files' leaf helpers: CBOR encoding, the wall clock, and
//! how a checkpoint file is named and written atomically.
//!
//! Part of the checkpoint store (`checkpoint/`): the single-file store, the
//! partition store and its backends all use these, and this module uses none
//! of them (no import cycle between the store's modules).

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

/// Checkpoint files kept.
pub const KEEP: usize = 3;

/// `value` as CBOR; `what` names it in the error.
pub fn to_cbor<T: Serialize>(value: &T, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(1 << 16);
    ciborium::into_writer(value, &mut out)
        .map_err(|e| anyhow::anyhow!("serializing {what}: {e}"))?;
    Ok(out)
}

/// A value from [`to_cbor`] bytes; `what` names it in the error.
pub fn from_cbor<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> anyhow::Result<T> {
    ciborium::from_reader(bytes).map_err(|e| anyhow::anyhow!("decoding {what}: {e}"))
}

/// Wall-clock epoch ms.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A topic and partition.
pub type PartitionKey = (String, i32);

/// The file name of checkpoint `seq` (as [`write_atomic`] names it).
pub fn file_name(seq: u64) -> String {
    format!("checkpoint-{seq:010}.cbor")
}

/// The folder of `key`'s files under a partition store's root.
pub fn partition_dir(key: &PartitionKey) -> String {
    format!("{}-{}", key.0, key.1)
}

/// The sequence number in a checkpoint file's name
/// (`checkpoint-<seq>.cbor`, as [`write_atomic`] names it).
pub(crate) fn seq_of(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?;
    name.strip_prefix("checkpoint-")?
        .strip_suffix(".cbor")?
        .parse()
        .ok()
}

/// Writes `bytes` as `dir/checkpoint-<seq>.cbor` so that a reader sees
/// the whole file or none: a `.tmp` file, fsynced, renamed, then the
/// directory fsynced.
pub(crate) fn write_atomic(dir: &Path, seq: u64, bytes: &[u8]) -> anyhow::Result<()> {
    let path = dir.join(file_name(seq));
    let tmp = path.with_extension("cbor.tmp");
    {
        let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)
            .and_then(|()| f.sync_all())
            .with_context(|| format!("writing {}", tmp.display()))?;
    }
    fs::rename(&tmp, &path).with_context(|| format!("renaming {}", tmp.display()))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}
