//! A real HTTP receiver on 127.0.0.1 standing in for PagerDuty's Events API
//! and a Slack webhook: it records every request body (JSON) by path and
//! answers 202 like PagerDuty. Plain std: a thread per connection,
//! `Connection: close`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Requests received: (path, JSON body).
pub type Log = Arc<Mutex<Vec<(String, Value)>>>;

/// A running receiver.
pub struct Receiver {
    pub port: u16,
    pub log: Log,
}

impl Receiver {
    /// Starts listening on a free loopback port.
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        let port = listener.local_addr().expect("addr").port();
        let log: Log = Arc::default();
        let l = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let l = l.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let mut len = 0usize;
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                        let lower = h.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0u8; len];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    l.lock().expect("log").push((path, value));
                    let reply = b"{\"status\":\"success\",\"message\":\"Event processed\"}";
                    let _ = write!(
                        stream,
                        "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        reply.len()
                    );
                    let _ = stream.write_all(reply);
                });
            }
        });
        Receiver { port, log }
    }

    /// Bodies received on `path`.
    pub fn bodies(&self, path: &str) -> Vec<Value> {
        self.log
            .lock()
            .expect("log")
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, v)| v.clone())
            .collect()
    }
}
