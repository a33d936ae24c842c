//! Known states: a row whose raw forest input (each metric's value and
//! change over the shingle, before normalisation) is exactly one seen in
//! the last `known_horizon` rows is not news, however the forest scores it.
//! Seen on a normal row, it ends any open event (the stream is back where
//! it was); seen in an earlier event, it opens none (that event is coming
//! back, as the recurrences say of near shapes). Repeats inside the open
//! event itself are left to the episode rule, so a sensor stuck at one
//! value stays one open event.
//!
//! Why: a random cut forest is scale-free. On a stream that sat at one
//! value, every stored point is the same, and the first different value
//! moves the input normaliser; from then on the old value reads a little
//! off its stored copies in normalised units, and a forest whose sample is
//! one point isolates anything a little off at its root. A health check at
//! 1 with one 0 scored 1.4–2.5 for hundreds of rows on its 1s, and the
//! event they held open hid the real flapping that came later. The raw
//! input is what the stream did; when it did exactly this recently, and
//! that was normal, the forest's surprise is the normaliser's.
//!
//! Part of the thresholded grader (`grading/`); `rcf::ThresholdedForest`
//! applies it to a single stream (`forewarn score`), as it does the
//! recurrences. Streams with continuous noise never repeat a row exactly,
//! so it changes nothing for them.

use std::collections::{BTreeMap, VecDeque};

use features::hash::{fnv1a, fnv1a_keyed};
use serde::{Deserialize, Serialize};

use super::grade::Grade;

/// Raw inputs of the last rows and the shingles seen recently.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KnownStates {
    /// Hashes of the last `shingle` raw rows, oldest first.
    rows: VecDeque<u64>,
    /// Shingle hash → when it was last seen and how it was graded.
    seen: BTreeMap<u64, Seen>,
    /// Row of the last sweep of entries older than the horizon.
    swept: u64,
    /// Row the open event opened at (0 when none is open).
    opened: u64,
}

/// The last time a raw shingle was seen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Seen {
    at: u64,
    /// Outside any event.
    normal: bool,
}

/// What the known states make of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// Not seen within the horizon, or only in the open event.
    New,
    /// Seen on a normal row: the stream is back in a known state.
    Normal,
    /// Seen in an earlier event: that event is coming back.
    Recurring,
}

/// A raw row's stable hash (`features::hash`, the project's hash for
/// whatever is kept or decides behaviour: these keys go into snapshots):
/// FNV-1a over each value's bits, streamed value by value from the offset
/// basis (the hash of nothing).
fn hash_row(row: &[f64]) -> u64 {
    row.iter().fold(fnv1a(&[]), |h, &x| {
        // Every NaN is the same missing value; -0 is 0.
        let bits = if x.is_nan() {
            u64::MAX
        } else {
            (x + 0.0).to_bits()
        };
        fnv1a_keyed(h, &bits.to_le_bytes())
    })
}

impl KnownStates {
    /// Takes the next raw row (as widened for the forest) and returns its
    /// shingle's key once `shingle` rows have been seen.
    pub fn push(&mut self, raw: &[f64], shingle: usize) -> Option<u64> {
        if self.rows.len() == shingle.max(1) {
            self.rows.pop_front();
        }
        self.rows.push_back(hash_row(raw));
        (self.rows.len() == shingle.max(1)).then(|| {
            self.rows
                .iter()
                .fold(fnv1a(&[]), |h, &r| fnv1a_keyed(h, &r.to_le_bytes()))
        })
    }

    /// How `key` was seen within `horizon` rows before `at`.
    fn classify(&self, key: Option<u64>, at: u64, horizon: u64) -> Known {
        match key.and_then(|k| self.seen.get(&k)) {
            Some(s) if at.saturating_sub(s.at) <= horizon => {
                if s.normal {
                    Known::Normal
                } else if self.opened == 0 || s.at < self.opened {
                    Known::Recurring
                } else {
                    Known::New
                }
            }
            _ => Known::New,
        }
    }

    /// The grade `g` of the row at `at` (whose shingle is `key`; an event
    /// was open before it when `was_open`) with known states taken out,
    /// and whether the open event ends here. Off when `horizon` is 0.
    pub fn filter(
        &self,
        g: Grade,
        was_open: bool,
        key: Option<u64>,
        at: u64,
        horizon: u64,
    ) -> (Grade, bool) {
        if horizon == 0 {
            return (g, false);
        }
        let quiet = Grade {
            grade: 0.0,
            is_anomaly: false,
            ..g
        };
        match self.classify(key, at, horizon) {
            Known::New => (g, false),
            // Back where the stream was, or an earlier event coming back:
            // no event is open after this row.
            Known::Normal => (Self::closed(quiet), true),
            Known::Recurring if g.is_anomaly && !was_open => (Self::closed(quiet), true),
            Known::Recurring => (quiet, false),
        }
    }

    fn closed(g: Grade) -> Grade {
        Grade {
            event_grade: 0.0,
            in_event: false,
            ..g
        }
    }

    /// Remembers `key` as seen at row `at`, in an event when `in_event`
    /// (which opened at `at` unless one was open already); forgets entries
    /// older than `horizon` once every `horizon` rows. Off when `horizon`
    /// is 0.
    pub fn remember(&mut self, key: Option<u64>, at: u64, in_event: bool, horizon: u64) {
        if horizon == 0 {
            return;
        }
        self.opened = match (in_event, self.opened) {
            (false, _) => 0,
            (true, 0) => at,
            (true, start) => start,
        };
        if let Some(k) = key {
            let normal = !in_event;
            self.seen.insert(k, Seen { at, normal });
        }
        if at.saturating_sub(self.swept) > horizon {
            self.seen.retain(|_, s| at.saturating_sub(s.at) <= horizon);
            self.swept = at;
        }
    }

    /// The open event's first row, if one is open.
    #[cfg(test)]
    fn event_start(&self) -> Option<u64> {
        (self.opened > 0).then_some(self.opened)
    }

    /// No more rows than a shingle holds (snapshot restore).
    pub fn is_consistent(&self, shingle: usize) -> bool {
        self.rows.len() <= shingle.max(1)
    }

    pub fn heap_bytes(&self) -> usize {
        self.rows.capacity() * 8 + self.seen.len() * 48
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shingle_is_known_once_seen_and_within_the_horizon() {
        let mut k = KnownStates::default();
        let a = k.push(&[1.0, 0.0], 2);
        assert_eq!(a, None, "one row of a two-row shingle");
        let a = k.push(&[1.0, 0.0], 2);
        assert!(a.is_some());
        assert_eq!(k.classify(a, 2, 10), Known::New);
        k.remember(a, 2, false, 10);
        assert_eq!(k.classify(a, 12, 10), Known::Normal);
        assert_eq!(k.classify(a, 13, 10), Known::New, "beyond the horizon");
        // A different row breaks the shingle; the same two rows again are known.
        let b = k.push(&[0.0, -1.0], 2);
        assert_ne!(a, b);
        assert_eq!(k.classify(b, 4, 10), Known::New);
        k.push(&[1.0, 0.0], 2);
        assert_eq!(k.push(&[1.0, 0.0], 2), a);
    }

    #[test]
    fn rows_of_an_event_recur_once_it_has_closed_not_inside_it() {
        let mut k = KnownStates::default();
        let a = k.push(&[9.0], 1);
        k.remember(a, 5, true, 100);
        assert_eq!(k.event_start(), Some(5));
        assert_eq!(k.classify(a, 6, 100), Known::New, "its own event");
        k.remember(a, 6, true, 100);
        assert_eq!(k.event_start(), Some(5));
        k.remember(None, 7, false, 100);
        assert_eq!(k.event_start(), None);
        assert_eq!(k.classify(a, 8, 100), Known::Recurring);
        k.remember(None, 9, true, 100);
        assert_eq!(k.classify(a, 10, 100), Known::Recurring, "an earlier event");
    }

    #[test]
    fn missing_values_and_signed_zeros_hash_alike() {
        let mut k = KnownStates::default();
        let a = k.push(&[f64::NAN, 0.0], 1);
        let b = k.push(&[-f64::NAN, -0.0], 1);
        assert_eq!(a, b);
        assert_ne!(a, k.push(&[0.0, 0.0], 1));
    }

    #[test]
    fn old_entries_are_swept() {
        let mut k = KnownStates::default();
        for at in 0..100u64 {
            let key = k.push(&[at as f64], 1);
            k.remember(key, at, false, 10);
        }
        assert!(k.seen.len() <= 21, "{}", k.seen.len());
    }
}
