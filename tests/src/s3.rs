//! The real S3-protocol server of the end-to-end tests of the partition
//! checkpoint store on object storage (`tests/e2e/s3_store.rs`): moto's
//! server (installed by `scripts/s3.sh install`), started on a free
//! 127.0.0.1 port and killed by PID on drop, plus the few plain HTTP calls
//! the tests make on it directly (moto does not check signatures): create
//! a bucket, list keys, read and overwrite an object.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `scripts/s3.sh install` puts moto's server.
pub fn moto_path() -> PathBuf {
    let tools = std::env::var_os("FOREWARN_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/forewarn/tools")
        });
    tools.join("s3-venv/bin/moto_server")
}

/// A running server.
pub struct S3Server {
    pub port: u16,
    child: Child,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl S3Server {
    /// Starts moto with its log in `dir`, or returns `None` (with a note)
    /// when it is not installed and `FOREWARN_REQUIRE_S3` is unset.
    /// `scripts/test.sh` sets it, so CI fails rather than skips.
    pub fn start(dir: &Path) -> Option<S3Server> {
        let bin = moto_path();
        if !bin.exists() {
            assert!(
                std::env::var_os("FOREWARN_REQUIRE_S3").is_none(),
                "{} missing: run scripts/s3.sh install",
                bin.display()
            );
            eprintln!("SKIPPED: {} missing (scripts/s3.sh install)", bin.display());
            return None;
        }
        std::fs::create_dir_all(dir).expect("s3 dir");
        let port = crate::free_port();
        let log = std::fs::File::create(dir.join("moto.log")).expect("moto log");
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn moto_server");
        let s = S3Server { port, child };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "moto did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(s)
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `AWS_*` variables that point a client at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "forewarn-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "forewarn-test".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// The same as `object_store` S3 settings, for a client in this process.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("aws_endpoint", self.endpoint()),
            ("aws_allow_http", "true".into()),
            ("aws_access_key_id", "forewarn-test".into()),
            ("aws_secret_access_key", "forewarn-test".into()),
            ("aws_region", "us-east-1".into()),
        ]
    }

    pub fn create_bucket(&self, bucket: &str) {
        let (code, body) = self.request("PUT", &format!("/{bucket}"), &[]);
        assert_eq!(
            code,
            200,
            "creating bucket {bucket}: {}",
            String::from_utf8_lossy(&body)
        );
    }

    /// Keys in `bucket` under `prefix`, sorted.
    pub fn list(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let (code, body) = self.request(
            "GET",
            &format!("/{bucket}?list-type=2&prefix={prefix}"),
            &[],
        );
        let xml = String::from_utf8_lossy(&body);
        assert_eq!(code, 200, "listing {bucket}/{prefix}: {xml}");
        let mut keys: Vec<String> = xml
            .split("<Key>")
            .skip(1)
            .filter_map(|s| s.split("</Key>").next())
            .map(str::to_string)
            .collect();
        keys.sort();
        keys
    }

    pub fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let (code, body) = self.request("GET", &format!("/{bucket}/{key}"), &[]);
        (code == 200).then_some(body)
    }

    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let (code, body) = self.request("PUT", &format!("/{bucket}/{key}"), bytes);
        assert_eq!(
            code,
            200,
            "putting {bucket}/{key}: {}",
            String::from_utf8_lossy(&body)
        );
    }

    /// One HTTP/1.1 request: the status and the body. moto takes the
    /// caller's access key from the Authorization header without checking
    /// the signature; without one it is anonymous, and may not read what
    /// the store wrote.
    fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=forewarn-test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )
        .expect("request");
        s.write_all(body).expect("body");
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).expect("response");
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("response head");
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        assert!(
            !head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked"),
            "chunked responses are not read here: {head}"
        );
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status");
        (code, raw[split + 4..].to_vec())
    }
}
