//! Failure-model hot reload. The service swaps in a new model artifact
//! without a restart: dropped into the models directory (`models.dir`,
//! polled every `models.watch_interval_s`) or on `POST /v1/models/reload`.
//! The new model travels to every shard through its input channel, in
//! order with the data, so each sample is scored by exactly one model. An
//! artifact that does not load (wrong feature schema, damaged file) is
//! refused with the loader's message, counted, and the running model stays.
//! A refused file is not retried until it changes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use models::failure::{FailureModel, FailureModelError};

use crate::state::SharedState;
pub use crate::state::{BUILTIN_VERSION, ModelStatus};

/// The model version reported on `/metrics`, `/v1/fleet` and in exports.
pub fn version_of(model: Option<&FailureModel>) -> String {
    match model {
        Some(m) => format!(
            "{BUILTIN_VERSION}+{}-{}",
            m.primary.as_str(),
            m.meta.created
        ),
        None => BUILTIN_VERSION.to_owned(),
    }
}

/// Loads the artifact at `path`, if any, for the pipeline (`serve`,
/// `backtest`, `evaluate`).
pub fn load_model(path: Option<&Path>) -> anyhow::Result<Option<Arc<FailureModel>>> {
    use anyhow::Context as _;
    let Some(path) = path else { return Ok(None) };
    let m = FailureModel::load(path)
        .with_context(|| format!("loading the failure model {}", path.display()))?;
    tracing::info!(
        model = %path.display(),
        trained = %m.meta.created,
        horizon_h = m.meta.horizon_h,
        alarms_by = m.primary.as_str(),
        threshold = m.alarm_threshold(),
        "failure model loaded"
    );
    Ok(Some(Arc::new(m)))
}

/// Where a reloaded model goes: the running pipeline's shards (implemented
/// by `pipeline::PipelineHandle`; a trait so that reloads need not know the
/// pipeline, which itself reports [`version_of`]).
pub trait ModelTarget {
    /// Hands `model` to every shard, in order with the data; `false` when
    /// the pipeline has stopped.
    fn swap_model(&self, model: Arc<FailureModel>) -> bool;
}

/// Why a reload did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(
        "no model source is configured: start with --model FILE or set models.failure / models.dir"
    )]
    NoSource,
    #[error("{0} has no *.fwm artifact")]
    EmptyDir(String),
    #[error("refused, the running model stays: {0}")]
    Refused(#[from] FailureModelError),
    #[error("the pipeline is not running")]
    NotRunning,
}

/// Where models come from, and what was tried last.
#[derive(Debug)]
pub struct ModelSlot {
    file: Option<PathBuf>,
    dir: Option<PathBuf>,
    /// The artifact and its stamp last tried (loaded or refused).
    tried: Mutex<Option<(PathBuf, Stamp)>>,
}

/// Enough to notice a replaced file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
    })
}

/// The newest `*.fwm` in `dir` (by modification time, then name), skipping
/// hidden and temporary files so a half-copied artifact is not picked up
/// when it is written under another name and renamed in.
pub fn newest_in(dir: &Path) -> std::io::Result<Option<PathBuf>> {
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || path.extension().is_none_or(|e| e != "fwm") {
            continue;
        }
        let Ok(modified) = std::fs::metadata(&path).and_then(|m| m.modified()) else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|(t, p)| (modified, &path) > (*t, p))
        {
            best = Some((modified, path));
        }
    }
    Ok(best.map(|(_, p)| p))
}

impl ModelSlot {
    pub fn new(file: Option<PathBuf>, dir: Option<PathBuf>) -> Self {
        ModelSlot {
            file,
            dir,
            tried: Mutex::new(None),
        }
    }

    /// The artifact a reload would load now: the newest in the directory,
    /// else the configured file.
    fn candidate(&self) -> Result<PathBuf, ReloadError> {
        if let Some(dir) = &self.dir {
            match newest_in(dir) {
                Ok(Some(p)) => return Ok(p),
                Ok(None) if self.file.is_none() => {
                    return Err(ReloadError::EmptyDir(dir.display().to_string()));
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(ReloadError::Refused(FailureModelError::Io {
                        path: dir.display().to_string(),
                        source: e,
                    }));
                }
            }
        }
        self.file.clone().ok_or(ReloadError::NoSource)
    }

    /// The model to start with (none configured: `Ok(None)`). A model that
    /// does not load stops the start: the operator asked for it.
    pub fn initial(&self, state: &SharedState) -> anyhow::Result<Option<Arc<FailureModel>>> {
        let path = match self.candidate() {
            Ok(p) => p,
            Err(ReloadError::NoSource | ReloadError::EmptyDir(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let st = stamp(&path);
        let m = load_model(Some(&path))?;
        if let (Some(m), Some(st)) = (&m, st) {
            self.remember(&path, st);
            state.set_model_status(|s| loaded(s, &path, m));
        }
        Ok(m)
    }

    fn remember(&self, path: &Path, st: Stamp) {
        if let Ok(mut t) = self.tried.lock() {
            *t = Some((path.to_path_buf(), st));
        }
    }

    /// Loads the candidate artifact and hands it to the pipeline.
    pub fn reload(
        &self,
        state: &SharedState,
        target: &dyn ModelTarget,
    ) -> Result<ModelStatus, ReloadError> {
        let path = self.candidate()?;
        if let Some(st) = stamp(&path) {
            self.remember(&path, st);
        }
        let result = FailureModel::load(&path)
            .map_err(ReloadError::from)
            .and_then(|m| {
                let m = Arc::new(m);
                if !target.swap_model(m.clone()) {
                    return Err(ReloadError::NotRunning);
                }
                Ok(m)
            });
        match result {
            Ok(m) => {
                tracing::info!(model = %path.display(), trained = %m.meta.created, "failure model reloaded");
                Ok(state.set_model_status(|s| {
                    loaded(s, &path, &m);
                    s.reloads += 1;
                }))
            }
            Err(e) => {
                tracing::warn!(model = %path.display(), error = %e, "model reload refused");
                state.set_model_status(|s| {
                    s.refused += 1;
                    s.last_error = Some(format!("{}: {e}", path.display()));
                });
                Err(e)
            }
        }
    }

    /// One watch tick: reloads when the directory's newest artifact is not
    /// the one tried last (new, replaced or rewritten).
    pub fn poll(&self, state: &SharedState, target: &dyn ModelTarget) {
        let Some(dir) = &self.dir else { return };
        let Ok(Some(path)) = newest_in(dir) else {
            return;
        };
        let Some(st) = stamp(&path) else { return };
        let same = self
            .tried
            .lock()
            .map(|t| t.as_ref().is_some_and(|(p, s)| *p == path && *s == st))
            .unwrap_or(true);
        if !same {
            let _ = self.reload(state, target);
        }
    }

    /// Whether a directory is watched.
    pub fn watches(&self) -> bool {
        self.dir.is_some()
    }
}

fn loaded(s: &mut ModelStatus, path: &Path, m: &FailureModel) {
    s.version = version_of(Some(m));
    s.path = Some(path.to_path_buf());
    s.trained = Some(m.meta.created.clone());
    s.horizon_h = Some(m.meta.horizon_h);
    s.feature_schema_version = Some(m.feature_schema_version);
    s.loaded_at_ms = Some(crate::checkpoint::wall_ms());
    s.last_error = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::alerting::AlertStage;
    use crate::pipeline::{AlertSink, Pipeline};

    struct Null;
    impl AlertSink for Null {
        fn deliver(&mut self, _: &[alerts::AlertEvent], _: i64) -> anyhow::Result<()> {
            Ok(())
        }
    }

    fn model(created: &str) -> FailureModel {
        crate::assess::predict::constant_model(created)
    }

    fn touch(path: &Path, secs: u64) {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(t))
            .expect("set mtime");
    }

    #[test]
    fn a_new_artifact_is_swapped_in_and_a_mismatched_one_refused() {
        let dir = std::env::temp_dir().join(format!("fw-models-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let (cfg, pcfg) = crate::pipeline::restart_tests::test_config(1);
        let state = crate::state::SharedState::new();
        let slot = ModelSlot::new(None, Some(dir.clone()));
        assert!(slot.initial(&state).expect("empty dir is fine").is_none());
        assert_eq!(state.model_version(), BUILTIN_VERSION);

        let stage = AlertStage::new(alerts::AlertEngine::new(cfg.alerts.engine.clone()));
        let mut p = Pipeline::start(
            pcfg.new_shards().expect("shards"),
            stage,
            Box::new(Null),
            state.clone(),
            None,
        )
        .expect("start");
        let h = p.handle();
        let mut sim = datasets::simulator::Simulator::new(datasets::simulator::SimConfig {
            gpus: 16,
            hours: 1.0,
            ..Default::default()
        })
        .expect("sim");
        let mut send_ticks = |p: &mut Pipeline, n: usize| {
            for _ in 0..n {
                let mut out = Vec::new();
                sim.next_tick(&mut out);
                p.send(out).expect("send");
            }
        };
        send_ticks(&mut p, 5);

        // A good artifact appears: the watch swaps it in.
        let good = dir.join("a.fwm");
        model("2026-11-30T01:00:00Z").save(&good).expect("save");
        touch(&good, 1_000);
        slot.poll(&state, &h);
        let s = state.model.read().expect("lock").clone();
        assert_eq!(s.reloads, 1, "{s:?}");
        assert!(state.model_version().ends_with("gbdt-2026-11-30T01:00:00Z"));
        send_ticks(&mut p, 5);

        // A newer one of another feature schema: refused, the model stays,
        // and it is not retried until it changes.
        let bad = dir.join("b.fwm");
        let text = serde_json::to_string(&model("2026-11-30T02:00:00Z")).expect("json");
        let mut v: serde_json::Value = serde_json::from_str(&text).expect("value");
        v["feature_schema_version"] = serde_json::json!(9_999);
        std::fs::write(&bad, v.to_string()).expect("write");
        touch(&bad, 2_000);
        slot.poll(&state, &h);
        slot.poll(&state, &h);
        let s = state.model.read().expect("lock").clone();
        assert_eq!((s.reloads, s.refused), (1, 1), "{s:?}");
        assert!(
            s.last_error.as_deref().unwrap_or("").contains("schema"),
            "{s:?}"
        );
        assert!(state.model_version().ends_with("gbdt-2026-11-30T01:00:00Z"));
        // An explicit reload says why, too.
        let e = slot.reload(&state, &h).expect_err("refused");
        assert!(matches!(e, ReloadError::Refused(_)), "{e}");

        // The shards kept their rounds aligned through the swaps.
        send_ticks(&mut p, 5);
        let (summary, _) = p.finish().expect("finish");
        assert_eq!(summary.gpus, 16);
        assert!(summary.assessments > 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
