//! The bytes of one checkpoint file, and why a reader can trust them.
//!
//! Format 3 (written now): a CBOR map `{version: 3, crc32, payload}` where
//! `payload` is a CBOR byte string holding the [`Checkpoint`] and `crc32`
//! is its CRC-32 (IEEE, `crc32fast`). fsync + rename make a file whole or
//! absent, but not right: a bit flipped on disk or in a copy, or a file
//! truncated by a full volume outside the rename, decodes as something else
//! or fails deep inside one part. The checksum catches that before any part
//! is decoded and names the file. CRC-32 because it is for accidental
//! damage, not an adversary, and costs little next to decoding.
//!
//! Format 2 (no checksum, the checkpoint inline) is still read, with a
//! warning, so that a deployment upgrades without a cold start; the first
//! checkpoint after the upgrade is format 3. Any other version is refused
//! with a message saying which.
//!
//! The version is read first and alone ([`Header`]), so that an unknown
//! format is refused by its version, not by whatever field a layout misses
//! first; an older forewarn reading a format-3 file says "a newer forewarn".

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::files::{from_cbor, to_cbor};
use super::record::Checkpoint;

/// Format version written; bumped on incompatible changes. 3: the checksum
/// envelope. 2: the forest snapshot layout of models' `rcf` v2 (v1 is no
/// longer read).
pub const VERSION: u32 = 3;
/// The last format without a checksum, still read.
pub const VERSION_NO_CHECKSUM: u32 = 2;

#[derive(Deserialize)]
struct Header {
    version: u32,
}

/// Format 2.
#[derive(Deserialize)]
struct EnvelopeV2 {
    checkpoint: Checkpoint,
}

#[derive(Serialize)]
struct EnvelopeRef<'a> {
    version: u32,
    crc32: u32,
    payload: Bytes<'a>,
}

/// A sealed file read back (see [`seal`]): its format version, the
/// payload's CRC-32 and the payload.
#[derive(Deserialize)]
pub(super) struct Envelope {
    #[serde(default)]
    pub(super) version: u32,
    crc32: u32,
    payload: ByteBuf,
}

impl Envelope {
    /// The payload, decoded, once its checksum matches; `name` names the
    /// file in errors.
    pub(super) fn open<T: serde::de::DeserializeOwned>(&self, name: &str) -> anyhow::Result<T> {
        let crc = crc32fast::hash(&self.payload.0);
        anyhow::ensure!(
            crc == self.crc32,
            "{name} is damaged: checksum {crc:08x} of its {} payload bytes, {:08x} written",
            self.payload.0.len(),
            self.crc32
        );
        from_cbor(&self.payload.0, name)
    }
}

/// A CBOR byte string on the way out (serde writes a `Vec<u8>` as an array
/// of integers, up to twice the size and slower to read).
pub(super) struct Bytes<'a>(pub(super) &'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

/// A CBOR byte string on the way in.
pub(super) struct ByteBuf(pub(super) Vec<u8>);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ByteBuf;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v.to_vec()))
            }
            fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

/// The file's bytes for `ckpt`.
pub fn encode(ckpt: &Checkpoint) -> anyhow::Result<Vec<u8>> {
    seal(ckpt, VERSION, &format!("checkpoint {}", ckpt.seq))
}

/// `value` as CBOR in a versioned envelope with the payload's CRC-32: the
/// layout of every checkpoint file (the instance's and each partition's).
/// `what` names it in errors.
pub(super) fn seal<T: Serialize>(value: &T, version: u32, what: &str) -> anyhow::Result<Vec<u8>> {
    let payload = to_cbor(value, what)?;
    let env = EnvelopeRef {
        version,
        crc32: crc32fast::hash(&payload),
        payload: Bytes(&payload),
    };
    // Sized once: the envelope adds a few bytes to a payload of megabytes.
    let mut out = Vec::with_capacity(payload.len() + 64);
    ciborium::into_writer(&env, &mut out)
        .map_err(|e| anyhow::anyhow!("serializing {what}: {e}"))?;
    Ok(out)
}

/// A format-2 file's bytes (tests and measurements of the upgrade path).
#[cfg(test)]
pub(crate) fn encode_v2(ckpt: &Checkpoint) -> anyhow::Result<Vec<u8>> {
    #[derive(Serialize)]
    struct V2<'a> {
        version: u32,
        checkpoint: &'a Checkpoint,
    }
    to_cbor(
        &V2 {
            version: VERSION_NO_CHECKSUM,
            checkpoint: ckpt,
        },
        "v2",
    )
}

/// The checkpoint in `bytes`, read from `path` (named in every error).
pub fn decode(bytes: &[u8], path: &Path) -> anyhow::Result<Checkpoint> {
    let name = path.display();
    let head: Header = ciborium::from_reader(bytes)
        .map_err(|e| anyhow::anyhow!("decoding {name}: not a checkpoint file ({e})"))?;
    match head.version {
        VERSION => {
            let env: Envelope = ciborium::from_reader(bytes)
                .map_err(|e| anyhow::anyhow!("decoding {name}: {e}"))?;
            env.open(&name.to_string())
        }
        VERSION_NO_CHECKSUM => {
            tracing::warn!(
                file = %name,
                "checkpoint of format 2 has no checksum: read unverified (the next checkpoint is written with one)"
            );
            let env: EnvelopeV2 = ciborium::from_reader(bytes)
                .map_err(|e| anyhow::anyhow!("decoding {name}: {e}"))?;
            Ok(env.checkpoint)
        }
        v => anyhow::bail!(
            "{name} has checkpoint format {v}, this build reads {VERSION_NO_CHECKSUM} and {VERSION}: \
             it was written by {} forewarn; move the checkpoint directory away to start cold",
            if v < VERSION { "an older" } else { "a newer" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Offsets;

    fn ckpt() -> Checkpoint {
        let mut offsets = Offsets::new();
        offsets.insert(("telemetry".into(), 0), 9);
        Checkpoint {
            seq: 4,
            created_ms: 1,
            watermark_ms: 2,
            offsets,
            shards: vec![vec![7; 300], vec![8; 5]],
            stage: vec![1, 2],
            sink: vec![],
        }
    }

    #[derive(Serialize)]
    struct V2<'a> {
        version: u32,
        checkpoint: &'a Checkpoint,
    }

    #[test]
    fn round_trips_and_every_flipped_byte_is_caught() {
        let path = Path::new("checkpoint-0000000004.cbor");
        let bytes = encode(&ckpt()).expect("encode");
        let back = decode(&bytes, path).expect("decode");
        assert_eq!(back.seq, 4);
        assert_eq!(back.shards, ckpt().shards);
        assert_eq!(back.offsets, ckpt().offsets);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            match decode(&bad, path) {
                Err(e) => assert!(e.to_string().contains("checkpoint-0000000004.cbor"), "{e}"),
                // A flip in the header's own encoding may still decode, but
                // never into other state.
                Ok(c) => assert_eq!(c.shards, ckpt().shards, "byte {i}"),
            }
        }
        let e = decode(&bytes[..bytes.len() - 3], path).expect_err("truncated");
        assert!(e.to_string().contains("checkpoint-0000000004.cbor"), "{e}");
    }

    #[test]
    fn format_2_is_read_without_a_checksum_and_others_are_refused() {
        let path = Path::new("old.cbor");
        let c = ckpt();
        let v2 = to_cbor(
            &V2 {
                version: 2,
                checkpoint: &c,
            },
            "v2",
        )
        .expect("v2");
        assert_eq!(decode(&v2, path).expect("v2 reads").shards, c.shards);
        for (v, word) in [(1, "an older"), (4, "a newer")] {
            let other = to_cbor(
                &V2 {
                    version: v,
                    checkpoint: &c,
                },
                "other",
            )
            .expect("other");
            let e = decode(&other, path).expect_err("refused").to_string();
            assert!(
                e.contains(&format!("format {v}")) && e.contains(word),
                "{e}"
            );
        }
    }
}
