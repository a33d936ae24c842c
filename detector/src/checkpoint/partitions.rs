//! The partition checkpoint store: where a Kafka partition's state unit
//! (the shard that owns that partition's GPUs, see
//! `crate::pipeline::units`) is written at every checkpoint and read back
//! by whichever instance is assigned the partition next (docs/scaling.md).
//!
//! Layout under the store's root (a local or shared directory, or an
//! S3-compatible bucket and prefix: [`super::backend`]):
//! `partitions/<topic>-<partition>/checkpoint-<seq>.cbor`, each file one
//! [`PartitionCheckpoint`]: the unit's shard snapshot and the next offset
//! of the partition that state reflects. Files are written whole or not at
//! all (a directory: `.tmp`, fsync, rename, directory fsync; a bucket: one
//! PUT), carry a CRC-32 of their payload, and the newest [`super::KEEP`]
//! are kept so a reader falls back, newest first, past a damaged one.
//!
//! One writer per partition: an instance holds the partition from the
//! moment it claims it until it releases it after the revoke checkpoint: a
//! directory's OS lock ([`alerts::DirLock`], released on drop or by the
//! kernel when the process dies), or a bucket's lease object
//! ([`super::backend::lease`], renewed before each write, taken over once
//! it expires). A write for a partition another instance holds is refused.
//!
//! The store is named by a URL ([`StoreUrl`]): `file:///abs/dir`, a plain
//! path, or `s3://bucket/prefix`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::backend::lease::{self, Writer};
use super::backend::{Backend, Hold};
pub use super::backend::{PartitionKey, StoreUrl};
use super::files::KEEP;
use super::format::{ByteBuf, Bytes, Envelope};

/// Format version of a partition checkpoint file.
pub const PARTITION_VERSION: u32 = 1;

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

/// Where the store lives, from its URL: `file:///dir`, `file://dir`, a
/// plain path, or `s3://bucket/prefix`.
pub fn store_url(url: &str) -> anyhow::Result<StoreUrl> {
    StoreUrl::parse(url)
}

/// How long a partition's lease on an object store lasts without renewal,
/// for checkpoints every `every`: it is renewed at each one, so several
/// may fail or come late before another instance takes the partition over
/// (and at least two minutes, well past clock skew between instances).
pub fn lease_ttl(every: Duration) -> Duration {
    (every * 4).max(lease::DEFAULT_TTL)
}

/// The partition checkpoints of every partition under one root.
#[derive(Debug)]
pub struct PartitionStore {
    backend: Backend,
    /// Who writes here (see [`PartitionCheckpoint::writer`]).
    writer: Writer,
    /// Partitions this instance holds, each with its lock or lease.
    claimed: HashMap<PartitionKey, Hold>,
}

impl PartitionStore {
    /// Opens (creating) the directory store at `root`.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        Self::open_url(&StoreUrl::Dir(root.to_owned()))
    }

    /// Opens the store at `url` (a directory is created; a bucket must
    /// exist).
    pub fn open_url(url: &StoreUrl) -> anyhow::Result<Self> {
        Ok(Self::with_backend(Backend::open(url)?))
    }

    /// A store over `backend`.
    pub fn with_backend(backend: Backend) -> Self {
        PartitionStore {
            backend,
            writer: Writer::new(String::new()),
            claimed: HashMap::new(),
        }
    }

    /// Names the instance writing through this store: stable across its
    /// restarts, distinct between instances (see [`instance_id`]).
    pub fn with_writer(mut self, writer: String) -> Self {
        self.writer.name = writer;
        self
    }

    /// How long this store's leases last without renewal (object stores
    /// only; see [`lease_ttl`]).
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.writer.ttl = ttl;
        self
    }

    pub fn writer(&self) -> &str {
        &self.writer.name
    }

    /// The store's root: a directory, or the bucket's URL.
    pub fn root(&self) -> String {
        self.backend.root()
    }

    /// Where `key`'s checkpoints are: their directory, or (object store)
    /// the URL of their key prefix.
    pub fn dir_of(&self, key: &PartitionKey) -> PathBuf {
        self.backend.dir_of(key)
    }

    /// Holds `key` for this instance (a directory store also sweeps `.tmp`
    /// files left by a writer that died). Fails while another instance
    /// holds it.
    pub fn claim(&mut self, key: &PartitionKey) -> anyhow::Result<()> {
        if self.claimed.contains_key(key) {
            return Ok(());
        }
        let hold = self.backend.claim(key, &self.writer)?;
        self.claimed.insert(key.clone(), hold);
        Ok(())
    }

    /// Gives `key` up (after its last checkpoint): another instance may
    /// claim it now.
    pub fn release(&mut self, key: &PartitionKey) {
        if let Some(hold) = self.claimed.remove(key) {
            self.backend.release(key, hold);
        }
    }

    /// Whether this store holds `key`.
    pub fn owns(&self, key: &PartitionKey) -> bool {
        self.claimed.contains_key(key)
    }

    /// Partitions claimed, sorted.
    pub fn owned(&self) -> Vec<PartitionKey> {
        let mut v: Vec<_> = self.claimed.keys().cloned().collect();
        v.sort();
        v
    }

    /// (seq, full name: path or URL) of `key`'s checkpoint files, newest
    /// first.
    pub fn newest_first(&self, key: &PartitionKey) -> anyhow::Result<Vec<(u64, String)>> {
        let mut seqs = self.backend.list(key)?;
        seqs.sort_unstable_by(|a, b| b.cmp(a));
        Ok(seqs
            .into_iter()
            .map(|s| (s, self.backend.name_of(key, s)))
            .collect())
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
        for (seq, name) in self.newest_first(key)? {
            let got = self
                .backend
                .read(key, seq)
                .and_then(|b| decode(&b, Path::new(&name)))
                .and_then(|c| {
                    if skip(&c) {
                        return Ok(None);
                    }
                    anyhow::ensure!(
                        c.topic == key.0 && c.partition == key.1,
                        "{name} holds partition {}-{}, not {}-{}",
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
                    file = %name,
                    "partition checkpoint newer than this instance's restored checkpoint: taking the one before"
                ),
                Err(e) => tracing::error!(
                    seq,
                    file = %name,
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
            .backend
            .list(key)?
            .into_iter()
            .max()
            .map_or(1, |s| s + 1))
    }

    /// Writes `c` whole or not at all (claiming its partition first if
    /// this store has not); returns its size in bytes. Refused while
    /// another instance holds the partition, or once it has taken this
    /// store's lease over.
    pub fn write(&mut self, c: &PartitionCheckpoint) -> anyhow::Result<u64> {
        let key = (c.topic.clone(), c.partition);
        self.claim(&key)?;
        if let Some(hold) = self.claimed.get_mut(&key)
            && let Err(e) = self.backend.confirm(&key, hold)
        {
            self.claimed.remove(&key);
            return Err(e);
        }
        let bytes = encode(c)?;
        self.backend.write(&key, c.seq, &bytes)?;
        let mut all = self.backend.list(&key)?;
        all.sort_unstable_by(|a, b| b.cmp(a));
        for &old in all.iter().skip(KEEP) {
            self.backend.remove(&key, old);
        }
        Ok(bytes.len() as u64)
    }
}

impl Drop for PartitionStore {
    /// Lets go of every partition still held: a directory's locks go with
    /// their files anyway; a bucket's leases would otherwise stay until
    /// they expire.
    fn drop(&mut self) {
        for key in self.owned() {
            self.release(&key);
        }
    }
}

#[cfg(test)]
#[path = "partitions_tests.rs"]
pub(crate) mod tests;
