//! Mutual TLS on the exchange (docs/cluster.md, "Security"): every worker presents a
//! certificate signed by the job's certificate authority and accepts only peers that do,
//! both as server and as client. The files are PEM (on Kubernetes, a mounted Secret);
//! `riffle run --workers N` makes its own, and `riffle certificates` makes them for
//! other machines, with [`WorkerCertificates`].

use crate::error::{ClusterError, ClusterResult};
use std::path::{Path, PathBuf};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// Where a worker's TLS files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// This worker's certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The certificate authority that signs every worker's certificate (PEM).
    pub ca: PathBuf,
}

/// A worker's identity and the authority it trusts, read from [`TlsFiles`].
#[derive(Clone)]
pub struct ExchangeTls {
    identity: Identity,
    ca: Certificate,
}

impl std::fmt::Debug for ExchangeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.write_str("ExchangeTls")
    }
}

fn read(path: &Path, what: &str) -> ClusterResult<Vec<u8>> {
    let bytes = std::fs::read(path)
        .map_err(|e| ClusterError::Unsupported(format!("{}: {what}: {e}", path.display())))?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Err(ClusterError::Unsupported(format!(
            "{}: {what}: not PEM (no -----BEGIN line)",
            path.display()
        )));
    }
    Ok(bytes)
}

impl ExchangeTls {
    /// Reads the files.
    ///
    /// # Errors
    /// A file is unreadable or not PEM; the error names it. (A certificate and key
    /// that do not match fail the first connection, naming the worker's address.)
    pub fn from_files(files: &TlsFiles) -> ClusterResult<Self> {
        let cert = read(&files.cert, "the worker's certificate (--tls-cert)")?;
        let key = read(&files.key, "the worker's private key (--tls-key)")?;
        let ca = read(&files.ca, "the certificate authority (--tls-ca)")?;
        Ok(Self {
            identity: Identity::from_pem(cert, key),
            ca: Certificate::from_pem(ca),
        })
    }

    /// The server side: this worker's identity; clients must present a certificate of
    /// the authority.
    pub(crate) fn server(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .client_ca_root(self.ca.clone())
            // A connection that does not finish its handshake in time is dropped: a
            // stranger cannot hold connections open without a certificate.
            .timeout(crate::links::KEEP_ALIVE_TIMEOUT)
    }

    /// The client side towards `host`: the server's certificate must be the
    /// authority's and name `host`; this worker presents its own.
    pub(crate) fn client(&self, host: &str) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .ca_certificate(self.ca.clone())
            .identity(self.identity.clone())
            .domain_name(host)
    }
}

/// The host part of `host:port` (`[::1]:7070` → `::1`).
pub(crate) fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// A new certificate authority and one certificate it signed for every worker's host,
/// for server and client use, written as PEM files (`ca.crt`, `worker.crt`,
/// `worker.key`) into a directory only this user can read.
pub struct WorkerCertificates {
    /// The files, in the directory.
    pub files: TlsFiles,
}

impl WorkerCertificates {
    /// For the workers `riffle run --workers N` starts on this machine: 127.0.0.1 and
    /// localhost.
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub fn local(dir: &Path) -> ClusterResult<Self> {
        Self::create(dir, &["127.0.0.1".to_string(), "localhost".to_string()])
    }

    /// Makes them in `dir` (created, mode 0700) for `hosts` (names or IP addresses).
    ///
    /// # Errors
    /// The directory cannot be written or the certificates made (a host that is
    /// neither a name nor an address).
    pub fn create(dir: &Path, hosts: &[String]) -> ClusterResult<Self> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair,
        };
        let failed =
            |e: rcgen::Error| ClusterError::Unsupported(format!("making a certificate: {e}"));
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "riffle local workers");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(failed)?)
            .map_err(failed)?;
        if let Some(bad) = hosts.iter().find(|h| !is_host(h)) {
            return Err(ClusterError::Unsupported(format!(
                "`{bad}` is not a host name or IP address (give the host of a --workers address, without its port)"
            )));
        }
        let mut params = CertificateParams::new(hosts.to_vec()).map_err(failed)?;
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params
            .distinguished_name
            .push(DnType::CommonName, "riffle worker");
        let key = KeyPair::generate().map_err(failed)?;
        let cert = params.signed_by(&key, &ca).map_err(failed)?;
        let files = TlsFiles {
            cert: dir.join("worker.crt"),
            key: dir.join("worker.key"),
            ca: dir.join("ca.crt"),
        };
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |e: std::io::Error| ClusterError::Unsupported(format!("{path}: {e}"))
        };
        private_dir(dir).map_err(io(dir))?;
        std::fs::write(&files.ca, ca.pem()).map_err(io(&files.ca))?;
        std::fs::write(&files.cert, cert.pem()).map_err(io(&files.cert))?;
        write_private(&files.key, key.serialize_pem().as_bytes()).map_err(io(&files.key))?;
        Ok(Self { files })
    }
}

/// Whether `host` is an IP address or a DNS name (letters, digits, `-`, `.`).
fn is_host(host: &str) -> bool {
    host.parse::<std::net::IpAddr>().is_ok()
        || (!host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            }))
}

/// Writes `bytes` into `path`, readable by its owner only, whatever was there.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        builder.mode(0o700);
        builder.create(dir)?;
        // A directory that was already there keeps its mode unless told.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    #[cfg(not(unix))]
    builder.create(dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_an_address_is_what_its_certificate_must_name() {
        assert_eq!(host_of("127.0.0.1:7070"), "127.0.0.1");
        assert_eq!(host_of("riffle-1.riffle:7070"), "riffle-1.riffle");
        assert_eq!(host_of("[::1]:7070"), "::1");
    }

    #[test]
    fn local_certificates_are_pem_files_the_exchange_reads() {
        let dir = tempfile::tempdir().unwrap();
        let made = WorkerCertificates::local(&dir.path().join("tls")).unwrap();
        assert!(ExchangeTls::from_files(&made.files).is_ok());
        let key = std::fs::read_to_string(&made.files.key).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "{key}");
    }

    #[test]
    fn the_key_is_readable_by_its_owner_only_even_in_an_open_directory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("worker.key"), "old").unwrap();
        let made = WorkerCertificates::local(dir.path()).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&made.files.key), 0o600);
        assert_eq!(mode(dir.path()), 0o700);
    }

    #[test]
    fn a_host_with_a_port_or_spaces_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["10.0.0.1:7070", "not a host!", ""] {
            assert!(
                WorkerCertificates::create(dir.path(), &[bad.to_string()]).is_err(),
                "{bad}"
            );
        }
        let good = ["riffle-0.riffle".to_string(), "::1".to_string()];
        assert!(WorkerCertificates::create(dir.path(), &good).is_ok());
    }

    #[test]
    fn a_file_that_is_not_pem_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let made = WorkerCertificates::local(dir.path()).unwrap();
        std::fs::write(&made.files.ca, "not a certificate").unwrap();
        let error = ExchangeTls::from_files(&made.files)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("ca.crt") && error.contains("--tls-ca"),
            "{error}"
        );
    }
}
