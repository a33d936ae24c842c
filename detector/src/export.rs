//! The service's Parquet exports (`datasets::export`): each shard writes its
//! feature rows and risk scores, the alert thread its alert events, to
//! `<dir>/<table>/date=…/hour=…/part-….parquet`, rolled atomically by event
//! hour. These files are what `forewarn train` reads. A write error is
//! logged and counted; it never stops scoring.
//!
//! Writers of one `instance` take a lock (`<dir>/.forewarn-export-<instance>.lock`)
//! before touching the directory: opening a writer removes its own id's
//! leftover temporary files, which in a second process with the same
//! instance would be the first one's files being written. Processes with
//! different instances may share a directory (their file names differ).
//! Every writer of this process holds the same lock ([`export_lock`]).

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};

use alerts::DirLock;
use anyhow::Context;

use alerts::AlertEvent;
use datasets::export::{
    AlertRow, AlertTable, ExportConfig, FeatureTable, PartitionedWriter, ScoreRow, ScoreTable,
};
use features::FeatureRow;

use crate::assess::{Assessment, Kind};

/// Export settings (validated config).
#[derive(Debug, Clone, PartialEq)]
pub struct ExportSettings {
    pub dir: PathBuf,
    /// Write feature rows (the bulk of the bytes).
    pub features: bool,
    /// Keep every Nth feature row per GPU.
    pub feature_sample_every: NonZeroU32,
    /// Writer ids must be unique per process and stable across restarts.
    pub instance: String,
}

/// The lock on `s.dir` for `s.instance`, shared by all of this process's
/// writers (they open one after another; the last one dropped releases
/// it). Another process holding it is an error naming its pid.
pub fn export_lock(s: &ExportSettings) -> anyhow::Result<Arc<DirLock>> {
    static HELD: Mutex<BTreeMap<PathBuf, Weak<DirLock>>> = Mutex::new(BTreeMap::new());
    std::fs::create_dir_all(&s.dir)
        .with_context(|| format!("creating export directory {}", s.dir.display()))?;
    let name = alerts::dirlock::export_lock(&s.instance);
    // One key however the directory is spelled.
    let key = std::fs::canonicalize(&s.dir)
        .with_context(|| format!("resolving export directory {}", s.dir.display()))?
        .join(&name);
    let mut held = HELD
        .lock()
        .map_err(|_| anyhow::anyhow!("export lock table poisoned"))?;
    if let Some(lock) = held.get(&key).and_then(Weak::upgrade) {
        return Ok(lock);
    }
    let lock = Arc::new(DirLock::acquire(&s.dir, &name, "export")?);
    held.retain(|_, l| l.strong_count() > 0);
    held.insert(key, Arc::downgrade(&lock));
    Ok(lock)
}

/// A writer's health (component `export:<writer>`): degraded while its
/// writes fail, up again at the next success. Only transitions touch the
/// registry, so a healthy writer costs one branch per row.
#[derive(Default)]
struct WriterHealth {
    state: Option<crate::state::State>,
    name: String,
    failing: bool,
}

impl WriterHealth {
    fn attach(&mut self, state: crate::state::State, name: String) {
        state.health.register(&name, false);
        self.state = Some(state);
        self.name = name;
    }

    fn ok(&mut self) {
        if self.failing {
            self.failing = false;
            if let Some(s) = &self.state {
                s.health.up(&self.name);
            }
        }
    }

    fn failed(&mut self, e: &dyn std::fmt::Display) {
        if !self.failing {
            self.failing = true;
            if let Some(s) = &self.state {
                s.health.degraded(&self.name, e);
            }
        }
    }
}

/// One shard's writers.
pub struct ShardExports {
    health: WriterHealth,
    features: Option<PartitionedWriter<FeatureTable>>,
    scores: PartitionedWriter<ScoreTable>,
    model_version: Arc<str>,
    errors: u64,
    _lock: Arc<DirLock>,
}

impl std::fmt::Debug for ShardExports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardExports")
            .field("errors", &self.errors)
            .finish()
    }
}

impl ShardExports {
    pub fn open(s: &ExportSettings, shard: usize) -> anyhow::Result<Self> {
        let lock = export_lock(s)?;
        let id = format!("{}-shard{shard}", s.instance);
        let features = if s.features {
            let mut cfg = ExportConfig::new(&s.dir, id.clone());
            cfg.sample_every = s.feature_sample_every;
            Some(PartitionedWriter::new(FeatureTable::new(), cfg)?)
        } else {
            None
        };
        let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        let scores =
            PartitionedWriter::new(ScoreTable::new(&names)?, ExportConfig::new(&s.dir, id))?;
        Ok(ShardExports {
            features,
            scores,
            model_version: crate::state::BUILTIN_VERSION.into(),
            errors: 0,
            _lock: lock,
            health: WriterHealth::default(),
        })
    }

    /// Reports write faults as component `export:shard-<n>`.
    pub fn report_to(&mut self, state: crate::state::State, shard: usize) {
        self.health.attach(state, format!("export:shard-{shard}"));
    }

    /// Score rows from now on name this model version.
    pub fn set_model_version(&mut self, version: String) {
        self.model_version = version.into();
    }

    fn note(&mut self, r: Result<(), datasets::export::ExportError>) {
        match &r {
            Ok(()) => self.health.ok(),
            Err(e) => self.health.failed(e),
        }
        if let Err(e) = r {
            self.errors += 1;
            if self.errors.is_power_of_two() {
                tracing::warn!(error = %e, errors = self.errors, "Parquet export failed");
            }
        }
    }

    pub fn rows(&mut self, rows: &[FeatureRow]) {
        if let Some(w) = &mut self.features {
            let r = w.push_all(rows);
            self.note(r);
        }
    }

    pub fn assessment(&mut self, a: &Assessment) {
        let row = ScoreRow {
            ts_ms: a.ts_ms,
            gpu: a.gpu.clone(),
            host: a.topo.host.clone(),
            rack: a.topo.rack.clone(),
            cluster: a.topo.cluster.clone(),
            job: a.topo.job.clone(),
            risk: a.risk as f32,
            state: a.state.as_str().into(),
            kind: (a.risk > 0.0).then(|| a.kind.as_str().into()),
            components: a.components.to_vec(),
            reasons: a
                .reasons
                .iter()
                .map(|r| r.detail.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            eta_hours: a.eta_hours.map(|e| e as f32),
            model_version: self.model_version.clone(),
        };
        let r = self.scores.push(&row);
        self.note(r);
    }
}

/// The alert thread's writer.
pub struct AlertExports {
    health: WriterHealth,
    writer: PartitionedWriter<AlertTable>,
    errors: u64,
    _lock: Arc<DirLock>,
}

impl AlertExports {
    pub fn open(s: &ExportSettings) -> anyhow::Result<Self> {
        let lock = export_lock(s)?;
        let cfg = ExportConfig::new(&s.dir, format!("{}-alerts", s.instance));
        Ok(AlertExports {
            writer: PartitionedWriter::new(AlertTable::new(), cfg)?,
            errors: 0,
            _lock: lock,
            health: WriterHealth::default(),
        })
    }

    /// Reports write faults as component `export:alerts`.
    pub fn report_to(&mut self, state: crate::state::State) {
        self.health.attach(state, "export:alerts".to_owned());
    }

    pub fn events(&mut self, events: &[AlertEvent]) {
        for e in events {
            let r = serde_json::to_string(e)
                .map_err(|e| e.to_string())
                .and_then(|j| AlertRow::from_json(&j).map_err(|e| e.to_string()))
                .and_then(|row| self.writer.push(&row).map_err(|e| e.to_string()));
            match &r {
                Ok(()) => self.health.ok(),
                Err(e) => self.health.failed(e),
            }
            if let Err(e) = r {
                self.errors += 1;
                if self.errors.is_power_of_two() {
                    tracing::warn!(error = %e, errors = self.errors, "alert export failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(dir: &std::path::Path, instance: &str) -> ExportSettings {
        ExportSettings {
            dir: dir.to_owned(),
            features: false,
            feature_sample_every: NonZeroU32::MIN,
            instance: instance.into(),
        }
    }

    #[test]
    fn one_process_per_instance_and_directory_and_its_writers_share_the_lock() {
        let dir = std::env::temp_dir().join(format!("fw-export-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = settings(&dir, "a");
        let shard = ShardExports::open(&s, 0).expect("shard");
        let alerts = AlertExports::open(&s).expect("alert writer shares the lock");
        // Another process is another open file description: the same
        // conflict as DirLock::acquire beside ours.
        let lock = alerts::dirlock::export_lock(&s.instance);
        let e = DirLock::acquire(&dir, &lock, "export").expect_err("held");
        assert!(
            e.to_string()
                .contains("is locked by another forewarn process"),
            "{e}"
        );
        // Another instance may share the directory.
        let _b = AlertExports::open(&settings(&dir, "b")).expect("instance b");
        drop(shard);
        drop(alerts);
        DirLock::acquire(&dir, &lock, "export").expect("released with its last writer");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
