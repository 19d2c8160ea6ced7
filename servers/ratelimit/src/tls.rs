//! TLS for the gRPC port, and for the HTTP ports when enabled: server certificates reloaded
//! from disk without dropping the listener, optional client certificates (mutual TLS) with
//! an optional SAN requirement.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig, SignatureScheme,
};

use crate::log::{self, Level};

/// Where the TLS material lives.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Server certificate chain (PEM).
    pub cert: PathBuf,
    /// Server private key (PEM).
    pub key: PathBuf,
    /// CA bundle for client certificates; `None` means no client authentication.
    pub client_ca: Option<PathBuf>,
    /// DNS name that client certificates must carry.
    pub client_san: Option<String>,
}

/// Builds a server configuration from the files, as of now.
pub fn build_config(files: &TlsFiles) -> Result<ServerConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read certificate {}: {e}", files.cert.display()))?;
    if certs.is_empty() {
        return Err(format!("no certificate in {}", files.cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .map_err(|e| format!("cannot read private key {}: {e}", files.key.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(ca)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("cannot read client CA {}: {e}", ca.display()))?;
            for c in cas {
                roots
                    .add(c)
                    .map_err(|e| format!("bad client CA certificate in {}: {e}", ca.display()))?;
            }
            let inner = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("client CA {}: {e}", ca.display()))?;
            let verifier: Arc<dyn ClientCertVerifier> = match &files.client_san {
                None => inner,
                Some(name) => {
                    let name = ServerName::try_from(name.clone())
                        .map_err(|e| format!("GRPC_CLIENT_TLS_SAN {name:?}: {e}"))?;
                    Arc::new(SanVerifier { inner, name })
                }
            };
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("certificate and key do not fit: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// Requires a DNS name in the client certificate, after the chain was verified.
#[derive(Debug)]
struct SanVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    name: ServerName<'static>,
}

impl ClientCertVerifier for SanVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let ok = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        let cert = webpki::EndEntityCert::try_from(end_entity)
            .map_err(|e| rustls::Error::General(format!("client certificate: {e}")))?;
        cert.verify_is_valid_for_subject_name(&self.name)
            .map_err(|_| {
                rustls::Error::General("client certificate does not carry the required SAN".into())
            })?;
        Ok(ok)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The configuration in force; each new connection takes the current one.
pub type SharedConfig = Arc<ArcSwap<ServerConfig>>;

fn fingerprint(files: &TlsFiles) -> Vec<Option<(SystemTime, u64)>> {
    let mut paths = vec![&files.cert, &files.key];
    if let Some(ca) = &files.client_ca {
        paths.push(ca);
    }
    paths
        .into_iter()
        .map(|p| {
            std::fs::metadata(p)
                .ok()
                .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
        })
        .collect()
}

/// Loads the files now (an error stops startup) and then checks them every `every`,
/// installing a new configuration whenever they change and build. A change that does not
/// build (half-written files, a key that does not fit) keeps the old configuration.
pub fn load_and_watch(files: TlsFiles, every: Duration) -> Result<SharedConfig, String> {
    let shared = Arc::new(ArcSwap::from_pointee(build_config(&files)?));
    let weak = Arc::downgrade(&shared);
    tokio::spawn(async move {
        let mut seen = fingerprint(&files);
        loop {
            tokio::time::sleep(every).await;
            let Some(shared) = weak.upgrade() else { return };
            let now = fingerprint(&files);
            if now == seen {
                continue;
            }
            match build_config(&files) {
                Ok(c) => {
                    shared.store(Arc::new(c));
                    seen = now;
                    log::log(Level::Info, "TLS certificate reloaded");
                }
                Err(e) => log::log(
                    Level::Error,
                    &format!("TLS reload failed, keeping the old certificate: {e}"),
                ),
            }
        }
    });
    Ok(shared)
}
