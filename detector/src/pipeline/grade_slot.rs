//! A shard's per-GPU anomaly read between scores (part of [`super::shard`]):
//! the forest scores a GPU every few samples and its grade, top reason and
//! whether the GPU explains it are carried in between, and checkpointed.

use serde::{Deserialize, Serialize};

use crate::assess::Evidence;
use crate::assess::anomaly::AnomalyRead;

/// A GPU's anomaly read, carried between scores. Checkpoints of older
/// builds hold it as the array `[since, grade, why]`: it still decodes
/// (as not explained).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(from = "GradeSlotRepr")]
pub(crate) struct GradeSlot {
    /// Samples since the last score.
    pub(crate) since: u32,
    /// The last score's read (stored beside `since`, one map).
    #[serde(flatten)]
    pub(crate) read: AnomalyRead,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum GradeSlotRepr {
    Current {
        since: u32,
        #[serde(flatten)]
        read: AnomalyRead,
    },
    Legacy(u32, f32, Option<Evidence>),
}

impl From<GradeSlotRepr> for GradeSlot {
    fn from(r: GradeSlotRepr) -> Self {
        match r {
            GradeSlotRepr::Current { since, read } => GradeSlot { since, read },
            GradeSlotRepr::Legacy(since, grade, why) => GradeSlot {
                since,
                read: AnomalyRead {
                    grade,
                    why,
                    explained: false,
                    repeat: false,
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint written before `explained` holds the slot as an array;
    /// it restores, not explained, and the new layout round-trips.
    #[test]
    fn grade_slots_of_older_checkpoints_restore() {
        let why = Evidence {
            signal: "sm_clock_peer_z".into(),
            detail: "sm_clock_peer_z low (60% of anomaly score 3.00)".into(),
        };
        let mut old = Vec::new();
        ciborium::into_writer(&(2u32, 0.8f32, Some(why.clone())), &mut old).expect("encode");
        let slot: GradeSlot = ciborium::from_reader(old.as_slice()).expect("old layout decodes");
        assert_eq!(
            (slot.since, slot.read.grade, slot.read.why.as_ref()),
            (2, 0.8, Some(&why))
        );
        assert!(!slot.read.explained);
        let mut new = Vec::new();
        let mut slot = slot;
        slot.read.explained = true;
        ciborium::into_writer(&slot, &mut new).expect("encode");
        let back: GradeSlot = ciborium::from_reader(new.as_slice()).expect("decodes");
        assert!(back.read.explained && back.read.grade == 0.8);
    }
}
