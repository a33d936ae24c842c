//! The real Kafka-protocol broker of the end-to-end tests: tansu (installed
//! by `scripts/broker.sh install`), started on a free 127.0.0.1 port with
//! SQLite storage in a scratch directory and killed by PID on drop.

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
    child: Child,
}

impl Broker {
    /// Starts tansu, or returns `None` (with a note) when it is not
    /// installed and `FOREWARN_REQUIRE_BROKER` is unset. `scripts/test.sh`
    /// sets it, so CI fails rather than skips.
    pub fn start(dir: &Path) -> Option<Broker> {
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
        let log = std::fs::File::create(dir.join("tansu.log")).expect("log");
        // tansu reads a sqlite:// path relative to its working directory.
        let child = Command::new(&bin)
            .args([
                "broker",
                "--listener-url",
                &format!("tcp://127.0.0.1:{port}"),
                "--advertised-listener-url",
                &format!("tcp://127.0.0.1:{port}"),
                "--storage-engine",
                "sqlite://tansu.db",
            ])
            .current_dir(dir)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn tansu");
        let b = Broker { port, child };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "tansu did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(b)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
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
