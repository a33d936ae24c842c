//! JSON lines file: every alert event of a notification appended as one
//! contract line, then fsynced. Local IO failures (disk full) are retried;
//! the outbox keeps the entry meanwhile. Re-sends of firing alerts are not
//! written again (the file is a record of state changes).

use std::io::Write;
use std::path::PathBuf;

use crate::route::Notification;
use crate::sinks::Outcome;

/// A JSON lines file receiver.
#[derive(Debug)]
pub struct FileSink {
    pub(crate) name: String,
    pub(crate) path: PathBuf,
}

fn append(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_data()
}

impl FileSink {
    pub(crate) async fn deliver(&self, batch: &[Notification]) -> Outcome {
        let mut text = String::new();
        for ev in batch.iter().filter(|n| !n.resend).flat_map(|n| &n.events) {
            match serde_json::to_string(ev) {
                Ok(line) => {
                    text.push_str(&line);
                    text.push('\n');
                }
                Err(e) => {
                    return Outcome::Reject {
                        status: 0,
                        answer: format!("cannot encode event: {e}"),
                    };
                }
            }
        }
        if text.is_empty() {
            return Outcome::Accepted;
        }
        let path = self.path.clone();
        match tokio::task::spawn_blocking(move || append(&path, &text)).await {
            Ok(Ok(())) => Outcome::Accepted,
            Ok(Err(e)) => Outcome::Retry {
                after: None,
                reason: format!("cannot append to {}: {e}", self.path.display()),
            },
            Err(e) => Outcome::Retry {
                after: None,
                reason: format!("file writer task failed: {e}"),
            },
        }
    }
}
