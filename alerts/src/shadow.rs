//! Shadow log: where shadow routes' notifications go instead of the outbox.
//! One JSON line per notification (the outbox entry's shape plus
//! `"shadow": true`), so what a new rule or model *would* have sent can be
//! read, diffed against the live receivers, or replayed. The file is opened
//! on the first shadow notification; with no shadow route it never exists.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use crate::route::Notification;

/// Appends shadow notifications to a JSON-lines file.
#[derive(Debug)]
pub struct ShadowLog {
    path: PathBuf,
    file: Option<BufWriter<File>>,
    written: u64,
}

impl ShadowLog {
    pub fn new(path: PathBuf) -> Self {
        ShadowLog {
            path,
            file: None,
            written: 0,
        }
    }

    /// Appends `notifications` and flushes.
    pub fn record(&mut self, notifications: &[Notification]) -> std::io::Result<()> {
        if notifications.is_empty() {
            return Ok(());
        }
        let f = match &mut self.file {
            Some(f) => f,
            None => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)?;
                self.file.insert(BufWriter::new(file))
            }
        };
        for n in notifications {
            serde_json::to_writer(&mut *f, n)?;
            f.write_all(b"\n")?;
        }
        f.flush()?;
        self.written += notifications.len() as u64;
        Ok(())
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Notifications recorded so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}
