//! Where the partition checkpoint store ([`super::PartitionStore`]) keeps
//! its files: a local or shared directory ([`dir`]) or an S3-compatible
//! bucket ([`object`]). The store decides what to write and read (names,
//! sequence numbers, keeping the newest [`super::KEEP`], falling back past
//! damage); a backend only lists, reads, writes and removes one
//! partition's checkpoint files and holds the partition for one writer.
//!
//! Both lay out the same names under their root:
//! `partitions/<topic>-<partition>/checkpoint-<seq>.cbor`.

use std::fmt;
use std::path::PathBuf;

pub use super::files::PartitionKey;
use super::files::file_name;

mod blocking;
pub mod dir;
pub mod lease;
pub mod object;

#[cfg(test)]
mod tests;

/// A checkpoint store's location, from `checkpoint.store`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A local or shared directory: `file:///dir` or a plain path.
    Dir(PathBuf),
    /// An S3-compatible bucket: `s3://bucket/prefix` (the prefix may be
    /// empty). Endpoint, region and credentials come from the standard
    /// `AWS_*` environment variables.
    S3 { bucket: String, prefix: String },
}

impl StoreUrl {
    /// Parses `file:///dir`, `file://dir`, a plain path, or
    /// `s3://bucket[/prefix]`.
    pub fn parse(url: &str) -> anyhow::Result<Self> {
        anyhow::ensure!(!url.is_empty(), "the checkpoint store URL is empty");
        if let Some(rest) = url.strip_prefix("file://") {
            anyhow::ensure!(
                !rest.is_empty(),
                "checkpoint store {url:?} names no directory"
            );
            return Ok(StoreUrl::Dir(PathBuf::from(rest)));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            anyhow::ensure!(
                !bucket.is_empty(),
                "checkpoint store {url:?} names no bucket (s3://bucket/prefix)"
            );
            let prefix = prefix.trim_matches('/');
            anyhow::ensure!(
                object_store::path::Path::parse(prefix).is_ok(),
                "checkpoint store {url:?}: {prefix:?} is not a valid object key prefix"
            );
            return Ok(StoreUrl::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.to_owned(),
            });
        }
        if let Some((scheme, _)) = url.split_once("://") {
            anyhow::bail!(
                "checkpoint store {url:?}: the {scheme}:// store is not implemented; use a local or shared directory (file:///path) or an S3-compatible bucket (s3://bucket/prefix)"
            );
        }
        Ok(StoreUrl::Dir(PathBuf::from(url)))
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Dir(d) => write!(f, "{}", d.display()),
            StoreUrl::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            StoreUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

/// One of the two backends.
#[derive(Debug)]
pub enum Backend {
    Dir(dir::DirBackend),
    Object(object::ObjectBackend),
}

/// A partition held for writing: the directory's OS lock, or the lease
/// object this store wrote.
#[derive(Debug)]
pub enum Hold {
    Lock(alerts::DirLock),
    Lease(lease::Held),
}

impl Backend {
    /// Opens the backend at `url`.
    pub fn open(url: &StoreUrl) -> anyhow::Result<Self> {
        Ok(match url {
            StoreUrl::Dir(d) => Backend::Dir(dir::DirBackend::open(d)?),
            StoreUrl::S3 { bucket, prefix } => {
                Backend::Object(object::ObjectBackend::s3(bucket, prefix)?)
            }
        })
    }

    /// The root, as a path or URL (for logs and errors).
    pub fn root(&self) -> String {
        match self {
            Backend::Dir(d) => d.root().display().to_string(),
            Backend::Object(o) => o.url().to_owned(),
        }
    }

    /// Where `key`'s files are: their directory, or their key prefix as a
    /// URL.
    pub fn dir_of(&self, key: &PartitionKey) -> PathBuf {
        match self {
            Backend::Dir(d) => d.dir_of(key),
            Backend::Object(o) => PathBuf::from(o.name_of(key, None)),
        }
    }

    /// The full name of `key`'s checkpoint `seq` (path or URL).
    pub fn name_of(&self, key: &PartitionKey, seq: u64) -> String {
        match self {
            Backend::Dir(d) => d.dir_of(key).join(file_name(seq)).display().to_string(),
            Backend::Object(o) => o.name_of(key, Some(&file_name(seq))),
        }
    }

    /// Sequence numbers of `key`'s checkpoint files, in no order.
    pub fn list(&self, key: &PartitionKey) -> anyhow::Result<Vec<u64>> {
        match self {
            Backend::Dir(d) => d.list(key),
            Backend::Object(o) => o.list(key),
        }
    }

    /// The bytes of `key`'s checkpoint `seq`.
    pub fn read(&self, key: &PartitionKey, seq: u64) -> anyhow::Result<Vec<u8>> {
        match self {
            Backend::Dir(d) => d.read(key, seq),
            Backend::Object(o) => o.read(key, seq),
        }
    }

    /// Writes `key`'s checkpoint `seq` whole or not at all.
    pub fn write(&self, key: &PartitionKey, seq: u64, bytes: &[u8]) -> anyhow::Result<()> {
        match self {
            Backend::Dir(d) => d.write(key, seq, bytes),
            Backend::Object(o) => o.write(key, seq, bytes),
        }
    }

    /// Removes `key`'s checkpoint `seq` (best effort: a leftover is only
    /// an extra fallback).
    pub fn remove(&self, key: &PartitionKey, seq: u64) {
        match self {
            Backend::Dir(d) => d.remove(key, seq),
            Backend::Object(o) => o.remove(key, seq),
        }
    }

    /// Holds `key` for `writer`; fails while another writer holds it.
    pub fn claim(&self, key: &PartitionKey, writer: &lease::Writer) -> anyhow::Result<Hold> {
        match self {
            Backend::Dir(d) => d.claim(key).map(Hold::Lock),
            Backend::Object(o) => o.claim(key, writer).map(Hold::Lease),
        }
    }

    /// Before a write under `hold`: fails when the partition is no longer
    /// this writer's (an object lease taken over after it expired). The
    /// directory lock cannot be lost while held.
    pub fn confirm(&self, key: &PartitionKey, hold: &mut Hold) -> anyhow::Result<()> {
        match (self, hold) {
            (Backend::Object(o), Hold::Lease(l)) => o.renew(key, l),
            _ => Ok(()),
        }
    }

    /// Lets go of `key`.
    pub fn release(&self, key: &PartitionKey, hold: Hold) {
        match (self, hold) {
            (Backend::Object(o), Hold::Lease(l)) => o.release(key, &l),
            (_, hold) => drop(hold),
        }
    }
}
