//! Checkpoints: one file holding all pipeline state (every shard's
//! features, forests and thresholders; the alert stage and engine; the
//! router's aggregation groups) and the source offsets that state reflects.
//!
//! Written by the alert thread when a barrier has passed every shard
//! ([`crate::pipeline`]), as `checkpoint-<seq>.cbor.tmp`, fsynced, renamed
//! to `checkpoint-<seq>.cbor`, then the directory fsynced: a reader sees a
//! whole checkpoint or none. Each file carries a checksum of its payload
//! ([`format`]). The newest [`KEEP`] are kept, so that restore
//! (`commands::serve::restore`) can fall back, newest to oldest, past a
//! checkpoint that is damaged in any part. Offsets are committed to Kafka
//! only after the file is durable, so a crash at any point resumes from a
//! state that reflects exactly the offsets it names (at-least-once; the
//! alert outbox's ledger drops the replayed duplicates).
//!
//! One process per directory: the store holds a [`alerts::DirLock`] on it
//! while open.
//!
//! CBOR (ciborium) because the state holds NaN (missing values) and must
//! restore bit-identical floats.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

pub mod backend;
mod files;
mod format;
pub mod partitions;
mod record;
use files::seq_of;
pub(crate) use files::write_atomic;
pub use files::{KEEP, from_cbor, to_cbor, wall_ms};
pub use format::{VERSION, VERSION_NO_CHECKSUM};
#[cfg(test)]
pub(crate) use format::{encode, encode_v2};
pub use partitions::{PartitionCheckpoint, PartitionKey, PartitionStore};
pub use record::{Checkpoint, Offsets};

/// A directory of checkpoints.
#[derive(Debug)]
pub struct CheckpointStore {
    dir: PathBuf,
    next_seq: u64,
    /// Held while open: one process per checkpoint directory.
    _lock: alerts::DirLock,
}

impl CheckpointStore {
    /// Opens (creating) and locks `dir`; removes leftover `.tmp` files of
    /// a crash. Fails with [`alerts::LockError::Held`] while another
    /// process has it open.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        fs::create_dir_all(dir)
            .with_context(|| format!("creating checkpoint directory {}", dir.display()))?;
        // Before the .tmp sweep: they may be the holder's writes in progress.
        let lock = alerts::DirLock::acquire(dir, alerts::dirlock::CHECKPOINT_LOCK, "checkpoint")?;
        let mut store = CheckpointStore {
            dir: dir.to_owned(),
            next_seq: 1,
            _lock: lock,
        };
        for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                let _ = fs::remove_file(&path);
            }
        }
        if let Some(last) = store.list()?.last() {
            store.next_seq = last.0 + 1;
        }
        Ok(store)
    }

    /// (seq, path) of every checkpoint, oldest first.
    fn list(&self) -> anyhow::Result<Vec<(u64, PathBuf)>> {
        let mut v = Vec::new();
        for entry in
            fs::read_dir(&self.dir).with_context(|| format!("listing {}", self.dir.display()))?
        {
            let path = entry?.path();
            if let Some(seq) = seq_of(&path) {
                v.push((seq, path));
            }
        }
        v.sort();
        Ok(v)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// (seq, path) of every checkpoint file, newest first: the order
    /// restore tries them in.
    pub fn newest_first(&self) -> anyhow::Result<Vec<(u64, PathBuf)>> {
        let mut v = self.list()?;
        v.reverse();
        Ok(v)
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Writes `ckpt` atomically; returns its size in bytes.
    pub fn write(&mut self, ckpt: &Checkpoint) -> anyhow::Result<u64> {
        let bytes = format::encode(ckpt)?;
        write_atomic(&self.dir, ckpt.seq, &bytes)?;
        self.next_seq = ckpt.seq + 1;
        let all = self.list()?;
        if all.len() > KEEP {
            for (_, old) in &all[..all.len() - KEEP] {
                let _ = fs::remove_file(old);
            }
        }
        Ok(bytes.len() as u64)
    }

    /// The newest checkpoint whose file decodes, if any (restore goes
    /// further: it also falls back past one whose parts do not restore).
    pub fn latest(&self) -> anyhow::Result<Option<Checkpoint>> {
        for (seq, path) in self.newest_first()? {
            match read(&path) {
                Ok(c) => return Ok(Some(c)),
                Err(e) => tracing::warn!(seq, error = %e, "skipping an unreadable checkpoint"),
            }
        }
        Ok(None)
    }
}

/// The checkpoint in the file at `path`, its checksum verified; errors
/// name the file.
pub fn read(path: &Path) -> anyhow::Result<Checkpoint> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    format::decode(&bytes, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ckpt(seq: u64) -> Checkpoint {
        let mut offsets = Offsets::new();
        offsets.insert(("telemetry".into(), 3), 42);
        Checkpoint {
            seq,
            created_ms: 1,
            watermark_ms: 2,
            offsets,
            shards: vec![vec![1, 2, 3], vec![]],
            stage: vec![9],
            sink: vec![],
        }
    }

    #[test]
    fn writes_atomically_keeps_the_newest_and_skips_damaged_files() {
        let dir = std::env::temp_dir().join(format!("fw-ckpt-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut store = CheckpointStore::open(&dir).expect("open");
        for _ in 0..5 {
            let seq = store.next_seq();
            store.write(&ckpt(seq)).expect("write");
        }
        let names: Vec<_> = store
            .list()
            .expect("list")
            .into_iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(names, vec![3, 4, 5]);
        let c = store.latest().expect("latest").expect("some");
        assert_eq!(c.seq, 5);
        assert_eq!(c.offsets.get(&("telemetry".to_string(), 3)), Some(&42));
        // One process per directory; the holder's files are untouched.
        fs::write(dir.join("checkpoint-0000000007.cbor.tmp"), b"partial").expect("write");
        let e = CheckpointStore::open(&dir).expect_err("locked").to_string();
        assert!(
            e.contains("is locked by another forewarn process")
                && e.contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        assert!(dir.join("checkpoint-0000000007.cbor.tmp").exists());
        // Dropped (as the kernel does for a dead process): free again.
        drop(store);
        // A torn newest file falls back to the one before; tmp files vanish.
        fs::write(dir.join("checkpoint-0000000006.cbor"), b"\xa1garbage").expect("write");
        let store = CheckpointStore::open(&dir).expect("reopen");
        assert_eq!(
            store
                .newest_first()
                .expect("list")
                .iter()
                .map(|x| x.0)
                .collect::<Vec<_>>(),
            vec![6, 5, 4, 3]
        );
        assert_eq!(store.next_seq(), 7);
        assert_eq!(store.latest().expect("latest").expect("some").seq, 5);
        assert!(!dir.join("checkpoint-0000000007.cbor.tmp").exists());
        let _ = fs::remove_dir_all(&dir);
    }
}
