//! `forewarn promote`: the last step of the retraining loop. Copies the
//! challenger of a verdict (`forewarn evaluate --challenger … --verdict
//! FILE`) into the service's models directory (`models.dir`), where the
//! running service picks it up without a restart (`crate::reload`: the
//! newest `*.fwm` wins, hidden and temporary names are skipped).
//!
//! Only a winner is copied: a verdict whose champion won, or whose
//! challenger file changed since it was evaluated (its FNV-1a hash), is
//! refused with the reasons and a non-zero exit. The copy is atomic: the
//! bytes go to a hidden `.….fwm.tmp` in the directory, are fsynced, then
//! renamed to `model-<trained time>.fwm`, so the watcher never loads half a
//! file and earlier models stay for a rollback.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use crate::commands::evaluate::verdict::Verdict;

/// Copy the winning challenger of a verdict into the models directory.
#[derive(Args, Debug)]
pub struct PromoteArgs {
    /// The verdict `forewarn evaluate --challenger` wrote.
    #[arg(long, default_value = "verdict.json")]
    pub verdict: PathBuf,
    /// The service's `models.dir`.
    #[arg(long)]
    pub models_dir: PathBuf,
}

/// Why nothing was promoted (exit 1, the message says why).
#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    #[error("not promoted: the champion stays ({0})")]
    Lost(String),
    #[error(
        "not promoted: {path} changed since it was evaluated (hash {now}, verdict {then}): evaluate it again"
    )]
    Changed {
        path: String,
        now: String,
        then: String,
    },
}

/// The file name a promoted model gets: its training time, so names sort
/// and never collide.
fn target_name(created: &str) -> String {
    let stamp: String = created
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("model-{stamp}.fwm")
}

/// Copies `src` into `dir` as `name` atomically; returns the final path.
pub fn install(src_bytes: &[u8], dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".{name}.tmp"));
    let dst = dir.join(name);
    let mut f =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(src_bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, &dst)
        .with_context(|| format!("renaming {} to {}", tmp.display(), dst.display()))?;
    // The rename itself survives a crash once the directory is synced.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(dst)
}

/// Runs `forewarn promote`.
pub fn run(args: &PromoteArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.verdict)
        .with_context(|| format!("reading {}", args.verdict.display()))?;
    let v: Verdict = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a verdict", args.verdict.display()))?;
    if !v.promotes() {
        return Err(PromoteError::Lost(v.reasons().join("; ")).into());
    }
    let src = Path::new(&v.challenger_path);
    let bytes = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    let now = format!("{:016x}", features::hash::fnv1a(&bytes));
    if now != v.challenger_hash {
        return Err(PromoteError::Changed {
            path: v.challenger_path.clone(),
            now,
            then: v.challenger_hash.clone(),
        }
        .into());
    }
    let model = models::failure::FailureModel::load(src)
        .with_context(|| format!("loading {}", src.display()))?;
    let dst = install(&bytes, &args.models_dir, &target_name(&model.meta.created))?;
    println!(
        "promoted {} to {} (version {}): PR-AUC {:.4} vs {:.4}",
        v.challenger_path,
        dst.display(),
        crate::reload::version_of(Some(&model)),
        v.challenger.pr_auc,
        v.champion.pr_auc
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_training_time_and_copies_are_whole() {
        assert_eq!(
            target_name("2026-12-03T01:02:03Z"),
            "model-2026-12-03T01-02-03Z.fwm"
        );
        let dir = std::env::temp_dir().join(format!("fw-promote-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = install(b"abc", &dir, "model-x.fwm").expect("install");
        assert_eq!(std::fs::read(&p).expect("read"), b"abc");
        // No temporary file is left behind for the watcher to see.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
