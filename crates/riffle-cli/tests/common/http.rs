//! A plain HTTP/1.1 client for the control endpoint (one request per connection).

use std::io::{Read, Write};
use std::path::Path;

/// An answer: status code, head (lower-cased) and body.
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// `method path` at `address`, with `Authorization: Bearer token` when given.
pub fn request(address: &str, method: &str, path: &str, token: Option<&str>) -> Answer {
    try_request(address, method, path, token)
        .unwrap_or_else(|e| panic!("{method} {path} at {address}: {e}"))
}

/// [`request`] with the `Host` header naming `host` instead of `address` (as a web page
/// of another site whose name points at this machine sends it).
pub fn request_naming(
    address: &str,
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Answer {
    try_request_naming(address, host, method, path, token)
        .unwrap_or_else(|e| panic!("{method} {path} at {address}: {e}"))
}

/// [`request`], or the I/O error (a server that is not up yet).
pub fn try_request(
    address: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<Answer> {
    try_request_naming(address, address, method, path, token)
}

fn try_request_naming(
    address: &str,
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> std::io::Result<Answer> {
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{authorization}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no head in {response}")))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {head}")))?;
    Ok(Answer {
        status,
        head: head.to_lowercase(),
        body: body.to_string(),
    })
}

/// The address in the control file `control`.
pub fn control_address(control: &Path) -> String {
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(control).unwrap()).unwrap();
    file["address"].as_str().unwrap().to_string()
}
