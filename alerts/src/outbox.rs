//! Durable outbox: every notification is on disk before any network call
//! and leaves only when its receiver accepted it (or it was dead-lettered).
//!
//! Layout, one directory per receiver:
//! - `<dir>/<receiver>/<seq>.json`: one pending entry (a [`Notification`]),
//!   written as `<seq>.tmp`, fsynced, renamed, then the directory fsynced.
//!   `seq` is a zero-padded global sequence number, so name order is
//!   creation order and per-incident order survives a restart.
//! - `<dir>/<receiver>/dead/<seq>.json`: rejected entries with the
//!   receiver's answer.
//! - `<dir>/ledger.log`: one line per (receiver, dedup_key, status, ts)
//!   ever enqueued. When the caller replays its input after a crash (the
//!   detector re-reads Kafka from its last committed offset), the same
//!   state changes come again; the ledger drops them, so each incident
//!   state is enqueued once. Written after the entry (a crash in between
//!   can only cause a re-send with the same dedup_key, never a loss) and
//!   compacted to its newest half past [`LEDGER_MAX`] lines.
//!
//! Chosen over an append-only log + ack log because deleting a file is the
//! ack, recovery is a directory listing, and dead letters are plain files an
//! operator can read and move back. Receivers that are per-incident
//! (PagerDuty, webhook) get one entry per alert event, so a retry never
//! re-sends another incident. Re-sends (`resend`) bypass the ledger.
//!
//! Storing entries is [`enqueue`]'s (per-entry progress across disk faults).
//!
//! Blocking std IO: call from `spawn_blocking` (or a sync thread) in async code.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::route::Notification;

/// Ledger lines kept before compaction: at ~120 bytes a line, 200k lines is
/// ~24 MB and covers far more than any replay window (days of incidents).
pub const LEDGER_MAX: usize = 200_000;

/// Outbox failures.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// A filesystem operation failed.
    #[error("outbox {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// A notification for a receiver the outbox was not opened with.
    #[error("outbox has no receiver {0:?}")]
    UnknownReceiver(String),
    /// An entry could not be encoded.
    #[error("cannot encode outbox entry: {0}")]
    Encode(#[from] serde_json::Error),
    /// A lock was poisoned by a panicking thread.
    #[error("outbox lock poisoned")]
    Poisoned,
    /// Another process has the outbox directory open.
    #[error(transparent)]
    Locked(#[from] crate::dirlock::LockError),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> OutboxError + 'a {
    move |source| OutboxError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

pub use crate::delivery::DeliveryStats;

/// One receiver's queue.
#[derive(Debug)]
pub(crate) struct Queue {
    per_event: bool,
    pending: Mutex<BTreeSet<u64>>,
    pub(crate) notify: Notify,
    pub(crate) stats: DeliveryStats,
}

#[derive(Debug)]
struct Ledger {
    next_seq: u64,
    /// Ledger lines of stored entries not yet appended (the append failed).
    unwritten: String,
    keys: HashSet<String>,
    order: VecDeque<String>,
    file: File,
}

/// The outbox of all receivers.
#[derive(Debug)]
pub struct Outbox {
    dir: PathBuf,
    /// Held while open: one process per outbox directory.
    _lock: crate::dirlock::DirLock,
    ledger: Mutex<Ledger>,
    queues: BTreeMap<String, Arc<Queue>>,
    /// Delivered entries whose file could not be removed yet.
    stale: Mutex<Vec<PathBuf>>,
}

fn ledger_key(receiver: &str, ev: &crate::alert::AlertEvent) -> String {
    format!(
        "{receiver}\t{}\t{}\t{}",
        ev.dedup_key,
        ev.status.as_str(),
        ev.ts
    )
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, OutboxError> {
    m.lock().map_err(|_| OutboxError::Poisoned)
}

fn sync_dir(dir: &Path) -> Result<(), OutboxError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync", dir))
}

fn seq_of(path: &Path) -> Option<u64> {
    path.file_name()?
        .to_str()?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

impl Outbox {
    /// Opens (creating) the outbox in `dir` for `receivers` (name, per-event
    /// entries), recovering pending entries and the ledger.
    pub fn open(dir: &Path, receivers: &[(String, bool)]) -> Result<Self, OutboxError> {
        fs::create_dir_all(dir).map_err(io("create", dir))?;
        // Before anything is read or removed: the holder's files are its own.
        let dir_lock =
            crate::dirlock::DirLock::acquire(dir, crate::dirlock::OUTBOX_LOCK, "alert outbox")?;
        let ledger_path = dir.join("ledger.log");
        let mut keys = HashSet::new();
        let mut order = VecDeque::new();
        if ledger_path.exists() {
            let f = File::open(&ledger_path).map_err(io("open", &ledger_path))?;
            for line in BufReader::new(f).lines() {
                let line = line.map_err(io("read", &ledger_path))?;
                if !line.is_empty() && keys.insert(line.clone()) {
                    order.push_back(line);
                }
            }
        }
        let mut next_seq = 0;
        let mut queues = BTreeMap::new();
        for (name, per_event) in receivers {
            let rdir = dir.join(name);
            fs::create_dir_all(rdir.join("dead")).map_err(io("create", &rdir))?;
            let mut pending = BTreeSet::new();
            for entry in fs::read_dir(&rdir).map_err(io("list", &rdir))? {
                let path = entry.map_err(io("list", &rdir))?.path();
                if path.extension().is_some_and(|e| e == "tmp") {
                    // Never renamed: the enqueue did not complete, nothing was promised.
                    fs::remove_file(&path).map_err(io("remove", &path))?;
                } else if let Some(seq) = seq_of(&path) {
                    next_seq = next_seq.max(seq + 1);
                    pending.insert(seq);
                }
            }
            let queue = Queue {
                per_event: *per_event,
                pending: Mutex::new(pending),
                notify: Notify::new(),
                stats: DeliveryStats::default(),
            };
            queues.insert(name.clone(), Arc::new(queue));
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&ledger_path)
            .map_err(io("open", &ledger_path))?;
        let outbox = Self {
            dir: dir.to_owned(),
            _lock: dir_lock,
            ledger: Mutex::new(Ledger {
                next_seq,
                unwritten: String::new(),
                keys,
                order,
                file,
            }),
            queues,
            stale: Mutex::new(Vec::new()),
        };
        // Entries that made it to disk count as enqueued even if their ledger
        // line did not (crash between the two).
        for (name, q) in &outbox.queues {
            let seqs: Vec<u64> = lock(&q.pending)?.iter().copied().collect();
            let mut ledger = lock(&outbox.ledger)?;
            for seq in seqs {
                if let Some(n) = outbox.read(name, seq)? {
                    for ev in n.events.iter().filter(|_| !n.resend) {
                        let k = ledger_key(name, ev);
                        if ledger.keys.insert(k.clone()) {
                            ledger.order.push_back(k);
                        }
                    }
                }
            }
        }
        Ok(outbox)
    }

    fn path(&self, receiver: &str, seq: u64) -> PathBuf {
        self.dir.join(receiver).join(format!("{seq:020}.json"))
    }

    pub(crate) fn queue(&self, receiver: &str) -> Option<Arc<Queue>> {
        self.queues.get(receiver).cloned()
    }

    /// Delivery counters of a receiver.
    pub fn stats(&self, receiver: &str) -> Option<&DeliveryStats> {
        self.queues.get(receiver).map(|q| &q.stats)
    }

    /// Entries waiting for a receiver.
    pub fn pending(&self, receiver: &str) -> usize {
        self.queues
            .get(receiver)
            .and_then(|q| q.pending.lock().ok().map(|p| p.len()))
            .unwrap_or(0)
    }

    /// Entries waiting for any receiver.
    pub fn pending_total(&self) -> usize {
        self.queues
            .values()
            .map(|q| q.pending.lock().map_or(0, |p| p.len()))
            .sum()
    }

    /// How long the oldest entry waiting for a receiver has waited (by
    /// its file's modification time); `None` when none waits or the file
    /// cannot be read.
    pub fn oldest_pending_age(&self, receiver: &str) -> Option<std::time::Duration> {
        let seq = *self.queues.get(receiver)?.pending.lock().ok()?.first()?;
        let written = fs::metadata(self.path(receiver, seq))
            .ok()?
            .modified()
            .ok()?;
        Some(written.elapsed().unwrap_or_default())
    }

    fn read(&self, receiver: &str, seq: u64) -> Result<Option<Notification>, OutboxError> {
        let path = self.path(receiver, seq);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("read", &path)(e)),
        };
        match serde_json::from_slice(&bytes) {
            Ok(n) => Ok(Some(n)),
            Err(e) => {
                let answer = format!("unreadable outbox entry: {e}");
                self.move_dead(receiver, seq, 0, &answer, &String::from_utf8_lossy(&bytes))?;
                Ok(None)
            }
        }
    }

    /// The oldest `max` entries of a receiver, oldest first.
    pub fn peek(
        &self,
        receiver: &str,
        max: usize,
    ) -> Result<Vec<(u64, Notification)>, OutboxError> {
        let queue = self
            .queue(receiver)
            .ok_or_else(|| OutboxError::UnknownReceiver(receiver.to_owned()))?;
        let seqs: Vec<u64> = lock(&queue.pending)?.iter().take(max).copied().collect();
        let mut out = Vec::with_capacity(seqs.len());
        for seq in seqs {
            match self.read(receiver, seq)? {
                Some(n) => out.push((seq, n)),
                None => {
                    lock(&queue.pending)?.remove(&seq);
                }
            }
        }
        Ok(out)
    }

    /// Removes delivered entries. An entry whose file cannot be removed
    /// (an I/O fault) leaves the queue anyway, so it is not sent twice
    /// while this process runs; its removal is retried on the next call
    /// (if the process restarts first, it is sent again with the same
    /// dedup key, which receivers drop).
    pub fn ack(&self, receiver: &str, seqs: &[u64]) -> Result<(), OutboxError> {
        let queue = self
            .queue(receiver)
            .ok_or_else(|| OutboxError::UnknownReceiver(receiver.to_owned()))?;
        {
            let mut pending = lock(&queue.pending)?;
            for seq in seqs {
                pending.remove(seq);
            }
        }
        let mut stale = lock(&self.stale)?;
        stale.extend(seqs.iter().map(|&seq| self.path(receiver, seq)));
        let mut first_err = None;
        stale.retain(|path| match fs::remove_file(path) {
            Ok(()) => false,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                first_err.get_or_insert_with(|| io("remove", path)(e));
                true
            }
        });
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Moves an entry to `dead/` with the receiver's answer.
    pub fn dead_letter(
        &self,
        receiver: &str,
        seq: u64,
        status: u16,
        answer: &str,
    ) -> Result<(), OutboxError> {
        let text = fs::read_to_string(self.path(receiver, seq)).unwrap_or_default();
        self.move_dead(receiver, seq, status, answer, &text)?;
        if let Some(q) = self.queue(receiver) {
            lock(&q.pending)?.remove(&seq);
        }
        Ok(())
    }

    fn move_dead(
        &self,
        receiver: &str,
        seq: u64,
        status: u16,
        answer: &str,
        entry: &str,
    ) -> Result<(), OutboxError> {
        let dead = self
            .dir
            .join(receiver)
            .join("dead")
            .join(format!("{seq:020}.json"));
        let entry: serde_json::Value =
            serde_json::from_str(entry).unwrap_or(serde_json::Value::String(entry.to_owned()));
        let body = serde_json::json!({"status": status, "answer": answer, "entry": entry});
        fs::write(&dead, serde_json::to_vec_pretty(&body)?).map_err(io("write", &dead))?;
        let path = self.path(receiver, seq);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("remove", &path)(e)),
        }
    }

    /// Dead-lettered entries of a receiver (the JSON documents), oldest first.
    pub fn dead_letters(&self, receiver: &str) -> Result<Vec<serde_json::Value>, OutboxError> {
        let dir = self.dir.join(receiver).join("dead");
        let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
            .map_err(io("list", &dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| {
                let bytes = fs::read(p).map_err(io("read", p))?;
                Ok(serde_json::from_slice(&bytes)?)
            })
            .collect()
    }
}

mod enqueue;
#[cfg(test)]
mod fault_tests;
