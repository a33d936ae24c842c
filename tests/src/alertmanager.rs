//! The Alertmanager side of `tests/e2e/alertmanager.rs`: Debian's
//! `prometheus-alertmanager` as a child on a loopback port with a
//! throwaway config and storage directory (no clustering), and `amtool`
//! run against an Alertmanager URL (the real one, or forewarn's REST).
//! Both programs come from the package `scripts/alertmanager.sh` installs;
//! when one is missing the test fails saying so.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::service::wait_for;
use crate::{free_port, http_get};

/// The path of `program`, or a failure naming the install script.
pub fn program(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "`{name}` is not installed: run `scripts/alertmanager.sh install` (Debian package prometheus-alertmanager)"
        )
    })
}

/// A real Alertmanager, killed when the test ends.
pub struct Alertmanager {
    child: Child,
    pub port: u16,
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Alertmanager {
    /// Starts one in `dir/am` with `route` (YAML of the `route:` block's
    /// body, indented two spaces) and a receiver `blackhole` that sends
    /// nothing; waits until it answers.
    pub fn start(dir: &Path, route: &str) -> Alertmanager {
        let am = dir.join("am");
        std::fs::create_dir_all(am.join("data")).expect("alertmanager dir");
        std::fs::write(
            am.join("alertmanager.yml"),
            format!("route:\n  receiver: blackhole\n{route}\nreceivers:\n  - name: blackhole\n"),
        )
        .expect("alertmanager config");
        let port = free_port();
        let log = std::fs::File::create(am.join("alertmanager.log")).expect("alertmanager log");
        let child = Command::new(program("prometheus-alertmanager"))
            .arg(format!(
                "--config.file={}",
                am.join("alertmanager.yml").display()
            ))
            .arg(format!("--storage.path={}", am.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            // No gossip port: one instance, loopback only.
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn prometheus-alertmanager");
        let am = Alertmanager { child, port };
        wait_for("alertmanager to answer", Duration::from_secs(30), || {
            http_get(port, "/-/ready").is_some()
        });
        am
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET /api/v2/alerts/groups` (HTTP/1.0, so the body is not chunked).
    pub fn groups(&self) -> Vec<Value> {
        use std::io::{Read, Write};
        let get = || -> Option<Vec<Value>> {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
            s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
            write!(
                s,
                "GET /api/v2/alerts/groups HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
            )
            .ok()?;
            let mut text = String::new();
            s.read_to_string(&mut text).ok()?;
            let (_, body) = text.split_once("\r\n\r\n")?;
            serde_json::from_str::<Value>(body)
                .ok()?
                .as_array()
                .cloned()
        };
        get().unwrap_or_default()
    }
}

/// Runs `amtool --alertmanager.url=<url> [--http.config.file=<auth>] <args>`.
pub fn amtool(url: &str, auth: Option<&Path>, args: &[&str]) -> Output {
    let mut cmd = Command::new(program("amtool"));
    cmd.arg(format!("--alertmanager.url={url}"));
    if let Some(a) = auth {
        cmd.arg(format!("--http.config.file={}", a.display()));
    }
    cmd.args(args).output().expect("spawn amtool")
}

/// [`amtool`] that must succeed; its stdout.
pub fn amtool_ok(url: &str, auth: Option<&Path>, args: &[&str]) -> String {
    let out = amtool(url, auth, args);
    assert!(
        out.status.success(),
        "amtool {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The built-in alert policy (lifecycle, correlation) under `[alerts]`,
/// routed to one Alertmanager receiver at `url`, grouped by kind and rack.
pub fn policy_to(url: &str) -> String {
    let mut s = crate::service::builtin_policy_head();
    s.push_str(&format!(
        r#"
[alerts.route]
receiver = "am"
group_by = ["kind", "rack"]
group_wait = "0s"
group_interval = "1m"
repeat_interval = "1h"

[[alerts.receivers]]
type = "alertmanager"
name = "am"
url = {{ value = "{url}" }}
resend_interval = "1m"

[alerts.outbox]
dir = "outbox"
initial_backoff = "100ms"
"#
    ));
    s
}
