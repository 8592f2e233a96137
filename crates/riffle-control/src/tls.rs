//! HTTPS for a control endpoint bound beyond loopback: a certificate chain and key from
//! PEM files (on Kubernetes, a mounted Secret), served with rustls.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A certificate or key file that cannot be used, named.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file cannot be read or holds no PEM object of the kind wanted.
    #[error("{path}: {what}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What it should hold.
        what: &'static str,
        /// Why it does not.
        message: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, say).
    #[error("the certificate {cert} with the key {key}: {message}")]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        message: String,
    },
}

/// What an HTTPS control endpoint serves with.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.write_str("ServerTls")
    }
}

impl ServerTls {
    /// The certificate chain in `cert` and the private key in `key` (PEM).
    ///
    /// # Errors
    /// A file is unreadable or holds no certificate or key, or the pair does not match.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        fn file<'a>(
            path: &'a Path,
            what: &'static str,
        ) -> impl Fn(rustls::pki_types::pem::Error) -> TlsError + 'a {
            move |e| TlsError::File {
                path: path.to_path_buf(),
                what,
                message: e.to_string(),
            }
        }
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .map_err(file(cert, "a PEM certificate chain"))?
            .collect::<Result<_, _>>()
            .map_err(file(cert, "a PEM certificate chain"))?;
        if chain.is_empty() {
            return Err(TlsError::File {
                path: cert.to_path_buf(),
                what: "a PEM certificate chain",
                message: "no CERTIFICATE in it".into(),
            });
        }
        let private = PrivateKeyDer::from_pem_file(key).map_err(file(key, "a PEM private key"))?;
        let pair = |message: String| TlsError::Pair {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            message,
        };
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| pair(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| pair(e.to_string()))?;
        Ok(Self {
            config: Arc::new(config),
        })
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}
