//! Prometheus `file_sd` for scrape mode: a JSON or YAML list of
//! `{targets: ["host:port", ...], labels: {name: value}}`, the format
//! Prometheus's `file_sd_configs` reads, so one file can serve both.
//! [`Watch`] re-reads it when its modification time or size changes; a
//! file that cannot be read or parsed keeps the previous targets (as
//! Prometheus does) and says why once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Deserialize;

use super::{Target, target_url};

/// One group of a `file_sd` file.
#[derive(Debug, Deserialize)]
struct Group {
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// Parses a `file_sd` file's text: YAML when the path ends in `.yml` or
/// `.yaml`, JSON otherwise.
pub fn parse(
    path: &Path,
    text: &str,
    scheme: &str,
    metrics_path: &str,
) -> Result<Vec<Target>, String> {
    let yaml = path.extension().is_some_and(|e| e == "yml" || e == "yaml");
    let groups: Vec<Group> = if yaml {
        serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?
    } else {
        serde_json::from_str(text).map_err(|e| e.to_string())?
    };
    let mut out = Vec::new();
    for g in groups {
        for t in &g.targets {
            let (name, url) =
                target_url(t, scheme, metrics_path).map_err(|why| format!("{t:?}: {why}"))?;
            out.push(Target {
                name,
                url,
                labels: g.labels.clone(),
            });
        }
    }
    Ok(out)
}

/// The file, re-read when it changes.
pub struct Watch {
    path: PathBuf,
    scheme: String,
    metrics_path: String,
    seen: Option<(SystemTime, u64)>,
    targets: Vec<Target>,
    /// The last problem reported, so it is logged once, not every tick.
    problem: Option<String>,
}

impl Watch {
    pub fn new(path: PathBuf, scheme: String, metrics_path: String) -> Self {
        Watch {
            path,
            scheme,
            metrics_path,
            seen: None,
            targets: Vec::new(),
            problem: None,
        }
    }

    /// The current targets, re-reading the file if it changed.
    pub fn targets(&mut self) -> &[Target] {
        let stamp = std::fs::metadata(&self.path)
            .and_then(|m| Ok((m.modified()?, m.len())))
            .map_err(|e| format!("reading {}: {e}", self.path.display()));
        let read = match stamp {
            Ok(s) if self.seen == Some(s) => return &self.targets,
            Ok(s) => std::fs::read_to_string(&self.path)
                .map_err(|e| format!("reading {}: {e}", self.path.display()))
                .and_then(|text| {
                    parse(&self.path, &text, &self.scheme, &self.metrics_path)
                        .map_err(|e| format!("{}: {e}", self.path.display()))
                })
                .map(|t| (s, t)),
            Err(e) => Err(e),
        };
        match read {
            Ok((stamp, targets)) => {
                tracing::info!(file = %self.path.display(), targets = targets.len(), "file_sd targets read");
                self.seen = Some(stamp);
                self.targets = targets;
                self.problem = None;
            }
            Err(why) => {
                if self.problem.as_ref() != Some(&why) {
                    tracing::warn!(error = %why, "file_sd: keeping the previous targets");
                    self.problem = Some(why);
                }
            }
        }
        &self.targets
    }
}
