//! The Prometheus side of the remote-write and scrape end-to-end tests
//! (`tests/e2e/remote_write.rs`, `tests/e2e/scrape.rs`): the simulated
//! fleet served as a dcgm-exporter endpoint (`forewarn simulate
//! --serve-metrics`), a real Prometheus (Debian's package, installed by
//! `scripts/prometheus.sh install`) with a throwaway config and storage
//! scraping it and remote-writing to forewarn, and `forewarn serve` with
//! an API token. Every child is killed on drop.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::forewarn_bin;

/// A child process killed when the test ends, passed or panicked.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Killed {
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn log(dir: &Path, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(name))
        .expect("log file")
}

/// The `prometheus` binary; fails the test naming the install script when
/// it is missing (never a silent pass).
pub fn prometheus_bin() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("prometheus"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("prometheus is missing: run `scripts/prometheus.sh install` (scripts/test.sh does)")
    })
}

/// How the exporter's simulation advances.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    /// Simulated seconds per wall second; no timestamps (dcgm-exporter's
    /// shape).
    Speed(f64),
    /// One tick per scrape, stamped with its simulated time.
    TickPerScrape,
}

/// The simulated fleet as a dcgm-exporter endpoint on 127.0.0.1:`port`.
pub fn exporter(dir: &Path, port: u16, fleet: &Fleet, pace: Pace) -> Killed {
    let addr = format!("127.0.0.1:{port}");
    let (gpus, hours, seed, rate, speed) = (
        fleet.gpus.to_string(),
        fleet.hours.to_string(),
        fleet.seed.to_string(),
        fleet.failure_rate.to_string(),
        match pace {
            Pace::Speed(s) => s.to_string(),
            Pace::TickPerScrape => "1".into(),
        },
    );
    let per_scrape: &[&str] = match pace {
        Pace::Speed(_) => &[],
        Pace::TickPerScrape => &["--tick-per-scrape"],
    };
    Killed(
        Command::new(forewarn_bin())
            .args([
                "simulate",
                "--serve-metrics",
                &addr,
                "--gpus",
                &gpus,
                "--hours",
                &hours,
                "--seed",
                &seed,
                "--failure-rate",
                &rate,
                "--speed",
                &speed,
            ])
            .args(per_scrape)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(log(dir, &format!("exporter-{port}.log")))
            .spawn()
            .expect("spawn forewarn simulate --serve-metrics"),
    )
}

/// The same fleet as files in `<dir>/sim` (`telemetry.jsonl`,
/// `labels.csv`): what a backtest and the labels compare with.
pub fn simulate_files(dir: &Path, fleet: &Fleet) {
    let (gpus, hours, seed, rate) = (
        fleet.gpus.to_string(),
        fleet.hours.to_string(),
        fleet.seed.to_string(),
        fleet.failure_rate.to_string(),
    );
    crate::forewarn(
        &[
            "simulate",
            "--gpus",
            &gpus,
            "--hours",
            &hours,
            "--seed",
            &seed,
            "--failure-rate",
            &rate,
            "--format",
            "jsonl",
            "--out",
            "sim",
        ],
        dir,
    );
}

/// A simulated fleet's parameters (as `forewarn simulate` takes them).
#[derive(Debug, Clone, Copy)]
pub struct Fleet {
    pub gpus: u32,
    pub hours: f64,
    pub seed: u64,
    pub failure_rate: f64,
}

/// A real Prometheus on 127.0.0.1:`port` scraping `targets` every
/// `interval` (a Prometheus duration, e.g. `150ms`) and remote-writing to
/// forewarn's `/api/v1/write` on `api` with `token`.
pub fn prometheus(
    dir: &Path,
    port: u16,
    targets: &[u16],
    interval: &str,
    api: u16,
    token: &str,
) -> Killed {
    let bin = prometheus_bin();
    let targets: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
    let config = format!(
        r#"global:
  scrape_interval: {interval}
  scrape_timeout: {interval}
scrape_configs:
  - job_name: dcgm
    static_configs:
      - targets: [{}]
remote_write:
  - url: http://127.0.0.1:{api}/api/v1/write
    authorization:
      credentials: {token}
    queue_config:
      batch_send_deadline: 1s
      min_backoff: 100ms
      max_backoff: 1s
"#,
        targets.join(", ")
    );
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, config).expect("prometheus config");
    let data = dir.join("prometheus-data");
    Killed(
        Command::new(bin)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(log(dir, "prometheus.log"))
            .spawn()
            .expect("spawn prometheus"),
    )
}

/// `forewarn serve --config forewarn.toml` in `dir`, with the API token
/// remote-write needs and the receivers' variables of
/// [`crate::service::alert_policy`].
pub fn serve_with_token(dir: &Path, pd: u16, token: &str) -> Killed {
    Killed(
        Command::new(forewarn_bin())
            .args(["serve", "--config", "forewarn.toml"])
            .current_dir(dir)
            .env("FOREWARN_API_TOKEN", token)
            .env("FW_E2E_PD_KEY", "e2e-routing-key")
            .env("FW_E2E_SLACK_URL", format!("http://127.0.0.1:{pd}/slack"))
            .env("FOREWARN_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log(dir, "serve.log"))
            .spawn()
            .expect("spawn forewarn serve"),
    )
}
