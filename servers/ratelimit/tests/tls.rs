//! TLS and mutual TLS on the gRPC port, with certificates made in the test.

use std::path::Path;
use std::time::{Duration, Instant};

use ratelimit_core::Code;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::common::{start_in, temp_dir};
use crate::grpc_face::{RULES, call, req};

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A leaf certificate for `names`, as (cert PEM, key PEM).
    fn leaf(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    // Write then rename, as tools that rotate certificates do.
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    p.to_str().unwrap().to_owned()
}

async fn tls_channel(
    addr: &str,
    ca: &str,
    identity: Option<&(String, String)>,
) -> Result<Channel, String> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some((c, k)) = identity {
        tls = tls.identity(Identity::from_pem(c, k));
    }
    Endpoint::from_shared(format!("https://{addr}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .map_err(|e| format!("{e:?}"))
}

/// A call through a fresh TLS connection: Ok(code) or the error text.
async fn tls_call(
    addr: &str,
    ca: &str,
    identity: Option<&(String, String)>,
) -> Result<Code, String> {
    let ch = tls_channel(addr, ca, identity).await?;
    call(&ch, &req("rl", &[("free", "x")]))
        .await
        .map(|r| r.overall_code)
        .map_err(|s| format!("{s:?}"))
}

#[tokio::test]
async fn server_tls_and_certificate_rotation_without_dropping_the_listener() {
    let dir = temp_dir("tls");
    let ca1 = Ca::new("ca one");
    let (cert, key) = ca1.leaf(&["localhost"]);
    let cert_path = write(&dir, "server.crt", &cert);
    let key_path = write(&dir, "server.key", &key);
    let srv = start_in(
        dir.clone(),
        &[("rl.yaml", RULES)],
        &[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", &cert_path),
            ("GRPC_SERVER_TLS_KEY", &key_path),
        ],
    );
    assert_eq!(tls_call(&srv.grpc, &ca1.pem(), None).await, Ok(Code::Ok));
    // Plaintext gRPC is refused on a TLS port.
    let plain = Endpoint::from_shared(format!("http://{}", srv.grpc))
        .unwrap()
        .connect()
        .await;
    if let Ok(ch) = plain {
        assert!(call(&ch, &req("rl", &[("free", "x")])).await.is_err());
    }
    // A connection opened before the rotation keeps working after it.
    let before = tls_channel(&srv.grpc, &ca1.pem(), None).await.unwrap();

    // Rotate to a certificate from another CA.
    let ca2 = Ca::new("ca two");
    let (cert2, key2) = ca2.leaf(&["localhost"]);
    write(&dir, "server.key", &key2);
    write(&dir, "server.crt", &cert2);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if tls_call(&srv.grpc, &ca2.pem(), None).await == Ok(Code::Ok) {
            break;
        }
        assert!(Instant::now() < deadline, "new certificate never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        tls_call(&srv.grpc, &ca1.pem(), None).await.is_err(),
        "old CA no longer matches"
    );
    assert_eq!(
        call(&before, &req("rl", &[("free", "x")]))
            .await
            .unwrap()
            .overall_code,
        Code::Ok,
        "the established connection was not dropped"
    );

    // A broken rotation (garbage key) keeps the current certificate.
    write(&dir, "server.key", "not a key");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(tls_call(&srv.grpc, &ca2.pem(), None).await, Ok(Code::Ok));
}

/// A directory with a server certificate for `localhost` and a client CA, as (directory,
/// server CA, client CA, [certificate, key, client CA] paths).
fn mutual_tls_files(tag: &str) -> (std::path::PathBuf, Ca, Ca, [String; 3]) {
    let dir = temp_dir(tag);
    let server_ca = Ca::new("server ca");
    let client_ca = Ca::new("client ca");
    let (cert, key) = server_ca.leaf(&["localhost"]);
    let paths = [
        write(&dir, "server.crt", &cert),
        write(&dir, "server.key", &key),
        write(&dir, "clients.crt", &client_ca.pem()),
    ];
    (dir, server_ca, client_ca, paths)
}

#[tokio::test]
async fn mutual_tls_requires_a_client_certificate_with_the_san() {
    let (dir, server_ca, client_ca, env_paths) = mutual_tls_files("mtls");
    let srv = start_in(
        dir.clone(),
        &[("rl.yaml", RULES)],
        &[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", &env_paths[0]),
            ("GRPC_SERVER_TLS_KEY", &env_paths[1]),
            ("GRPC_CLIENT_TLS_CACERT", &env_paths[2]),
            ("GRPC_CLIENT_TLS_SAN", "envoy.internal"),
        ],
    );
    let good = client_ca.leaf(&["envoy.internal"]);
    assert_eq!(
        tls_call(&srv.grpc, &server_ca.pem(), Some(&good)).await,
        Ok(Code::Ok)
    );
    assert!(
        tls_call(&srv.grpc, &server_ca.pem(), None).await.is_err(),
        "no client certificate"
    );
    let wrong_san = client_ca.leaf(&["someone.else"]);
    assert!(
        tls_call(&srv.grpc, &server_ca.pem(), Some(&wrong_san))
            .await
            .is_err(),
        "SAN mismatch"
    );
    let stranger = Ca::new("stranger").leaf(&["envoy.internal"]);
    assert!(
        tls_call(&srv.grpc, &server_ca.pem(), Some(&stranger))
            .await
            .is_err(),
        "unknown CA"
    );
    // The good client still works after the rejected ones.
    assert_eq!(
        tls_call(&srv.grpc, &server_ca.pem(), Some(&good)).await,
        Ok(Code::Ok)
    );
}

#[test]
fn tls_without_files_is_a_startup_error() {
    let dir = temp_dir("tlsmissing");
    let mut cmd = crate::common::command(&dir, &[("GRPC_SERVER_USE_TLS", "true")]);
    let out = cmd.output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GRPC_SERVER_TLS_CERT"));
    let mut cmd = crate::common::command(
        &dir,
        &[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", "/nonexistent.crt"),
            ("GRPC_SERVER_TLS_KEY", "/nonexistent.key"),
        ],
    );
    let out = cmd.output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read certificate /nonexistent.crt")
    );
}

/// `GET path` over HTTPS on a fresh connection: the status, or the handshake's error.
async fn https_get(
    addr: std::net::SocketAddr,
    ca: &str,
    identity: Option<&(String, String)>,
    path: &str,
) -> Result<u16, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
        .unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((c, k)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(c.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(k.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    // With TLS 1.3 a refused client certificate shows only here, as an alert.
    match tls.read_to_end(&mut raw).await {
        Ok(_) => {}
        Err(e) if raw.is_empty() => return Err(e.to_string()),
        Err(_) => {}
    }
    Ok(test_support::http::parse(&raw).status)
}

#[tokio::test]
async fn the_http_ports_serve_tls_and_mutual_tls_with_the_grpc_ports_files() {
    let (dir, server_ca, client_ca, paths) = mutual_tls_files("httptls");
    let srv = start_in(
        dir.clone(),
        &[("rl.yaml", RULES)],
        &[
            ("HTTP_SERVER_USE_TLS", "true"),
            ("DEBUG_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", &paths[0]),
            ("GRPC_SERVER_TLS_KEY", &paths[1]),
            ("GRPC_CLIENT_TLS_CACERT", &paths[2]),
        ],
    );
    let client = client_ca.leaf(&["prober"]);
    let ca = server_ca.pem();
    assert_eq!(
        https_get(srv.http, &ca, Some(&client), "/healthcheck").await,
        Ok(200)
    );
    assert_eq!(
        https_get(srv.debug, &ca, Some(&client), "/rlconfig").await,
        Ok(200)
    );
    assert!(
        https_get(srv.http, &ca, None, "/healthcheck")
            .await
            .is_err(),
        "a client without a certificate was served"
    );
    let plain = tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(|| crate::common::request(srv.debug, "GET", "/stats", b""))
    });
    assert!(
        !matches!(plain.await.unwrap(), Ok(r) if r.status == 200),
        "plaintext was served on a TLS port"
    );
    // gRPC stays plaintext: its own switch is off.
    let ch = crate::grpc_face::channel(&srv.grpc).await;
    assert!(call(&ch, &req("rl", &[("free", "x")])).await.is_ok());
}
