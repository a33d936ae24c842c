//! Storing notifications in the outbox: each entry written as a temporary
//! file, fsynced and renamed into place, then its ledger line appended.
//! Progress is kept per entry, so a call that fails part-way (disk full)
//! stores the rest, and only the rest, when called again.

use std::collections::{BTreeSet, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{LEDGER_MAX, Ledger, Outbox, OutboxError, Queue, io, ledger_key, lock, sync_dir};
use crate::route::Notification;

impl Outbox {
    /// Durably stores notifications (in order) and wakes their workers.
    /// Returns how many entries were written (ledger duplicates are skipped).
    pub fn enqueue(&self, notifications: &[Notification]) -> Result<usize, OutboxError> {
        let mut queue: VecDeque<Notification> = notifications.iter().cloned().collect();
        self.enqueue_from(&mut queue)
    }

    /// As [`Outbox::enqueue`], taking notifications off the front of
    /// `queue` as they are stored. On an error (disk full, I/O) what was
    /// stored is gone from `queue` and the rest stays, so calling again
    /// once the fault is gone stores each entry exactly once: progress is
    /// kept per entry (a per-event receiver's notification loses each event
    /// as its entry is written).
    pub fn enqueue_from(&self, queue: &mut VecDeque<Notification>) -> Result<usize, OutboxError> {
        let mut ledger = lock(&self.ledger)?;
        // Ledger lines of entries stored by an earlier call whose append failed.
        let mut lines = std::mem::take(&mut ledger.unwritten);
        let mut written: Vec<(Arc<Queue>, u64)> = Vec::new();
        let mut dirs = BTreeSet::new();
        let stored = self.store_front(&mut ledger, queue, &mut written, &mut lines, &mut dirs);
        // Whatever was stored is deliverable now, even if a later step
        // failed, and its ledger lines are appended (or kept for the next
        // call), so a retry or a replay never stores it again.
        for (q, seq) in &written {
            lock(&q.pending)?.insert(*seq);
            q.notify.notify_one();
        }
        let synced = dirs.iter().try_for_each(|d| sync_dir(d));
        if !lines.is_empty() {
            let ledger_path = self.dir.join("ledger.log");
            let appended = ledger
                .file
                .write_all(lines.as_bytes())
                .and_then(|()| ledger.file.sync_data());
            if let Err(e) = appended {
                ledger.unwritten = lines;
                stored?;
                return Err(io("append", &ledger_path)(e));
            }
        }
        stored?;
        synced?;
        if ledger.order.len() > LEDGER_MAX {
            self.compact(&mut ledger)?;
        }
        Ok(written.len())
    }

    /// Stores the front of `queue` entry by entry (see [`Outbox::enqueue_from`]).
    fn store_front(
        &self,
        ledger: &mut Ledger,
        queue: &mut VecDeque<Notification>,
        written: &mut Vec<(Arc<Queue>, u64)>,
        lines: &mut String,
        dirs: &mut BTreeSet<PathBuf>,
    ) -> Result<(), OutboxError> {
        while let Some(n) = queue.front_mut() {
            let q = self
                .queue(&n.receiver)
                .ok_or_else(|| OutboxError::UnknownReceiver(n.receiver.clone()))?;
            if !n.resend {
                let before = n.events.len();
                n.events
                    .retain(|e| !ledger.keys.contains(&ledger_key(&n.receiver, e)));
                q.stats
                    .deduplicated
                    .fetch_add((before - n.events.len()) as u64, Ordering::Relaxed);
            }
            while !n.events.is_empty() {
                let take = if q.per_event { 1 } else { n.events.len() };
                let entry = Notification {
                    events: n.events[..take].to_vec(),
                    ..n.clone()
                };
                let seq = ledger.next_seq;
                let path = self.path(&n.receiver, seq);
                self.write_entry(&path, &entry)?;
                ledger.next_seq += 1;
                dirs.insert(self.dir.join(&n.receiver));
                written.push((q.clone(), seq));
                if !entry.resend {
                    for e in &entry.events {
                        let k = ledger_key(&n.receiver, e);
                        lines.push_str(&k);
                        lines.push('\n');
                        if ledger.keys.insert(k.clone()) {
                            ledger.order.push_back(k);
                        }
                    }
                }
                n.events.drain(..take);
            }
            queue.pop_front();
        }
        Ok(())
    }

    /// Writes one entry as `<seq>.tmp`, fsynced, then renamed into place; a
    /// failed write leaves no `.json` behind.
    fn write_entry(&self, path: &Path, entry: &Notification) -> Result<(), OutboxError> {
        let tmp = path.with_extension("tmp");
        let bytes = serde_json::to_vec(entry)?;
        let stored = File::create(&tmp)
            .map_err(io("create", &tmp))
            .and_then(|mut f| {
                f.write_all(&bytes)
                    .and_then(|()| f.sync_all())
                    .map_err(io("write", &tmp))
            })
            .and_then(|()| fs::rename(&tmp, path).map_err(io("rename", &tmp)));
        if stored.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        stored
    }

    fn compact(&self, ledger: &mut Ledger) -> Result<(), OutboxError> {
        while ledger.order.len() > LEDGER_MAX / 2 {
            if let Some(k) = ledger.order.pop_front() {
                ledger.keys.remove(&k);
            }
        }
        let path = self.dir.join("ledger.log");
        let tmp = self.dir.join("ledger.tmp");
        let mut text = String::new();
        for k in &ledger.order {
            text.push_str(k);
            text.push('\n');
        }
        let mut f = File::create(&tmp).map_err(io("create", &tmp))?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(io("write", &tmp))?;
        fs::rename(&tmp, &path).map_err(io("rename", &tmp))?;
        sync_dir(&self.dir)?;
        ledger.file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io("open", &path))?;
        Ok(())
    }
}
