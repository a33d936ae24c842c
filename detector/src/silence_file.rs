//! Silences made through the REST API, kept on disk so that they survive a
//! restart in every mode. Checkpoints hold them too, but only the Kafka
//! source writes checkpoints, and only every `checkpoint.interval`: with
//! the simulator or files, or between two checkpoints, a silence an
//! operator added would be gone after a restart and its alerts page again.
//!
//! The alert thread rewrites the whole file after every silence command
//! (`pipeline::alert_thread`): a few KB, atomically (`.tmp`, fsync,
//! rename, fsync of the directory), so it is whole or the previous one.
//! At start (`commands::serve::restore`) it is applied over the engine
//! the config or the checkpoint built: being written on every change it is
//! never older than a checkpoint's copy, so it wins. Silences that ended
//! before the wall clock's now are dropped. Config silences come from the
//! config; the file only carries their early end (`DELETE` of a config
//! silence), and only while the config still has that silence.
//!
//! Where: `api.silences_file` when set, else `silences.json` in the
//! checkpoint directory when there is one (it moves with the state it
//! belongs to, under the same lock), else `forewarn-silences.json` in the
//! working directory.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use alerts::matcher::{Matcher, MatcherSpec};
use alerts::{AlertEngine, Silence};
use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Version of the file's layout.
const FILE_VERSION: u32 = 1;

/// The file in a checkpoint directory.
pub const IN_CHECKPOINT_DIR: &str = "silences.json";

#[derive(Serialize, Deserialize)]
struct FileBody {
    version: u32,
    silences: Vec<SilenceRecord>,
}

/// One silence as this file and the fleet topic (`crate::fleet`) carry
/// it: times in epoch ms (an expired silence may end before it starts,
/// which the REST shape refuses), matchers in their JSON shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SilenceRecord {
    pub id: String,
    pub matchers: Vec<MatcherSpec>,
    pub starts_at_ms: i64,
    pub ends_at_ms: i64,
    pub created_by: String,
    pub comment: String,
}

impl From<&Silence> for SilenceRecord {
    fn from(s: &Silence) -> Self {
        SilenceRecord {
            id: s.id.clone(),
            matchers: s.matchers.iter().map(Matcher::spec).collect(),
            starts_at_ms: s.starts_at_ms,
            ends_at_ms: s.ends_at_ms,
            created_by: s.created_by.clone(),
            comment: s.comment.clone(),
        }
    }
}

impl SilenceRecord {
    /// The silence, its matchers compiled (a bad one names the silence).
    pub fn to_silence(&self) -> anyhow::Result<Silence> {
        let matchers = self
            .matchers
            .iter()
            .map(Matcher::from_spec)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("silence {:?}", self.id))?;
        Ok(Silence {
            id: self.id.clone(),
            matchers,
            starts_at_ms: self.starts_at_ms,
            ends_at_ms: self.ends_at_ms,
            created_by: self.created_by.clone(),
            comment: self.comment.clone(),
        })
    }
}

/// What [`SilenceFile::apply`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// Run-time silences restored.
    pub restored: usize,
    /// Config silences ended early.
    pub ended_early: usize,
    /// Dropped: ended, or config silences no longer in the config.
    pub dropped: usize,
}

/// The silences' state file.
#[derive(Debug, Clone)]
pub struct SilenceFile {
    path: PathBuf,
}

impl SilenceFile {
    /// The file at `path` (nothing is read or written yet).
    pub fn new(path: PathBuf) -> Self {
        SilenceFile { path }
    }

    /// Where it is, from the config: `explicit`, else in the checkpoint
    /// directory, else `forewarn-silences.json`.
    pub fn locate(explicit: Option<&Path>, checkpoint_dir: Option<&Path>) -> Self {
        let path = match (explicit, checkpoint_dir) {
            (Some(p), _) => p.to_owned(),
            (None, Some(d)) => d.join(IN_CHECKPOINT_DIR),
            (None, None) => PathBuf::from("forewarn-silences.json"),
        };
        SilenceFile::new(path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file by `list`, atomically.
    pub fn save(&self, list: &[Silence]) -> anyhow::Result<()> {
        let body = FileBody {
            version: FILE_VERSION,
            silences: list.iter().map(SilenceRecord::from).collect(),
        };
        let bytes = serde_json::to_vec_pretty(&body).context("encoding silences")?;
        let name = self.path.display();
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            let mut f =
                File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
            f.write_all(&bytes)
                .and_then(|()| f.sync_all())
                .with_context(|| format!("writing {}", tmp.display()))?;
        }
        fs::rename(&tmp, &self.path)
            .with_context(|| format!("renaming {} to {name}", tmp.display()))?;
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("syncing {}", dir.display()))
    }

    /// [`SilenceFile::save`] from the alert thread: a failure is logged at
    /// ERROR (the silence is in force, but would not survive a restart)
    /// and the next change tries again.
    pub fn save_logged(&self, list: &[Silence]) {
        if let Err(e) = self.save(list) {
            tracing::error!(
                file = %self.path.display(),
                error = format!("{e:#}"),
                "silences not saved: they are in force but a restart would lose the changes since the last save"
            );
        }
    }

    /// The records in the file; none when it does not exist. A file that
    /// does not parse is an error naming it (never silently ignored: the
    /// silences it holds would page).
    fn load(&self) -> anyhow::Result<Vec<SilenceRecord>> {
        let bytes = match fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("reading {}", self.path.display())),
        };
        let body: FileBody = serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} is not a silences file: fix it, or move it away to start without the silences it holds",
                self.path.display()
            )
        })?;
        anyhow::ensure!(
            body.version == FILE_VERSION,
            "{} has silences file version {}, this build reads {FILE_VERSION}",
            self.path.display(),
            body.version
        );
        Ok(body.silences)
    }

    /// Applies the file over `engine` (built from the config, or restored
    /// from a checkpoint): run-time silences are upserted unless they
    /// ended before `now_ms`; config silences (`config` is the config's
    /// list) only carry an early end. A silence whose matchers no longer
    /// build is skipped with a warning.
    pub fn apply(
        &self,
        engine: &mut AlertEngine,
        config: &[Silence],
        now_ms: i64,
    ) -> anyhow::Result<Applied> {
        let mut done = Applied::default();
        for r in self.load()? {
            if r.id.starts_with("config-") || config.iter().any(|c| c.id == r.id) {
                let saved = r.to_silence().ok();
                match saved.and_then(|s| config.iter().find(|c| c.same_but_end(&s))) {
                    Some(c) if r.ends_at_ms < c.ends_at_ms => {
                        engine.expire_silence(&r.id, r.ends_at_ms);
                        done.ended_early += 1;
                    }
                    Some(_) => {}
                    None => done.dropped += 1,
                }
                continue;
            }
            if r.ends_at_ms <= now_ms {
                done.dropped += 1;
                continue;
            }
            match r.to_silence() {
                Ok(s) => {
                    engine.add_silence(s);
                    done.restored += 1;
                }
                Err(e) => {
                    tracing::warn!(file = %self.path.display(), error = format!("{e:#}"), "silence skipped");
                    done.dropped += 1;
                }
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    fn silence(id: &str, rack: &str, starts: i64, ends: i64) -> Silence {
        let body = format!(
            r#"{{"matchers":[{{"name":"rack","value":"{rack}","isRegex":false}}],"startsAt":"{}","endsAt":"{}","createdBy":"alice","comment":"CDU swap"}}"#,
            alerts::time::format_rfc3339(starts),
            alerts::time::format_rfc3339(ends)
        );
        Silence::from_json(&body, id.into()).expect("silence")
    }

    fn engine(config: &[Silence]) -> AlertEngine {
        let mut cfg = crate::config::RawConfig::default()
            .validate()
            .expect("defaults")
            .alerts
            .engine;
        cfg.silences = config.to_vec();
        AlertEngine::new(cfg)
    }

    #[test]
    fn saved_silences_come_back_over_a_fresh_or_restored_engine() {
        let dir = std::env::temp_dir().join(format!("fw-silences-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("dir");
        let f = SilenceFile::locate(None, Some(&dir));
        assert_eq!(f.path(), dir.join(IN_CHECKPOINT_DIR));
        let now = 1_800_000_000_000;
        let config = [
            silence("config-0", "r01", now - DAY, now + DAY),
            silence("config-1", "r02", now - DAY, now + DAY),
        ];
        let mut live = engine(&config);
        // Nothing saved yet: nothing changes.
        assert_eq!(
            f.apply(&mut live, &config, now).expect("apply"),
            Applied::default()
        );
        live.add_silence(silence("api-1", "r07", now - DAY, now + DAY));
        live.add_silence(silence("api-2", "r08", now - 3 * DAY, now - 2 * DAY));
        // Expired before it started: ends before it starts.
        live.add_silence(silence("api-3", "r09", now + DAY, now + 2 * DAY));
        assert!(live.expire_silence("api-3", now));
        assert!(live.expire_silence("config-1", now - 1000));
        f.save(live.silences()).expect("save");
        assert!(!dir.join("silences.json.tmp").exists());

        // Restart: the file over a fresh engine.
        let mut back = engine(&config);
        let done = f.apply(&mut back, &config, now).expect("apply");
        assert_eq!(
            done,
            Applied {
                restored: 1,
                ended_early: 1,
                dropped: 2
            }
        );
        let ids: Vec<&str> = back.silences().iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["config-0", "config-1", "api-1"]);
        assert_eq!(back.silences()[1].ends_at_ms, now - 1000);
        assert_eq!(back.silences()[2], live.silences()[2]);
        // The config changed: its old silence's early end is not carried over.
        let new_config = [silence("config-1", "r03", now - DAY, now + DAY)];
        let mut other = engine(&new_config);
        let done = f.apply(&mut other, &new_config, now).expect("apply");
        assert_eq!(done.ended_early, 0);
        assert_eq!(other.silences()[0].ends_at_ms, now + DAY);

        // A damaged file is an error naming it.
        fs::write(f.path(), b"{\"version\":1,\"silen").expect("write");
        let e = f.apply(&mut engine(&[]), &[], now).expect_err("damaged");
        assert!(format!("{e:#}").contains("silences.json"), "{e:#}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_path_follows_the_config() {
        let p = Path::new("/x/s.json");
        assert_eq!(
            SilenceFile::locate(Some(p), Some(Path::new("/c"))).path(),
            p
        );
        assert_eq!(
            SilenceFile::locate(None, None).path(),
            Path::new("forewarn-silences.json")
        );
    }
}
