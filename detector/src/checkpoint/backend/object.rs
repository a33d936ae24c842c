//! The object store backend of the partition checkpoint store: an
//! S3-compatible bucket (`s3://bucket/prefix`, client from the `AWS_*`
//! environment), or any `object_store` store in tests. Each checkpoint is
//! one object under `<prefix>/partitions/<topic>-<partition>/`, put whole
//! (an S3 PUT is atomic: a reader sees the old object, the new one or
//! none, never a part); one writer per partition through the lease object
//! of [`super::lease`].
//!
//! Calls block the calling thread on the store's own runtime
//! ([`super::blocking`]). Errors name the object's URL.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_util::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjPath;
use object_store::{
    ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig, UpdateVersion,
};

use super::blocking::Blocking;
use super::lease::{self, Held, LEASE_OBJECT, Verdict, Writer};
use crate::checkpoint::files::{PartitionKey, file_name, partition_dir, seq_of};

/// Retries of one request: few and short, since the caller (the alert
/// thread, the Kafka poll loop) waits on them; a checkpoint that fails is
/// taken again at the next barrier.
fn retry() -> RetryConfig {
    RetryConfig {
        max_retries: 3,
        retry_timeout: Duration::from_secs(20),
        ..RetryConfig::default()
    }
}

#[derive(Debug)]
pub struct ObjectBackend {
    store: Arc<dyn ObjectStore>,
    /// `<prefix>/partitions`.
    root: ObjPath,
    /// The store's URL (`s3://bucket/prefix`), for names in errors.
    url: String,
    rt: Blocking,
}

impl ObjectBackend {
    /// The bucket `bucket`, keys under `prefix`; endpoint, region and
    /// credentials from the `AWS_*` environment variables.
    pub fn s3(bucket: &str, prefix: &str) -> anyhow::Result<Self> {
        Self::s3_with(bucket, prefix, &[])
    }

    /// As [`Self::s3`], with `object_store` S3 settings (`aws_endpoint`,
    /// `aws_allow_http`, ...) over the environment's: for a process that
    /// cannot set its environment (tests/e2e/s3_store.rs).
    pub fn s3_with(bucket: &str, prefix: &str, settings: &[(&str, &str)]) -> anyhow::Result<Self> {
        let url = if prefix.is_empty() {
            format!("s3://{bucket}")
        } else {
            format!("s3://{bucket}/{prefix}")
        };
        let mut builder = AmazonS3Builder::from_env();
        for (k, v) in settings {
            let key = k
                .parse()
                .with_context(|| format!("checkpoint store {url}: unknown S3 setting {k:?}"))?;
            builder = builder.with_config(key, *v);
        }
        let s3 = builder
            .with_bucket_name(bucket)
            .with_retry(retry())
            .build()
            .with_context(|| {
                format!("checkpoint store {url}: configuring the S3 client from the AWS_* environment variables")
            })?;
        Self::new(Arc::new(s3), prefix, url)
    }

    /// `store`, keys under `prefix`; `url` names it in errors.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str, url: String) -> anyhow::Result<Self> {
        let prefix = ObjPath::parse(prefix)
            .with_context(|| format!("checkpoint store {url}: bad key prefix {prefix:?}"))?;
        Ok(ObjectBackend {
            store,
            root: prefix.clone().join("partitions"),
            url,
            rt: Blocking::new()?,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn path(&self, key: &PartitionKey, file: Option<&str>) -> ObjPath {
        let dir = self.root.clone().join(partition_dir(key).as_str());
        match file {
            Some(f) => dir.join(f),
            None => dir,
        }
    }

    /// The URL of `key`'s folder, or of `file` in it.
    pub fn name_of(&self, key: &PartitionKey, file: Option<&str>) -> String {
        let dir = format!("{}/partitions/{}", self.url, partition_dir(key));
        match file {
            Some(f) => format!("{dir}/{f}"),
            None => dir,
        }
    }

    pub fn list(&self, key: &PartitionKey) -> anyhow::Result<Vec<u64>> {
        let dir = self.path(key, None);
        let got = self.rt.run(|| async {
            let all: Vec<_> = self.store.list(Some(&dir)).try_collect().await?;
            Ok(all)
        });
        let all = got.with_context(|| format!("listing {}", self.name_of(key, None)))?;
        Ok(all
            .iter()
            .filter_map(|m| {
                let name = m.location.filename()?;
                // Only this folder's own files (the listing is recursive).
                (m.location.prefix_match(&dir)?.count() == 1)
                    .then(|| seq_of(std::path::Path::new(name)))
                    .flatten()
            })
            .collect())
    }

    pub fn read(&self, key: &PartitionKey, seq: u64) -> anyhow::Result<Vec<u8>> {
        let file = file_name(seq);
        let path = self.path(key, Some(&file));
        self.rt
            .run(|| async {
                let bytes = self.store.get(&path).await?.bytes().await?;
                Ok(bytes.to_vec())
            })
            .with_context(|| format!("reading {}", self.name_of(key, Some(&file))))
    }

    pub fn write(&self, key: &PartitionKey, seq: u64, bytes: &[u8]) -> anyhow::Result<()> {
        let file = file_name(seq);
        let path = self.path(key, Some(&file));
        let payload = PutPayload::from(bytes.to_vec());
        self.rt
            .run(|| async {
                self.store.put(&path, payload).await?;
                Ok(())
            })
            .with_context(|| format!("writing {}", self.name_of(key, Some(&file))))
    }

    pub fn remove(&self, key: &PartitionKey, seq: u64) {
        let file = file_name(seq);
        let path = self.path(key, Some(&file));
        let done = self.rt.run(|| async {
            self.store.delete(&path).await?;
            Ok(())
        });
        if let Err(e) = done {
            tracing::warn!(object = %self.name_of(key, Some(&file)), error = format!("{e:#}"), "removing an old partition checkpoint");
        }
    }

    /// Takes (or renews) `key`'s lease for `me`; fails while another live
    /// writer holds it. A put that loses a race looks again, a few times.
    pub fn claim(&self, key: &PartitionKey, me: &Writer) -> anyhow::Result<Held> {
        let name = self.name_of(key, Some(LEASE_OBJECT));
        let path = self.path(key, Some(LEASE_OBJECT));
        let claimed = self.rt.run(|| async {
            for _ in 0..3 {
                let now = crate::checkpoint::files::wall_ms();
                let mode = match self.store.get(&path).await {
                    Err(object_store::Error::NotFound { .. }) => PutMode::Create,
                    Err(e) => return Err(anyhow::Error::new(e).context("reading the lease")),
                    Ok(got) => {
                        let version = UpdateVersion {
                            e_tag: got.meta.e_tag.clone(),
                            version: got.meta.version.clone(),
                        };
                        let found = got.bytes().await?;
                        match lease::judge(&found, me, now) {
                            Verdict::Refuse(why) => {
                                anyhow::bail!("partition {}-{} is {why}", key.0, key.1)
                            }
                            Verdict::Ours => {}
                            Verdict::TakeOver(why) => {
                                tracing::info!(topic = %key.0, partition = key.1, lease = %name, why, "taking the partition's lease over");
                            }
                        }
                        PutMode::Update(version)
                    }
                };
                let lease = me.lease(now);
                let put = self
                    .store
                    .put_opts(&path, lease.to_json().into(), PutOptions::from(mode))
                    .await;
                match put {
                    Ok(r) => {
                        return Ok(Held {
                            lease,
                            e_tag: r.e_tag,
                            version: r.version,
                        });
                    }
                    // Another writer put first: look again.
                    Err(
                        object_store::Error::AlreadyExists { .. }
                        | object_store::Error::Precondition { .. },
                    ) => {}
                    Err(e) => return Err(anyhow::Error::new(e).context("writing the lease")),
                }
            }
            anyhow::bail!("the lease changed under every attempt to take it")
        });
        claimed.with_context(|| format!("claiming {name}"))
    }

    /// Renews `held` before a write, conditioned on this writer's last put:
    /// fails when another writer has taken the lease over since.
    pub fn renew(&self, key: &PartitionKey, held: &mut Held) -> anyhow::Result<()> {
        let name = self.name_of(key, Some(LEASE_OBJECT));
        let path = self.path(key, Some(LEASE_OBJECT));
        let mut lease = held.lease.clone();
        lease.renewed_ms = crate::checkpoint::files::wall_ms();
        let mode = PutMode::Update(UpdateVersion {
            e_tag: held.e_tag.clone(),
            version: held.version.clone(),
        });
        let put = self.rt.run(|| async {
            let r = self
                .store
                .put_opts(&path, lease.to_json().into(), PutOptions::from(mode))
                .await;
            Ok(r)
        })?;
        match put {
            Ok(r) => {
                *held = Held {
                    lease,
                    e_tag: r.e_tag,
                    version: r.version,
                };
                Ok(())
            }
            Err(object_store::Error::Precondition { .. }) => anyhow::bail!(
                "{name}: this instance's lease on partition {}-{} was taken over by another (not renewed within {:.0} s): its checkpoint is refused",
                key.0,
                key.1,
                held.lease.ttl_ms as f64 / 1000.0
            ),
            Err(e) => Err(anyhow::Error::new(e).context(format!("renewing {name}"))),
        }
    }

    /// Deletes `key`'s lease if it is still `held`'s.
    pub fn release(&self, key: &PartitionKey, held: &Held) {
        let name = self.name_of(key, Some(LEASE_OBJECT));
        let path = self.path(key, Some(LEASE_OBJECT));
        let done = self.rt.run(|| async {
            let found = match self.store.get(&path).await {
                // Nothing to let go of.
                Err(object_store::Error::NotFound { .. }) => return Ok(true),
                got => got?.bytes().await?,
            };
            if lease::Lease::from_json(&found).is_some_and(|l| l.token == held.lease.token) {
                self.store.delete(&path).await?;
                return Ok(true);
            }
            Ok(false)
        });
        match done {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(lease = %name, "releasing a partition whose lease another writer holds now: left alone");
            }
            Err(e) => {
                tracing::warn!(lease = %name, error = format!("{e:#}"), "releasing the partition's lease failed: it expires after its TTL");
            }
        }
    }
}
