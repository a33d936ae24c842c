//! The consumer's state between polls, kept apart from librdkafka so it can
//! be tested without a broker: where each partition must resume
//! ([`Resume`]), the batch being filled with the offsets and event times it
//! covers ([`Batch`]), and the decoding of one message ([`decode_record`]),
//! which goes through the same [`Decoder`] and dead letters as the file
//! source.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use features::Sample;
use features::decode::{Decoded, Decoder, Position};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, ThreadedProducer};

use super::settings::{KafkaSettings, dead_letter_producer};
use crate::checkpoint::Offsets;
use crate::sources::{BATCH, DeadLetters};
use crate::state::State;

/// Longest a partial batch waits before it is sent.
const LINGER: Duration = Duration::from_millis(50);

/// A topic and partition.
pub(super) type Partition = (String, i32);

/// One Kafka message as the source uses it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
    /// The message's timestamp (producer or broker time), epoch ms.
    pub timestamp_ms: Option<i64>,
}

/// The dead-letter topic: bad messages are copied there unchanged, with
/// their reason and position as headers.
pub(crate) struct DeadLetterTopic {
    producer: ThreadedProducer<DefaultProducerContext>,
    topic: String,
}

impl DeadLetterTopic {
    pub(super) fn open(s: &KafkaSettings) -> anyhow::Result<Option<Self>> {
        Ok(match (dead_letter_producer(s)?, &s.dead_letter_topic) {
            (Some(producer), Some(topic)) => Some(DeadLetterTopic {
                producer,
                topic: topic.clone(),
            }),
            _ => None,
        })
    }

    fn send(&self, rec: &Record<'_>, reason: &str, source: &str) {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "reason",
                value: Some(reason),
            })
            .insert(Header {
                key: "source",
                value: Some(source),
            });
        let mut out = BaseRecord::<[u8], [u8]>::to(&self.topic)
            .payload(rec.payload)
            .headers(headers);
        if let Some(k) = rec.key {
            out = out.key(k);
        }
        if let Err((err, _)) = self.producer.send(out) {
            tracing::warn!(error = %err, "dead-letter topic send failed");
        }
    }
}

/// Decodes one message: its errors are counted and dead-lettered (file and
/// topic); the samples it completed are returned for the batch.
pub(crate) fn decode_record<'d>(
    decoder: &'d mut Decoder,
    rec: &Record<'_>,
    state: &State,
    dead: &mut DeadLetters,
    topic: Option<&DeadLetterTopic>,
) -> &'d mut Vec<Sample> {
    let out = decoder.decode(rec.payload, rec.timestamp_ms.unwrap_or(0));
    let unit = Decoded {
        position: Position::Message {
            topic: rec.topic,
            partition: rec.partition,
            offset: rec.offset,
        },
        payload: rec.payload,
        samples: &mut out.samples,
        errors: &out.errors,
        last: false,
    };
    dead.record(state, &unit);
    if let Some(t) = topic
        && !unit.errors.is_empty()
    {
        let source = unit.position.to_string();
        for e in unit.errors {
            t.send(rec, e.reason(), &source);
        }
    }
    &mut out.samples
}

/// What to do with a message of a partition that must resume at a given
/// offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Before the resume point: already in the state, skip it.
    Skip,
    /// Past the resume point (the group's commit is newer than the
    /// checkpoint): seek back to this offset, once.
    Seek(i64),
    /// Process it.
    Take,
}

/// How long a resume point waits for a message before the consumer is
/// sought to it unasked: the group's commit may be past it with nothing
/// newer to come (a stream that stopped, a quiet partition), and a seek
/// that waits for a message past it waits for good.
pub(super) const SEEK_UNASKED_AFTER: Duration = Duration::from_secs(2);

/// Where each partition resumes: the restored checkpoint's offsets at
/// start, and after a rebalance what the pipeline already holds; per
/// partition the offset, whether it was sought, and since when it waits.
#[derive(Debug, Default)]
pub(super) struct Resume(HashMap<Partition, (i64, bool, Instant)>);

impl Resume {
    pub(super) fn new(offsets: &Offsets) -> Self {
        let mut r = Resume::default();
        r.reseek(offsets.clone());
        r
    }

    /// Partitions (re)assigned: resume each exactly at its offset.
    pub(super) fn reseek(&mut self, offsets: Offsets) {
        let now = Instant::now();
        for (k, o) in offsets {
            self.0.insert(k, (o, false, now));
        }
    }

    /// Resume points of `held` partitions that no message reached within
    /// [`SEEK_UNASKED_AFTER`] of `now` and that were not sought yet.
    pub(super) fn overdue(&self, held: &[Partition], now: Instant) -> Vec<(Partition, i64)> {
        let mut due: Vec<(Partition, i64)> = self
            .0
            .iter()
            .filter(|(k, (_, sought, at))| {
                !sought
                    && now.saturating_duration_since(*at) >= SEEK_UNASKED_AFTER
                    && held.contains(k)
            })
            .map(|(k, (want, ..))| (k.clone(), *want))
            .collect();
        due.sort();
        due
    }

    /// The consumer was sought to `key`'s resume point.
    pub(super) fn sought(&mut self, key: &Partition) {
        if let Some(e) = self.0.get_mut(key) {
            e.1 = true;
        }
    }

    /// What to do with the message at `offset` of `key`.
    pub(super) fn step(&mut self, key: &Partition, offset: i64) -> Step {
        let Some((want, sought, _)) = self.0.get_mut(key) else {
            return Step::Take;
        };
        if offset < *want {
            return Step::Skip;
        }
        if offset > *want && !*sought {
            *sought = true;
            return Step::Seek(*want);
        }
        self.0.remove(key);
        Step::Take
    }
}

/// The batch being filled: samples, the next offset per partition it
/// covers, the newest event time per partition, and the oldest message
/// timestamp (for end-to-end latency).
#[derive(Debug)]
pub(super) struct Batch {
    pub(super) samples: Vec<Sample>,
    pub(super) offsets: Offsets,
    pub(super) times: BTreeMap<Partition, i64>,
    /// Samples per partition (`forewarn_partition_samples_total`).
    pub(super) counts: BTreeMap<Partition, u64>,
    pub(super) origin: Option<i64>,
    started: Instant,
}

impl Default for Batch {
    fn default() -> Self {
        Batch {
            samples: Vec::with_capacity(BATCH),
            offsets: Offsets::new(),
            times: BTreeMap::new(),
            counts: BTreeMap::new(),
            origin: None,
            started: Instant::now(),
        }
    }
}

impl Batch {
    /// Adds one message's samples; `next` is the offset after it.
    pub(super) fn add(
        &mut self,
        key: Partition,
        next: i64,
        timestamp_ms: Option<i64>,
        samples: &mut Vec<Sample>,
    ) {
        if let Some(ts) = timestamp_ms {
            self.origin = Some(self.origin.map_or(ts, |o| o.min(ts)));
        }
        if self.samples.is_empty() {
            self.started = Instant::now();
        }
        if let Some(newest) = samples.iter().map(|s| s.ts_ms).max() {
            let t = self.times.entry(key.clone()).or_insert(i64::MIN);
            *t = (*t).max(newest);
        }
        *self.counts.entry(key.clone()).or_default() += samples.len() as u64;
        self.samples.append(samples);
        self.offsets.insert(key, next);
    }

    /// Dropped at a revoke: not handed over, so read again.
    pub(super) fn drop_all(&mut self) {
        self.samples.clear();
        self.offsets.clear();
        self.times.clear();
        self.counts.clear();
        self.origin = None;
    }

    /// Full, or partial and waited for long enough.
    pub(super) fn due(&self) -> bool {
        self.samples.len() >= BATCH
            || (!self.samples.is_empty() && self.started.elapsed() >= LINGER)
    }

    /// Samples per partition (`topic/partition`) since the last call.
    pub(super) fn take_counts(&mut self) -> impl Iterator<Item = (String, u64)> + use<> {
        std::mem::take(&mut self.counts)
            .into_iter()
            .map(|(k, n)| (crate::metrics::partitions::label(&k), n))
    }

    /// The samples, leaving an empty batch (offsets and times stay for the
    /// caller to hand over).
    pub(super) fn take_samples(&mut self) -> Vec<Sample> {
        std::mem::replace(&mut self.samples, Vec::with_capacity(BATCH))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> Partition {
        ("telemetry".into(), p)
    }

    #[test]
    fn resume_skips_seeks_once_then_takes() {
        let mut offsets = Offsets::new();
        offsets.insert(key(0), 10);
        offsets.insert(key(1), 5);
        let mut r = Resume::new(&offsets);
        assert_eq!(r.step(&key(0), 8), Step::Skip);
        assert_eq!(r.step(&key(0), 12), Step::Seek(10));
        assert_eq!(r.step(&key(0), 12), Step::Take, "seeks only once");
        assert_eq!(r.step(&key(0), 3), Step::Take, "resolved: no more checks");
        assert_eq!(r.step(&key(1), 5), Step::Take);
        assert_eq!(r.step(&key(2), 0), Step::Take, "not resuming");
        r.reseek(std::iter::once((key(1), 7)).collect());
        assert_eq!(r.step(&key(1), 6), Step::Skip);
    }

    #[test]
    fn a_resume_point_no_message_reaches_is_sought_unasked() {
        // The newest checkpoint was damaged: the group's commit is past
        // the restored offset and nothing newer comes. Waiting for a
        // message past it to seek back waited for good (a restarted
        // service sat at lag 62, never ready).
        let offsets = Offsets::from([(key(0), 10), (key(1), 5), (key(2), 7)]);
        let mut r = Resume::new(&offsets);
        let held = [key(0), key(1)];
        let now = Instant::now();
        assert!(r.overdue(&held, now).is_empty(), "not before the wait");
        let later = now + SEEK_UNASKED_AFTER;
        assert_eq!(r.step(&key(1), 5), Step::Take, "key 1 resumed");
        assert_eq!(
            r.overdue(&held, later),
            [(key(0), 10)],
            "only held partitions still waiting"
        );
        r.sought(&key(0));
        assert!(r.overdue(&held, later).is_empty(), "sought once");
        assert_eq!(r.step(&key(0), 10), Step::Take);
    }

    #[test]
    fn batch_tracks_offsets_times_and_origin() {
        let mut b = Batch::default();
        assert!(!b.due());
        let mut s = vec![Sample::new("GPU-1", 300), Sample::new("GPU-2", 200)];
        b.add(key(0), 11, Some(5_000), &mut s);
        assert!(s.is_empty(), "samples moved into the batch");
        b.add(key(0), 12, Some(4_000), &mut Vec::new());
        b.add(key(1), 3, None, &mut vec![Sample::new("GPU-3", 100)]);
        assert_eq!(b.samples.len(), 3);
        assert_eq!(b.offsets, Offsets::from([(key(0), 12), (key(1), 3)]));
        assert_eq!(b.times, BTreeMap::from([(key(0), 300), (key(1), 100)]));
        assert_eq!(b.origin, Some(4_000));
        assert_eq!(b.take_samples().len(), 3);
        assert!(b.samples.is_empty() && !b.offsets.is_empty());
        b.drop_all();
        assert!(b.offsets.is_empty() && b.times.is_empty() && b.origin.is_none());
    }

    #[test]
    fn a_full_batch_is_due_at_once() {
        let mut b = Batch::default();
        let mut s: Vec<Sample> = (0..BATCH).map(|i| Sample::new("GPU-1", i as i64)).collect();
        b.add(key(0), 1, None, &mut s);
        assert!(b.due());
    }
}
