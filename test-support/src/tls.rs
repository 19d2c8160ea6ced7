//! A throwaway CA with a server and a client certificate, as PEM files.

/// A CA with a server certificate and a client certificate, written as PEM files.
pub struct Pki {
    pub ca: String,
    pub server_cert: String,
    pub server_key: String,
    pub client_cert: String,
    pub client_key: String,
}

/// A fresh CA; the server certificate carries `server_names` (DNS names or IPs).
pub fn pki(server_names: &[&str]) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let dir = crate::net::temp_dir("pki", "certs");
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "ratelimit test CA");
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let leaf = |names: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (sc, sk) = leaf(server_names.iter().map(|s| s.to_string()).collect());
    let (cc, ck) = leaf(vec!["ratelimit-client".into()]);
    Pki {
        ca: write("ca.pem", &ca.pem()),
        server_cert: write("server.pem", &sc),
        server_key: write("server.key", &sk),
        client_cert: write("client.pem", &cc),
        client_key: write("client.key", &ck),
    }
}
