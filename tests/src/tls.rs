//! TLS in front of the test broker: tansu 0.6 parses `--cert` but never
//! serves TLS, so Debian's stunnel4 (installed by `scripts/tls.sh
//! install`) terminates it on 127.0.0.1 and forwards the plaintext to
//! tansu, which advertises the stunnel port to its clients. The
//! certificates are made at test time with the `openssl` CLI: a throwaway
//! CA, a server certificate it signs for IP 127.0.0.1, and a second CA
//! that signed nothing (the "wrong CA").

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The PEM files of one test.
pub struct Certs {
    pub ca: PathBuf,
    pub wrong_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
}

/// The program, or a failure naming the script that installs it.
fn program(names: &[&str]) -> PathBuf {
    for n in names {
        for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin"] {
            let p = Path::new(dir).join(n);
            if p.exists() {
                return p;
            }
        }
    }
    panic!("{} missing: run scripts/tls.sh install", names[0]);
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new(program(&["openssl"]))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Certs {
    /// Makes the CA, the wrong CA and the 127.0.0.1 server certificate in
    /// `dir`.
    pub fn generate(dir: &Path) -> Certs {
        std::fs::create_dir_all(dir).expect("certs dir");
        for ca in ["ca", "wrong-ca"] {
            openssl(
                dir,
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-days",
                    "2",
                    "-subj",
                    &format!("/CN=forewarn test {ca}"),
                    "-keyout",
                    &format!("{ca}.key"),
                    "-out",
                    &format!("{ca}.pem"),
                ],
            );
        }
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=127.0.0.1",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        );
        std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1\n").expect("ext");
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "server.ext",
                "-out",
                "server.pem",
            ],
        );
        Certs {
            ca: dir.join("ca.pem"),
            wrong_ca: dir.join("wrong-ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
        }
    }
}

/// stunnel terminating TLS on 127.0.0.1:`port`, forwarding to `target`;
/// killed by PID on drop.
pub struct Stunnel {
    pub port: u16,
    child: Child,
}

impl Stunnel {
    /// Starts stunnel in the foreground with its config and log in `dir`.
    pub fn start(dir: &Path, port: u16, target: u16, certs: &Certs) -> Stunnel {
        std::fs::create_dir_all(dir).expect("stunnel dir");
        let conf = dir.join("stunnel.conf");
        std::fs::write(
            &conf,
            format!(
                "foreground = yes\npid =\noutput = {log}\ndebug = notice\n\n[kafka]\naccept = 127.0.0.1:{port}\nconnect = 127.0.0.1:{target}\ncert = {cert}\nkey = {key}\n",
                log = dir.join("stunnel.log").display(),
                cert = certs.server_cert.display(),
                key = certs.server_key.display(),
            ),
        )
        .expect("stunnel.conf");
        let child = Command::new(program(&["stunnel4", "stunnel"]))
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn stunnel");
        let s = Stunnel { port, child };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "stunnel did not start: see {}",
                dir.join("stunnel.log").display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Stunnel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
