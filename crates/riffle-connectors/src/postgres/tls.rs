//! TLS to PostgreSQL, asked for in the URL as libpq users write it: `sslmode=require`
//! (or `verify-ca`, `verify-full`) turns it on, `sslrootcert=/path/ca.pem` names the
//! CA to trust instead of the system's. riffle always verifies the server's certificate
//! and host name (libpq's `verify-full`); without `sslmode`, or with `disable` or
//! `prefer`, it connects without TLS.

use riffle_core::{Error, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Whether and how a connection uses TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TlsMode {
    /// Plain TCP.
    Off,
    /// TLS, trusting `root_cert` (PEM) or else the system's CAs.
    Verified { root_cert: Option<PathBuf> },
}

/// Splits the TLS parameters out of `url`: the URL to give the client (without the
/// ones it does not know), and the TLS mode.
pub(crate) fn split_tls_params(url: &str) -> Result<(String, TlsMode)> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_string(), TlsMode::Off));
    };
    let mut kept = Vec::new();
    let (mut tls, mut root_cert) = (false, None);
    for param in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = param.split_once('=').unwrap_or((param, ""));
        match key {
            "sslmode" => {
                tls = match value {
                    "disable" | "allow" | "prefer" => false,
                    "require" | "verify-ca" | "verify-full" => true,
                    other => {
                        return Err(Error::config(
                            "url",
                            format!("sslmode={other}: use disable, require or verify-full"),
                        ))
                    }
                }
            }
            "sslrootcert" => root_cert = Some(PathBuf::from(value)),
            _ => kept.push(param),
        }
    }
    if root_cert.is_some() && !tls {
        return Err(Error::config(
            "url",
            "sslrootcert is given but TLS is not on: add sslmode=require",
        ));
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let mode = if tls {
        TlsMode::Verified { root_cert }
    } else {
        TlsMode::Off
    };
    Ok((url, mode))
}

/// A TLS connector that trusts `root_cert`, or the system's CAs when it is `None`.
pub(crate) fn connector(root_cert: Option<&Path>) -> Result<MakeRustlsConnect> {
    let mut roots = rustls::RootCertStore::empty();
    match root_cert {
        Some(path) => {
            let bad =
                |e: String| Error::config("url", format!("sslrootcert `{}`: {e}", path.display()));
            let certs = CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))?;
            for cert in certs {
                let cert = cert.map_err(|e| bad(e.to_string()))?;
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(bad("holds no PEM certificate".into()));
            }
        }
        None => {
            // Certificates the system cannot parse are skipped, as browsers do.
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(Error::config(
                    "url",
                    "sslmode=require, but the system has no CA certificates: name the CA that signed the server's certificate with sslrootcert=/path/ca.pem",
                ));
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::config("url", format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_are_taken_out_of_the_url() {
        let url = "postgres://u@h:5432/db";
        assert_eq!(
            split_tls_params(url).unwrap(),
            (url.to_string(), TlsMode::Off)
        );
        assert_eq!(
            split_tls_params(
                "postgres://u@h/db?sslmode=verify-full&sslrootcert=/c.pem&connect_timeout=5"
            )
            .unwrap(),
            (
                "postgres://u@h/db?connect_timeout=5".to_string(),
                TlsMode::Verified {
                    root_cert: Some("/c.pem".into())
                }
            )
        );
        assert_eq!(
            split_tls_params("postgres://u@h/db?sslmode=prefer").unwrap(),
            ("postgres://u@h/db".to_string(), TlsMode::Off)
        );
        let e = split_tls_params("postgres://u@h/db?sslmode=always").unwrap_err();
        assert!(e.to_string().contains("sslmode=always"), "{e}");
        let e = split_tls_params("postgres://u@h/db?sslrootcert=/c.pem").unwrap_err();
        assert!(e.to_string().contains("sslmode=require"), "{e}");
    }
}
