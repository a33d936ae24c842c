//! What a checkpoint holds: the pipeline's state and the source offsets it
//! reflects.
//!
//! Part of the checkpoint store (`checkpoint/`): the store writes it and
//! `format` seals it; a leaf, so that neither needs the other.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Next offset to read per (topic, partition).
pub type Offsets = BTreeMap<(String, i32), i64>;

/// Everything needed to resume.
#[derive(Debug, Serialize, Deserialize)]
pub struct Checkpoint {
    pub seq: u64,
    /// Wall time it was taken.
    pub created_ms: i64,
    /// Event-time watermark of the alert stage.
    pub watermark_ms: i64,
    /// Next offset per (topic, partition), as a list (CBOR map keys).
    #[serde(with = "offsets_list")]
    pub offsets: Offsets,
    /// One [`crate::pipeline::shard::Shard`] snapshot per shard, in order.
    pub shards: Vec<Vec<u8>>,
    /// The alert stage (engine included).
    pub stage: Vec<u8>,
    /// The sink (router groups); empty for sinks without state.
    pub sink: Vec<u8>,
}

mod offsets_list {
    use super::Offsets;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(o: &Offsets, s: S) -> Result<S::Ok, S::Error> {
        let list: Vec<(&str, i32, i64)> = o
            .iter()
            .map(|((t, p), off)| (t.as_str(), *p, *off))
            .collect();
        list.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Offsets, D::Error> {
        let list = Vec::<(String, i32, i64)>::deserialize(d)?;
        Ok(list.into_iter().map(|(t, p, o)| ((t, p), o)).collect())
    }
}
