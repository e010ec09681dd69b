//! TLS to an `https://` store: rustls with the `ring` provider, trusting
//! the system's root certificates plus, optionally, the CA certificates of
//! a PEM file (`--upstream-ca-file`) for a store whose certificate a
//! private CA signed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::CertificateDer;

/// CA certificates trusted for the store in addition to the system's.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CaCerts(Vec<CertificateDer<'static>>);

impl std::fmt::Debug for CaCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CaCerts({} certificates)", self.0.len())
    }
}

impl CaCerts {
    /// No extra CA: only the system's roots.
    pub fn none() -> CaCerts {
        CaCerts(Vec::new())
    }

    /// These certificates (DER), each checked to be a usable trust anchor.
    pub fn from_der(certs: Vec<CertificateDer<'static>>) -> Result<CaCerts, CaFileError> {
        for (i, cert) in certs.iter().enumerate() {
            RootCertStore::empty()
                .add(cert.clone())
                .map_err(|e| CaFileError::Invalid {
                    path: PathBuf::new(),
                    index: i + 1,
                    reason: e.to_string(),
                })?;
        }
        Ok(CaCerts(certs))
    }

    /// Every `CERTIFICATE` block of the PEM file at `path` (other blocks,
    /// such as keys, are skipped); at least one, each a usable trust anchor.
    pub fn from_pem_file(path: &Path) -> Result<CaCerts, CaFileError> {
        let text = std::fs::read(path).map_err(|source| CaFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let certs = CertificateDer::pem_slice_iter(&text)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CaFileError::Pem {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        if certs.is_empty() {
            return Err(CaFileError::Empty {
                path: path.to_owned(),
            });
        }
        CaCerts::from_der(certs).map_err(|e| match e {
            CaFileError::Invalid { index, reason, .. } => CaFileError::Invalid {
                path: path.to_owned(),
                index,
                reason,
            },
            other => other,
        })
    }

    /// How many certificates.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Why the CA file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CaFileError {
    /// It cannot be read.
    #[error("cannot read the CA file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is not PEM.
    #[error("the CA file {} is not valid PEM: {reason}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// It holds no `CERTIFICATE` block.
    #[error("the CA file {} holds no PEM CERTIFICATE", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// A certificate in it cannot be a trust anchor.
    #[error("certificate {index} of the CA file {} is not a usable CA certificate: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Which certificate, from 1.
        index: usize,
        /// Why.
        reason: String,
    },
}

/// The system's root certificates, loaded once per process (the platform's
/// store: on Linux the files `SSL_CERT_FILE`/`SSL_CERT_DIR` or the
/// distribution's bundle name).
fn system_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: std::sync::OnceLock<Vec<CertificateDer<'static>>> = std::sync::OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for err in &found.errors {
            tracing::warn!(error = %err, "a system root certificate could not be loaded");
        }
        found.certs
    })
}

/// The client configuration for an `https://` store: TLS 1.2 and 1.3 with
/// the `ring` provider, the system's roots and `extra`.
pub(crate) fn client_config(extra: &CaCerts) -> Result<rustls::ClientConfig, rustls::Error> {
    let mut roots = RootCertStore::empty();
    let (_, unusable) = roots.add_parsable_certificates(system_roots().iter().cloned());
    if unusable > 0 {
        tracing::debug!(unusable, "system root certificates skipped");
    }
    for cert in &extra.0 {
        roots.add(cert.clone())?;
    }
    if roots.is_empty() {
        tracing::warn!(
            "no trusted root certificate for the https store: install the system's CA \
             certificates or pass --upstream-ca-file"
        );
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(config)
}

/// A client configuration that is never used for a handshake (an
/// `http://` store): no roots loaded.
pub(crate) fn unused_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(RootCertStore::empty())
    .with_no_client_auth();
    Ok(config)
}

/// The TLS failure behind a failed connect, said plainly; carried in
/// `UpstreamError::Connect`. It is not retried.
#[derive(Debug, thiserror::Error)]
#[error("TLS handshake with the store failed: {reason}{hint}")]
pub struct TlsHandshakeError {
    /// rustls's reason.
    pub reason: String,
    hint: &'static str,
}

impl TlsHandshakeError {
    /// The TLS error in `err`'s source chain, if the connect failed there.
    pub(crate) fn find(err: &(dyn std::error::Error + 'static)) -> Option<TlsHandshakeError> {
        let mut next = Some(err);
        while let Some(e) = next {
            // An `io::Error`'s `source()` skips the error it wraps (itself
            // perhaps an `io::Error` around rustls's): follow `get_ref()`.
            let wrapped = e
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .map(|inner| inner as &(dyn std::error::Error + 'static));
            if let Some(tls) = e.downcast_ref::<rustls::Error>() {
                let hint = match tls {
                    rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
                        " (the store's certificate is not signed by a trusted CA: \
                         pass the CA's certificate with --upstream-ca-file)"
                    }
                    rustls::Error::InvalidCertificate(
                        rustls::CertificateError::NotValidForName
                        | rustls::CertificateError::NotValidForNameContext { .. },
                    ) => " (the store's certificate does not name the host of --upstream)",
                    _ => "",
                };
                return Some(TlsHandshakeError {
                    reason: tls.to_string(),
                    hint,
                });
            }
            next = wrapped.or_else(|| e.source());
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_file_errors_are_clear() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = CaCerts::from_pem_file(&missing).unwrap_err();
        assert!(matches!(e, CaFileError::Read { .. }), "{e}");
        assert!(e.to_string().contains("missing.pem"), "{e}");

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no PEM here\n").unwrap();
        let e = CaCerts::from_pem_file(&empty).unwrap_err();
        assert!(matches!(e, CaFileError::Empty { .. }), "{e}");

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = CaCerts::from_pem_file(&garbage).unwrap_err();
        assert!(matches!(e, CaFileError::Invalid { index: 1, .. }), "{e:?}");
        assert!(e.to_string().contains("garbage.pem"), "{e}");
    }

    #[test]
    fn debug_shows_a_count() {
        assert_eq!(format!("{:?}", CaCerts::none()), "CaCerts(0 certificates)");
    }
}
