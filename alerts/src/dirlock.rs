//! One owner per state directory: the outbox here, and the detector's
//! checkpoint and export directories, each hold a [`DirLock`] for as long
//! as they are open. Two processes writing one outbox would send every
//! notification twice and delete each other's entries; two writing one
//! checkpoint directory would restore a mix. The second process gets
//! [`LockError::Held`] naming the directory and the holder's pid instead.
//!
//! Each role has its own lock file, so one directory may serve as, say,
//! both the outbox and the checkpoint directory of one process.
//!
//! The lock is the OS's advisory lock on `<dir>/<name>` (`flock` on Linux,
//! through std's `File::try_lock`), not the file's existence: the kernel
//! drops it when the holder dies, so a crashed instance never blocks its
//! restart, and a stale lock file on disk means nothing. The holder writes
//! its pid into the file only so the error can name it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The outbox's lock file.
pub const OUTBOX_LOCK: &str = ".forewarn-outbox.lock";
/// The detector's checkpoint store's lock file.
pub const CHECKPOINT_LOCK: &str = ".forewarn-checkpoint.lock";

/// The lock file of the detector's Parquet writers of `instance` (several
/// instances may share an export directory).
pub fn export_lock(instance: &str) -> String {
    format!(".forewarn-export-{instance}.lock")
}

/// Taking a directory lock failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another open file (normally another process) holds the lock.
    #[error(
        "{} is locked by another forewarn process{}: two processes must not share one {what} directory; stop the other one, or give this one its own directory (lock file {})",
        dir.display(),
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        lock.display()
    )]
    Held {
        /// What the directory holds ("outbox", "checkpoint", …).
        what: &'static str,
        /// The directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
        /// The holder's pid, when its lock file says it.
        holder: Option<u32>,
    },
    /// The lock file could not be created, read or locked.
    #[error("locking the {what} directory {}: {source}", lock.display())]
    Io {
        /// What the directory holds.
        what: &'static str,
        /// The lock file.
        lock: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
}

impl LockError {
    /// Whether another holder has it (as opposed to an IO failure).
    pub fn is_held(&self) -> bool {
        matches!(self, LockError::Held { .. })
    }
}

/// An exclusive lock on a directory, released on drop (or by the kernel
/// when the process dies).
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    // Held open: closing the file releases the lock.
    _file: File,
}

impl DirLock {
    /// Locks `dir` (which must exist) through the file `dir/name`; `what`
    /// names the directory's role in the error.
    pub fn acquire(dir: &Path, name: &str, what: &'static str) -> Result<Self, LockError> {
        let path = dir.join(name);
        let io = |source| LockError::Io {
            what,
            lock: path.clone(),
            source,
        };
        // Not truncated on open: the holder's pid must stay readable.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let holder = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok());
                return Err(LockError::Held {
                    what,
                    dir: dir.to_owned(),
                    lock: path,
                    holder,
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        // The pid only names the holder in a second process's error: a
        // full disk must not stop a start (the outbox then waits for space,
        // degraded), so a failed write leaves the lock, held, without it.
        let named = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        if let Err(e) = named {
            tracing::warn!(lock = %path.display(), error = %e, "lock held, but the pid could not be written into it");
        }
        Ok(DirLock { path, _file: file })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_pid_and_a_dropped_lock_is_free() {
        let dir = std::env::temp_dir().join(format!("fw-dirlock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let first = DirLock::acquire(&dir, OUTBOX_LOCK, "outbox").expect("first");
        assert_eq!(first.path(), dir.join(OUTBOX_LOCK));
        // A second open file description conflicts even in one process,
        // as a second process would.
        let err = DirLock::acquire(&dir, OUTBOX_LOCK, "outbox").expect_err("held");
        assert!(err.is_held());
        let msg = err.to_string();
        assert!(
            msg.contains("is locked by another forewarn process")
                && msg.contains(&format!("(pid {})", std::process::id()))
                && msg.contains("outbox directory"),
            "{msg}"
        );
        // What a crash leaves (the file, no holder) does not block.
        drop(first);
        assert!(dir.join(OUTBOX_LOCK).exists());
        let again = DirLock::acquire(&dir, OUTBOX_LOCK, "outbox").expect("relock after drop");
        drop(again);
        // Another role in the same directory is another lock.
        let _a = DirLock::acquire(&dir, OUTBOX_LOCK, "outbox").expect("outbox");
        let _b = DirLock::acquire(&dir, CHECKPOINT_LOCK, "checkpoint").expect("checkpoint");
        let _c = DirLock::acquire(&dir, &export_lock("a"), "export").expect("export a");
        let missing = DirLock::acquire(&dir.join("nope"), OUTBOX_LOCK, "outbox").expect_err("io");
        assert!(!missing.is_held(), "{missing}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_outbox_has_one_owner() {
        use crate::outbox::{Outbox, OutboxError};
        let dir = std::env::temp_dir().join(format!("fw-dirlock-outbox-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let receivers = [("file".to_owned(), true)];
        let first = Outbox::open(&dir, &receivers).expect("first");
        let err = Outbox::open(&dir, &receivers).expect_err("second");
        assert!(
            matches!(&err, OutboxError::Locked(e) if e.is_held()),
            "{err}"
        );
        assert!(err.to_string().contains("alert outbox directory"), "{err}");
        drop(first);
        Outbox::open(&dir, &receivers).expect("reopened after the owner is gone");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
