//! The partition checkpoint store: where a Kafka partition's state unit
//! (the shard that owns that partition's GPUs, see
//! `crate::pipeline::units`) is written at every checkpoint and read back
//! by whichever instance is assigned the partition next (docs/scaling.md).
//!
//! Layout under the store's root (a local or shared directory):
//! `partitions/<topic>-<partition>/checkpoint-<seq>.cbor`, each file one
//! [`PartitionCheckpoint`]: the unit's shard snapshot and the next offset
//! of the partition that state reflects. Files are written as `.tmp`,
//! fsynced, renamed and the directory fsynced (whole or absent), carry a
//! CRC-32 of their payload, and the newest [`super::KEEP`] are kept so a
//! reader falls back, newest first, past a damaged one.
//!
//! One writer per partition: an instance holds the partition directory's
//! lock ([`alerts::DirLock`], released on drop or by the kernel when the
//! process dies) from the moment it claims the partition until it releases
//! it after the revoke checkpoint. A write for a partition whose lock
//! another instance holds is refused.
//!
//! The store is named by a URL: `file:///abs/dir` or a plain path. Object
//! stores (`s3://`) are not implemented yet and are refused by name.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::format::{ByteBuf, Bytes, Envelope};
use super::{KEEP, seq_of};

/// A topic and partition.
pub type PartitionKey = (String, i32);

/// Format version of a partition checkpoint file.
pub const PARTITION_VERSION: u32 = 1;

/// The lock file in each partition directory.
const PARTITION_LOCK: &str = ".forewarn-partition.lock";

/// One partition's state unit at a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionCheckpoint {
    pub topic: String,
    pub partition: i32,
    pub seq: u64,
    /// Wall time it was taken.
    pub created_ms: i64,
    /// Next offset of the partition: the state holds everything before it.
    pub offset: i64,
    /// GPUs in the unit (for logs; the shard snapshot is the truth).
    pub gpus: u64,
    /// The instance that wrote it ([`PartitionStore::writer`]) and the
    /// sequence number of its instance checkpoint taken at the same
    /// barrier: a restart of that instance that restored an older
    /// instance checkpoint (the newer one damaged or never written) goes
    /// back to the partition files of that barrier, so alert stage and
    /// units agree.
    #[serde(default)]
    pub writer: String,
    #[serde(default)]
    pub instance_seq: u64,
    /// The unit's `crate::pipeline::shard::Shard` snapshot.
    #[serde(with = "bytes")]
    pub shard: Vec<u8>,
}

mod bytes {
    use super::{ByteBuf, Bytes};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        Bytes(b).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        ByteBuf::deserialize(d).map(|b| b.0)
    }
}

/// The file's bytes for `c`.
pub fn encode(c: &PartitionCheckpoint) -> anyhow::Result<Vec<u8>> {
    let what = format!("partition {}-{} checkpoint {}", c.topic, c.partition, c.seq);
    super::format::seal(c, PARTITION_VERSION, &what)
}

/// The partition checkpoint in `bytes`, read from `path` (named in errors).
pub fn decode(bytes: &[u8], path: &Path) -> anyhow::Result<PartitionCheckpoint> {
    let name = path.display();
    let env: Envelope = ciborium::from_reader(bytes)
        .map_err(|e| anyhow::anyhow!("decoding {name}: not a partition checkpoint ({e})"))?;
    anyhow::ensure!(
        env.version == PARTITION_VERSION,
        "{name} has partition checkpoint format {}, this build reads {PARTITION_VERSION}",
        env.version
    );
    env.open(&name.to_string())
}

/// This instance's name as a writer: its host and its checkpoint
/// directory (an instance has its own, locked), stable across restarts.
pub fn instance_id(checkpoint_dir: &Path) -> String {
    let host = fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let dir = fs::canonicalize(checkpoint_dir).unwrap_or_else(|_| checkpoint_dir.to_owned());
    format!("{}:{}", host.trim(), dir.display())
}

/// Where the store lives, from its URL: `file:///dir`, `file://dir` or a
/// plain path.
pub fn store_root(url: &str) -> anyhow::Result<PathBuf> {
    if let Some(rest) = url.strip_prefix("file://") {
        anyhow::ensure!(
            !rest.is_empty(),
            "checkpoint store {url:?} names no directory"
        );
        return Ok(PathBuf::from(rest));
    }
    if let Some((scheme, _)) = url.split_once("://") {
        anyhow::bail!(
            "checkpoint store {url:?}: the {scheme}:// store is not implemented yet; use a local or shared directory (file:///path)"
        );
    }
    anyhow::ensure!(!url.is_empty(), "the checkpoint store URL is empty");
    Ok(PathBuf::from(url))
}

/// The partition checkpoints of every partition under one root.
#[derive(Debug)]
pub struct PartitionStore {
    root: PathBuf,
    /// Who writes here (see [`PartitionCheckpoint::writer`]).
    writer: String,
    /// Partitions this instance owns, each with its directory's lock.
    claimed: HashMap<PartitionKey, alerts::DirLock>,
}

impl PartitionStore {
    /// Opens (creating) the store at `root`.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        let dir = root.join("partitions");
        fs::create_dir_all(&dir)
            .with_context(|| format!("creating the partition store {}", dir.display()))?;
        Ok(PartitionStore {
            root: root.to_owned(),
            writer: String::new(),
            claimed: HashMap::new(),
        })
    }

    /// Names the instance writing through this store: stable across its
    /// restarts, distinct between instances (see [`instance_id`]).
    pub fn with_writer(mut self, writer: String) -> Self {
        self.writer = writer;
        self
    }

    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// The store's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of `key`'s checkpoints.
    pub fn dir_of(&self, key: &PartitionKey) -> PathBuf {
        self.root
            .join("partitions")
            .join(format!("{}-{}", key.0, key.1))
    }

    /// Takes `key`'s lock (creating its directory) and sweeps `.tmp` files
    /// left by a writer that died. Fails while another instance holds it.
    pub fn claim(&mut self, key: &PartitionKey) -> anyhow::Result<()> {
        if self.claimed.contains_key(key) {
            return Ok(());
        }
        let dir = self.dir_of(key);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let lock = alerts::DirLock::acquire(&dir, PARTITION_LOCK, "partition checkpoint")?;
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                let _ = fs::remove_file(&path);
            }
        }
        self.claimed.insert(key.clone(), lock);
        Ok(())
    }

    /// Gives `key` up (after its last checkpoint): another instance may
    /// claim it now.
    pub fn release(&mut self, key: &PartitionKey) {
        self.claimed.remove(key);
    }

    /// Whether this store holds `key`'s lock.
    pub fn owns(&self, key: &PartitionKey) -> bool {
        self.claimed.contains_key(key)
    }

    /// Partitions claimed, sorted.
    pub fn owned(&self) -> Vec<PartitionKey> {
        let mut v: Vec<_> = self.claimed.keys().cloned().collect();
        v.sort();
        v
    }

    /// (seq, path) of `key`'s checkpoint files, newest first.
    pub fn newest_first(&self, key: &PartitionKey) -> anyhow::Result<Vec<(u64, PathBuf)>> {
        let dir = self.dir_of(key);
        let mut v = Vec::new();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
            Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
        };
        for entry in entries {
            let path = entry?.path();
            if let Some(seq) = seq_of(&path) {
                v.push((seq, path));
            }
        }
        v.sort();
        v.reverse();
        Ok(v)
    }

    /// The newest checkpoint of `key` that decodes and passes `check` (the
    /// caller restores its shard there), falling back past damaged ones;
    /// `None` when there is none.
    pub fn latest_with<T>(
        &self,
        key: &PartitionKey,
        check: impl FnMut(&PartitionCheckpoint) -> anyhow::Result<T>,
    ) -> anyhow::Result<Option<(PartitionCheckpoint, T)>> {
        self.latest_where(key, |_| false, check)
    }

    /// As [`Self::latest_with`], passing over (without an error) the files
    /// `skip` says to.
    pub fn latest_where<T>(
        &self,
        key: &PartitionKey,
        skip: impl Fn(&PartitionCheckpoint) -> bool,
        mut check: impl FnMut(&PartitionCheckpoint) -> anyhow::Result<T>,
    ) -> anyhow::Result<Option<(PartitionCheckpoint, T)>> {
        for (seq, path) in self.newest_first(key)? {
            let got = fs::read(&path)
                .with_context(|| format!("reading {}", path.display()))
                .and_then(|b| decode(&b, &path))
                .and_then(|c| {
                    if skip(&c) {
                        return Ok(None);
                    }
                    anyhow::ensure!(
                        c.topic == key.0 && c.partition == key.1,
                        "{} holds partition {}-{}, not {}-{}",
                        path.display(),
                        c.topic,
                        c.partition,
                        key.0,
                        key.1
                    );
                    let t = check(&c)?;
                    Ok(Some((c, t)))
                });
            match got {
                Ok(Some(x)) => return Ok(Some(x)),
                Ok(None) => tracing::info!(
                    seq,
                    file = %path.display(),
                    "partition checkpoint newer than this instance's restored checkpoint: taking the one before"
                ),
                Err(e) => tracing::error!(
                    seq,
                    file = %path.display(),
                    error = format!("{e:#}"),
                    "partition checkpoint does not restore: trying the one before"
                ),
            }
        }
        Ok(None)
    }

    /// The newest checkpoint of `key` that decodes, if any.
    pub fn latest(&self, key: &PartitionKey) -> anyhow::Result<Option<PartitionCheckpoint>> {
        Ok(self.latest_with(key, |_| Ok(()))?.map(|(c, ())| c))
    }

    /// The sequence number the next checkpoint of `key` gets.
    pub fn next_seq(&self, key: &PartitionKey) -> anyhow::Result<u64> {
        Ok(self
            .newest_first(key)?
            .first()
            .map_or(1, |(seq, _)| seq + 1))
    }

    /// Writes `c` atomically (claiming its partition first if this store
    /// has not); returns its size in bytes. Refused while another instance
    /// holds the partition.
    pub fn write(&mut self, c: &PartitionCheckpoint) -> anyhow::Result<u64> {
        let key = (c.topic.clone(), c.partition);
        self.claim(&key)?;
        let dir = self.dir_of(&key);
        let bytes = encode(c)?;
        super::write_atomic(&dir, c.seq, &bytes)?;
        let all = self.newest_first(&key)?;
        for (_, old) in all.iter().skip(KEEP) {
            let _ = fs::remove_file(old);
        }
        Ok(bytes.len() as u64)
    }
}

#[cfg(test)]
#[path = "partitions_tests.rs"]
mod tests;
