//! `forewarn config check`: loads a config the way `serve` does, validates
//! it, reads what it points at (receiver secrets and URLs from their
//! variables and files, Kafka secrets, TLS files, the model file, input
//! files) and prints the effective configuration: every default filled in,
//! the `[alerts]` table layered over the built-in policy. Each problem names
//! its key path and, where the file has it, its line and column; exit 1 on
//! the first. Nothing is started and no secret is printed.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};

use crate::config::locate::Located;
use crate::config::{Config, ConfigError, RawConfig, SourceKind, layer};

/// Check or show a configuration.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

/// `forewarn config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a config (and the secrets, certificates and files it names)
    /// and print the effective configuration with every default filled in.
    /// Without `--config`: the built-in default (a simulated fleet).
    Check(CheckArgs),
}

/// `forewarn config check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The config file (TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// What to print: `settings` (every setting, defaults filled in, as the
    /// service will run them), `alerts` (the layered alert policy as TOML)
    /// or `none` (only errors).
    #[arg(long, value_enum, default_value_t = Show::Settings)]
    pub show: Show,
    /// Skip reading secrets and files (check the text alone, e.g. on a
    /// build machine without the deployment's secrets).
    #[arg(long)]
    pub offline: bool,
}

/// `--show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Show {
    Settings,
    Alerts,
    None,
}

/// Runs `forewarn config …`.
pub fn run(args: &ConfigArgs) -> anyhow::Result<()> {
    match &args.command {
        ConfigCommand::Check(a) => check(a),
    }
}

fn check(args: &CheckArgs) -> anyhow::Result<()> {
    let (text, name) = match &args.config {
        Some(p) => (
            std::fs::read_to_string(p)
                .with_context(|| format!("reading config {}", p.display()))?,
            p.display().to_string(),
        ),
        None => (String::new(), "built-in default".to_owned()),
    };
    let (raw, config) = check_text(&text, !args.offline)
        .map_err(|e| anyhow::anyhow!("invalid config {name}: {e}"))?;
    match args.show {
        Show::Settings => println!("{config:#?}"),
        Show::Alerts => {
            let table = layer::layered(raw.alerts_table.as_ref())
                .map_err(|e| anyhow::anyhow!("invalid config {name}: {e}"))?;
            print!(
                "{}",
                toml::to_string_pretty(&table).context("printing the policy")?
            );
        }
        Show::None => {}
    }
    eprintln!("forewarn: config {name} is valid");
    Ok(())
}

/// Parses and validates `text`, then (when `io`) reads what it names.
pub fn check_text(text: &str, io: bool) -> Result<(RawConfig, Config), ConfigError> {
    let located = Located::new(text);
    let raw = RawConfig::from_toml(text)?;
    let config = raw.validate().map_err(|e| e.locate(&located))?;
    if io {
        reachable(&raw, &config).map_err(|e| e.locate(&located))?;
    }
    Ok((raw, config))
}

fn problem(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
        at: None,
    }
}

/// Reads every secret and file the config names (values are dropped).
fn reachable(raw: &RawConfig, config: &Config) -> Result<(), ConfigError> {
    for (i, receiver) in config.alerts.receivers.iter().enumerate() {
        let key = raw.alert_key(&format!("receivers[{i}]"));
        for (field, source) in receiver_secrets(&receiver.kind) {
            let at = format!("alerts.{key}.{field}");
            let value = source.load().map_err(|e| problem(&at, e.to_string()))?;
            if field != "routing_key" && alerts::sinks::config::check_url(value.expose()).is_err() {
                // The value may be a secret (Slack's URL): not printed.
                return Err(problem(at, "does not hold an http(s) URL"));
            }
        }
    }
    if let SourceKind::Kafka(k) = &config.source {
        for (option, secret) in &k.secrets {
            secret
                .resolve(option)
                .map_err(|e| problem(format!("source.secrets.{option}"), e))?;
        }
    }
    if let SourceKind::Files(files) = &config.source {
        for (i, f) in files.iter().enumerate() {
            readable(&format!("source.files[{i}]"), f)?;
        }
    }
    if let Some(tls) = &config.api.tls {
        readable("api.tls_cert", &tls.cert)?;
        readable("api.tls_key", &tls.key)?;
    }
    if let Some(model) = &config.model_file {
        readable("models.failure", model)?;
    }
    Ok(())
}

fn readable(key: &str, path: &Path) -> Result<(), ConfigError> {
    std::fs::metadata(path)
        .map(drop)
        .map_err(|e| problem(key, format!("cannot read {}: {e}", path.display())))
}

fn receiver_secrets(
    kind: &alerts::sinks::config::ReceiverKind,
) -> Vec<(&'static str, &alerts::secret::SecretSource)> {
    use alerts::sinks::config::ReceiverKind as K;
    match kind {
        K::PagerDuty {
            url, routing_key, ..
        } => vec![("url", url), ("routing_key", routing_key)],
        K::Slack { webhook_url, .. } => vec![("webhook_url", webhook_url)],
        K::Alertmanager { url, .. } | K::Webhook { url } => vec![("url", url)],
        K::File { .. } => Vec::new(),
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
