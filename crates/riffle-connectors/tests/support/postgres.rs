//! A real PostgreSQL server for tests: `initdb` into a temporary directory and
//! `postgres` on a free 127.0.0.1 port with prepared transactions and logical
//! replication enabled, stopped and
//! removed when the guard drops. `scripts/test` installs the Debian packages; the
//! binaries are found through `RIFFLE_PG_BIN`, the PATH, or /usr/lib/postgresql/*/bin.
//! PostgreSQL refuses to run as root, so as root the server runs as user `postgres`.

#![allow(dead_code)]

// The test crate includes support/certs.rs as `certs`.
use super::certs;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server with database `riffle`, user `riffle` (trust authentication).
pub struct PgServer {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// The server's port on 127.0.0.1.
    pub port: u16,
    bin: PathBuf,
    /// With TLS only: the CA (PEM) that signed the server's certificate.
    ca: Option<PathBuf>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn bin_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("RIFFLE_PG_BIN") {
        return dir.into();
    }
    // Debian keeps every server program of a version together here.
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    found.retain(|d| d.join("initdb").exists());
    found.sort();
    if let Some(dir) = found.pop() {
        return dir;
    }
    std::env::var("PATH")
        .ok()
        .and_then(|path| {
            std::env::split_paths(&path)
                .find(|d| d.join("initdb").exists() && d.join("postgres").exists())
        })
        .unwrap_or_else(|| {
            panic!("no PostgreSQL server binaries (initdb, postgres); run scripts/test, which installs them, or set RIFFLE_PG_BIN")
        })
}

/// `program` from `bin`, or from the PATH when `bin` lacks it.
fn tool(bin: &Path, program: &str) -> PathBuf {
    let path = bin.join(program);
    if path.exists() {
        path
    } else {
        program.into()
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `program args…`, as user `postgres` when we are root.
fn command(bin: &Path, program: &str) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin.join(program));
        c
    } else {
        Command::new(bin.join(program))
    }
}

impl PgServer {
    /// Initializes and starts a server.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// Initializes and starts a server that accepts TCP connections over TLS only,
    /// with a certificate for 127.0.0.1 signed by a fresh CA (`ca()`).
    pub fn start_with_tls() -> Self {
        Self::start_with(true)
    }

    fn start_with(tls: bool) -> Self {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("riffle-pg-")
            .tempdir()
            .unwrap();
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(
                status.success(),
                "chown of the PostgreSQL test directory failed"
            );
        }
        let data = dir.path().join("data");
        let out = command(&bin, "initdb")
            .args([
                "-U",
                "riffle",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(&data)
            .output()
            .unwrap_or_else(|e| panic!("cannot run initdb from {}: {e}", bin.display()));
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ca = tls.then(|| Self::tls_only(&data));
        let port = free_port();
        let mut postgres = command(&bin, "postgres");
        if ca.is_some() {
            postgres
                .args(["-c", "ssl=on"])
                .arg("-c")
                .arg(format!(
                    "ssl_cert_file={}",
                    data.join("server.crt").display()
                ))
                .arg("-c")
                .arg(format!(
                    "ssl_key_file={}",
                    data.join("server.key").display()
                ));
        }
        let child = postgres
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={}", dir.path().display()))
            .args(["-c", "max_prepared_transactions=64"])
            // Logical replication, for the postgres-cdc source.
            .args(["-c", "wal_level=logical", "-c", "max_wal_senders=10"])
            .args(["-c", "max_replication_slots=10"])
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off"])
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(dir.path().join("server.log")).unwrap(),
            ))
            .spawn()
            .unwrap();
        let mut server = Self {
            child: Some(child),
            dir,
            port,
            bin,
            ca,
        };
        server.wait_ready();
        server.psql("postgres", "CREATE DATABASE riffle");
        server
    }

    /// Writes a CA, a server certificate and key into `data` and a pg_hba.conf that
    /// refuses TCP connections without TLS; returns the CA certificate.
    fn tls_only(data: &Path) -> PathBuf {
        let certs = certs::make(data);
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
        )
        .unwrap();
        // The server reads its key only if it alone may.
        let status = Command::new("chmod")
            .arg("600")
            .arg(&certs.key)
            .status()
            .unwrap();
        assert!(status.success());
        if is_root() {
            let status = Command::new("chown")
                .arg("postgres:postgres")
                .args([&certs.cert, &certs.key, &data.join("pg_hba.conf")])
                .status()
                .unwrap();
            assert!(status.success());
        }
        certs.ca
    }

    /// The CA that signed the certificate of a server started with TLS.
    pub fn ca(&self) -> &Path {
        self.ca.as_deref().expect("a server started with TLS")
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = self
                .client_tool("pg_isready")
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("PostgreSQL exited ({status}): {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not accept connections within 60 s: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// `postgres://riffle@127.0.0.1:{port}/riffle`.
    pub fn url(&self) -> String {
        format!("postgres://riffle@127.0.0.1:{}/riffle", self.port)
    }

    /// psql connected to `database` as `riffle`, stopping at the first error.
    fn psql_command(&self, database: &str) -> Command {
        let mut command = self.client_tool("psql");
        command
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "riffle",
            ])
            .args(["-d", database, "-X", "-v", "ON_ERROR_STOP=1"]);
        command
    }

    /// Runs `sql` with psql in `database`; returns its unaligned, tuples-only output.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let out = self
            .psql_command(database)
            .args(["-A", "-t", "-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql `{sql}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs the SQL script `file` with psql in `database`, statement by statement (a
    /// script too long for one command line).
    pub fn psql_file(&self, database: &str, file: &Path) {
        let out = self
            .psql_command(database)
            .arg("-q")
            .arg("-f")
            .arg(file)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql -f {} failed: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A client program, over TLS (without verifying: it is our own server) when the
    /// server has it.
    fn client_tool(&self, program: &str) -> Command {
        let mut c = Command::new(tool(&self.bin, program));
        if self.ca.is_some() {
            c.env("PGSSLMODE", "require");
        }
        c
    }

    /// Rows of `sql` in database `riffle`, each as `|`-separated text.
    pub fn rows(&self, sql: &str) -> Vec<String> {
        self.psql("riffle", sql)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGQUIT: immediate shutdown; the directory is removed anyway. The signal goes
            // to `runuser`'s child through the process group, so signal the server's pid
            // file owner.
            let pid_file = self.dir.path().join("data").join("postmaster.pid");
            let pid = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<i32>().ok()));
            if let Some(pid) = pid {
                // SAFETY: kill has no memory preconditions.
                unsafe {
                    libc::kill(pid, libc::SIGQUIT);
                }
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
