//! The directory backend of the partition checkpoint store: a local or
//! shared directory (NFS and the like), each partition's files in
//! `partitions/<topic>-<partition>/`. Files are written by
//! [`crate::checkpoint::write_atomic`] (`.tmp`, fsync, rename, directory
//! fsync); one writer per partition through an OS lock on the file
//! `.forewarn-partition.lock` in its directory ([`alerts::DirLock`]),
//! released on drop or by the kernel when the process dies.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::checkpoint::files::{PartitionKey, file_name, partition_dir, seq_of};

/// The lock file in each partition directory.
const PARTITION_LOCK: &str = ".forewarn-partition.lock";

#[derive(Debug)]
pub struct DirBackend {
    root: PathBuf,
}

impl DirBackend {
    /// Opens (creating `root/partitions`) the directory store at `root`.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        let dir = root.join("partitions");
        fs::create_dir_all(&dir)
            .with_context(|| format!("creating the partition store {}", dir.display()))?;
        Ok(DirBackend {
            root: root.to_owned(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn dir_of(&self, key: &PartitionKey) -> PathBuf {
        self.root.join("partitions").join(partition_dir(key))
    }

    pub fn list(&self, key: &PartitionKey) -> anyhow::Result<Vec<u64>> {
        let dir = self.dir_of(key);
        let mut v = Vec::new();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(v),
            Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
        };
        for entry in entries {
            if let Some(seq) = seq_of(&entry?.path()) {
                v.push(seq);
            }
        }
        Ok(v)
    }

    pub fn read(&self, key: &PartitionKey, seq: u64) -> anyhow::Result<Vec<u8>> {
        let path = self.dir_of(key).join(file_name(seq));
        fs::read(&path).with_context(|| format!("reading {}", path.display()))
    }

    pub fn write(&self, key: &PartitionKey, seq: u64, bytes: &[u8]) -> anyhow::Result<()> {
        let dir = self.dir_of(key);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        crate::checkpoint::files::write_atomic(&dir, seq, bytes)
    }

    pub fn remove(&self, key: &PartitionKey, seq: u64) {
        let _ = fs::remove_file(self.dir_of(key).join(file_name(seq)));
    }

    /// Takes `key`'s lock (creating its directory) and sweeps `.tmp` files
    /// left by a writer that died. Fails while another process holds it.
    pub fn claim(&self, key: &PartitionKey) -> anyhow::Result<alerts::DirLock> {
        let dir = self.dir_of(key);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let lock = alerts::DirLock::acquire(&dir, PARTITION_LOCK, "partition checkpoint")?;
        for entry in fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                let _ = fs::remove_file(&path);
            }
        }
        Ok(lock)
    }
}
