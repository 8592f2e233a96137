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
    let path = |p: &Path| p.display().to_string();
    new_certificate("/CN=riffle test CA", &ca_key, &files.ca, &[]);
    new_certificate(
        "/CN=127.0.0.1",
        &files.key,
        &files.cert,
        &[
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-CA",
            &path(&files.ca),
            "-CAkey",
            &path(&ca_key),
        ],
    );
    files
}

/// A new key and certificate for `subject`, self-signed unless `extra` names a CA.
fn new_certificate(subject: &str, key: &Path, cert: &Path, extra: &[&str]) {
    let (key, cert) = (key.display().to_string(), cert.display().to_string());
    let mut args = vec![
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", subject, "-keyout",
        &key, "-out", &cert,
    ];
    args.extend_from_slice(extra);
    openssl(&args);
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
