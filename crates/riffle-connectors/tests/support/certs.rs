//! Certificates for test servers with TLS: a throw-away CA and a server certificate for
//! 127.0.0.1 signed by it, made with the `openssl` command (`scripts/test` installs it).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// PEM files in one directory.
pub struct Certificates {
    /// The CA that clients trust.
    pub ca: PathBuf,
    /// The server's certificate and key.
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Makes a CA and a server certificate for IP 127.0.0.1 in `dir`.
pub fn make(dir: &Path) -> Certificates {
    let files = Certificates {
        ca: dir.join("ca.crt"),
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
    };
    let ca_key = dir.join("ca.key");
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=riffle test CA",
        "-keyout",
        &ca_key.display().to_string(),
        "-out",
        &files.ca.display().to_string(),
    ]);
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-CA",
        &files.ca.display().to_string(),
        "-CAkey",
        &ca_key.display().to_string(),
        "-keyout",
        &files.key.display().to_string(),
        "-out",
        &files.cert.display().to_string(),
    ]);
    files
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run openssl ({e}); run scripts/test, which installs it")
        });
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}
