//! A real S3-protocol server for tests: `moto_server` from PyPI on 127.0.0.1, started
//! per test and killed when the guard drops. `scripts/test` installs it and sets
//! `RIFFLE_MOTO_SERVER`; otherwise `moto_server` must be on the PATH.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running moto server with one bucket.
pub struct MotoServer {
    child: Child,
    /// `http://127.0.0.1:{port}`.
    pub endpoint: String,
    /// The bucket created at start.
    pub bucket: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Sends one unsigned HTTP request; returns the status line.
fn http(port: u16, request: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(request.as_bytes())?;
    let mut response = String::new();
    let mut buf = [0u8; 1024];
    let n = stream.read(&mut buf)?;
    response.push_str(&String::from_utf8_lossy(&buf[..n]));
    Ok(response.lines().next().unwrap_or_default().to_string())
}

impl MotoServer {
    /// Starts moto on a free loopback port and creates `bucket`.
    pub fn start(bucket: &str) -> Self {
        let program =
            std::env::var("RIFFLE_MOTO_SERVER").unwrap_or_else(|_| "moto_server".to_string());
        let port = free_port();
        let child = Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start the S3 test server `{program}` ({e}); run scripts/test, which installs moto, or set RIFFLE_MOTO_SERVER"
                )
            });
        let server = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            bucket: bucket.to_string(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let create = format!(
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        loop {
            match http(port, &create) {
                Ok(status) if status.contains(" 200") => break,
                Ok(status) => panic!("moto refused to create bucket {bucket}: {status}"),
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(e) => panic!("moto did not start on port {port} within 30 s: {e}"),
            }
        }
        server
    }

    /// Environment variables that point riffle's `s3://` roots at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "riffle-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "riffle-test".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// Sets [`env`](Self::env) for this process (tests that parse roots in-process).
    pub fn export_env(&self) {
        for (k, v) in self.env() {
            std::env::set_var(k, v);
        }
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
