//! TLS towards a store (Redis, memcached): which certificates to trust, an optional client
//! certificate, and the opt-out of the name check that still verifies the chain. Built once
//! at start, so that a bad file is a startup error rather than a failure on each connect.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme,
};

/// The files and switches of one store's TLS settings (`REDIS_TLS*`, `MEMCACHE_TLS*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// CA bundle to trust; the system's roots when `None`.
    pub ca: Option<PathBuf>,
    /// Client certificate chain and its key, when the server asks for one (mutual TLS).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Accept a certificate for another name, as long as a trusted CA signed it.
    pub skip_hostname_verification: bool,
}

fn certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{what} {}: {e}", path.display()))?;
    // An empty or non-PEM file parses as "no certificates"; say so now, not at handshake.
    if certs.is_empty() {
        return Err(format!(
            "{what} {}: no PEM certificate in it",
            path.display()
        ));
    }
    Ok(certs)
}

/// A rustls client configuration (ring provider) for `t`. `vars` is the settings' prefix
/// (`REDIS_TLS`, `MEMCACHE_TLS`), so that errors name the variable to fix.
pub fn client_config(t: &ClientTls, vars: &str) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    match &t.ca {
        Some(ca) => {
            let what = format!("{vars}_CACERT");
            for c in certs(ca, &what)? {
                roots
                    .add(c)
                    .map_err(|e| format!("{what} {}: {e}", ca.display()))?;
            }
        }
        None => {
            // Unreadable system certificates are skipped, as Go's x509.SystemCertPool does.
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
        }
    }
    let roots = Arc::new(roots);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if t.skip_hostname_verification {
        let inner = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| format!("{vars}_CACERT: {e}"))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(inner)))
    } else {
        builder.with_root_certificates(roots)
    };
    match &t.client_cert {
        None => Ok(builder.with_no_client_auth()),
        Some((cert, key)) => {
            let chain = certs(cert, &format!("{vars}_CLIENT_CERT"))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("{vars}_CLIENT_KEY {}: {e}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("{vars}_CLIENT_CERT and {vars}_CLIENT_KEY: {e}"))
        }
    }
}

/// Verifies the chain but accepts any server name (`*_TLS_SKIP_HOSTNAME_VERIFICATION`).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        // webpki checks the name last, so a name error means everything else passed.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The host of `host:port` or `[v6]:port`, or `None` when the port is missing or not a
/// number.
pub(crate) fn host_of(addr: &str) -> Option<&str> {
    let (host, port) = match addr.strip_prefix('[') {
        Some(rest) => {
            let (host, port) = rest.split_once(']')?;
            (host, port.strip_prefix(':')?)
        }
        None => addr.rsplit_once(':')?,
    };
    (!host.is_empty() && port.parse::<u16>().is_ok()).then_some(host)
}

/// The name a store's certificate is checked against: the host of `addr` (`host:port`),
/// which must be a DNS name or an IP address.
pub(crate) fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = host_of(addr).ok_or_else(|| format!("{addr:?} is not host:port"))?;
    ServerName::try_from(host.to_owned())
        .map_err(|e| format!("{host:?} cannot be checked against a certificate: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_and_empty_files_name_the_variable() {
        let dir = std::env::temp_dir().join(format!("rl-client-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let missing = dir.join("missing.pem");
        let e = client_config(
            &ClientTls {
                ca: Some(missing.clone()),
                ..ClientTls::default()
            },
            "MEMCACHE_TLS",
        )
        .unwrap_err();
        assert!(e.starts_with("MEMCACHE_TLS_CACERT"), "{e}");
        assert!(e.contains("missing.pem"), "{e}");
        let e = client_config(
            &ClientTls {
                ca: Some(empty.clone()),
                ..ClientTls::default()
            },
            "MEMCACHE_TLS",
        )
        .unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        let e = client_config(
            &ClientTls {
                client_cert: Some((empty.clone(), missing)),
                ..ClientTls::default()
            },
            "REDIS_TLS",
        )
        .unwrap_err();
        assert!(e.starts_with("REDIS_TLS_CLIENT_CERT"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
