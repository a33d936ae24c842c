//! The real Kafka-protocol broker of the end-to-end tests: tansu (installed
//! by `scripts/broker.sh install`), started on a free 127.0.0.1 port with
//! SQLite storage in a scratch directory and killed by PID on drop. It can
//! be stopped (SIGKILL) and started again on the same port and storage,
//! for the broker-outage test. It can advertise another port than it
//! listens on (a TLS terminator's in front of it, `tests/src/tls.rs`) and
//! require SASL (SCRAM) from its clients.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `scripts/broker.sh install` puts tansu.
pub fn tansu_path() -> PathBuf {
    let tools = std::env::var_os("FOREWARN_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/forewarn/tools")
        });
    tools.join("bin/tansu")
}

/// A running broker.
pub struct Broker {
    pub port: u16,
    dir: PathBuf,
    child: Child,
    /// The port advertised to clients in metadata.
    advertised: u16,
    /// SASL required.
    authentication: bool,
}

impl Broker {
    /// Starts tansu, or returns `None` (with a note) when it is not
    /// installed and `FOREWARN_REQUIRE_BROKER` is unset. `scripts/test.sh`
    /// sets it, so CI fails rather than skips.
    pub fn start(dir: &Path) -> Option<Broker> {
        Self::start_with(dir, None, false)
    }

    /// Starts tansu advertising `advertised` (default: its own port) and,
    /// with `authentication`, requiring SASL (SCRAM users: [`Self::create_user`]).
    pub fn start_with(dir: &Path, advertised: Option<u16>, authentication: bool) -> Option<Broker> {
        let bin = tansu_path();
        if !bin.exists() {
            assert!(
                std::env::var_os("FOREWARN_REQUIRE_BROKER").is_none(),
                "{} missing: run scripts/broker.sh install",
                bin.display()
            );
            eprintln!(
                "SKIPPED: {} missing (scripts/broker.sh install)",
                bin.display()
            );
            return None;
        }
        std::fs::create_dir_all(dir).expect("broker dir");
        let port = crate::free_port();
        let advertised = advertised.unwrap_or(port);
        let child = spawn(&bin, dir, port, advertised, authentication);
        let b = Broker {
            port,
            dir: dir.to_path_buf(),
            child,
            advertised,
            authentication,
        };
        b.wait_listening();
        Some(b)
    }

    /// Kills the broker (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Restarts it requiring SASL (create the users before: tansu's CLI
    /// cannot authenticate).
    pub fn require_authentication(&mut self) {
        self.kill();
        self.authentication = true;
        self.restart();
    }

    /// Starts it again on the same port and storage (after [`Self::kill`]).
    pub fn restart(&mut self) {
        self.child = spawn(
            &tansu_path(),
            &self.dir,
            self.port,
            self.advertised,
            self.authentication,
        );
        self.wait_listening();
    }

    fn wait_listening(&self) {
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "tansu did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Creates a SCRAM user (`mechanism`: `scram256` or `scram512`).
    pub fn create_user(&self, name: &str, password: &str, mechanism: &str) {
        let out = Command::new(tansu_path())
            .args(["user", "create", name, password, "--mechanism", mechanism])
            .args(["--broker", &format!("tcp://{}", self.addr())])
            .output()
            .expect("tansu user create");
        assert!(
            out.status.success(),
            "creating user {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates a topic with `partitions` partitions.
    pub fn create_topic(&self, name: &str, partitions: u32) {
        let out = Command::new(tansu_path())
            .args([
                "topic",
                "create",
                name,
                "--partitions",
                &partitions.to_string(),
                "--broker",
                &format!("tcp://{}", self.addr()),
            ])
            .output()
            .expect("tansu topic create");
        assert!(
            out.status.success(),
            "creating topic {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// tansu on 127.0.0.1:`port` with its data and log in `dir` (the log is
/// appended to, so a restart keeps the first run's).
fn spawn(bin: &Path, dir: &Path, port: u16, advertised: u16, authentication: bool) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("tansu.log"))
        .expect("log");
    // tansu reads a sqlite:// path relative to its working directory.
    let mut cmd = Command::new(bin);
    cmd.args([
        "broker",
        "--listener-url",
        &format!("tcp://127.0.0.1:{port}"),
        "--advertised-listener-url",
        &format!("tcp://127.0.0.1:{advertised}"),
        "--storage-engine",
        "sqlite://tansu.db",
    ]);
    if authentication {
        cmd.arg("--authentication");
    }
    cmd.current_dir(dir)
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn tansu")
}
