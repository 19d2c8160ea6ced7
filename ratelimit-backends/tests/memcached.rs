//! memcached over TLS (server verified against a CA, and mutual TLS), and node lists from a
//! DNS SRV record served by a test DNS server on a loopback port, refreshed while running.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ratelimit_backends::memcached::{
    MemcachedSettings, MemcachedStore, MemcachedTls, Severity, node_for,
};
use ratelimit_core::{CounterStore, Increment, Unit};

use crate::conformance::conformance;
use crate::servers::{self, Pki, SrvDns};

fn tls_opts(pki: &Pki, mutual: bool) -> Vec<String> {
    let mut o = vec![
        format!("ssl_chain_cert={}", pki.server_cert),
        format!("ssl_key={}", pki.server_key),
    ];
    if mutual {
        // 2 = the client must present a certificate signed by ssl_ca_cert.
        o.push(format!("ssl_ca_cert={}", pki.ca));
        o.push("ssl_verify_mode=2".into());
    }
    o
}

fn tls(pki: &Pki, client: bool) -> MemcachedTls {
    MemcachedTls {
        ca: Some(PathBuf::from(&pki.ca)),
        client_cert: client.then(|| {
            (
                PathBuf::from(&pki.client_cert),
                PathBuf::from(&pki.client_key),
            )
        }),
        skip_hostname_verification: false,
    }
}

fn store(nodes: Vec<String>, tls: Option<MemcachedTls>) -> Arc<MemcachedStore> {
    Arc::new(
        MemcachedStore::new(MemcachedSettings {
            nodes,
            tls,
            ..MemcachedSettings::default()
        })
        .unwrap(),
    )
}

async fn one_increment(store: &MemcachedStore) -> Result<(), String> {
    let inc = Increment::window("tls_probe", 1, Unit::Minute, 60);
    store
        .increment(0, &[inc], &mut [0])
        .await
        .map_err(|e| e.message)
}

#[tokio::test]
async fn memcached_over_tls() {
    let pki = servers::pki(&["localhost", "127.0.0.1"]);
    let a = servers::memcached_tls(&tls_opts(&pki, false));
    let b = servers::memcached_tls(&tls_opts(&pki, false));
    // One node by name, one by address: both are checked against the certificate.
    let s = store(
        vec![
            format!("localhost:{}", a.port),
            format!("127.0.0.1:{}", b.port),
        ],
        Some(tls(&pki, false)),
    );
    conformance("memcached-tls", s.clone(), Some(s)).await;
}

#[tokio::test]
async fn memcached_over_mutual_tls() {
    let pki = servers::pki(&["localhost"]);
    let a = servers::memcached_tls(&tls_opts(&pki, true));
    let b = servers::memcached_tls(&tls_opts(&pki, true));
    let nodes = vec![
        format!("localhost:{}", a.port),
        format!("localhost:{}", b.port),
    ];
    let s = store(nodes.clone(), Some(tls(&pki, true)));
    conformance("memcached-mtls", s.clone(), Some(s)).await;
    // Without a client certificate the server refuses us.
    let anonymous = store(nodes, Some(tls(&pki, false)));
    assert!(one_increment(&anonymous).await.is_err());
}

#[tokio::test]
async fn memcached_tls_verifies_the_server() {
    let pki = servers::pki(&["memcached.example"]);
    let node = servers::memcached_tls(&tls_opts(&pki, false));
    let nodes = vec![format!("localhost:{}", node.port)];
    // The certificate names another host.
    let e = one_increment(&store(nodes.clone(), Some(tls(&pki, false))))
        .await
        .unwrap_err();
    assert!(e.contains("certificate"), "{e}");
    // ... which the switch accepts, still checking the chain.
    let skip = MemcachedTls {
        skip_hostname_verification: true,
        ..tls(&pki, false)
    };
    one_increment(&store(nodes.clone(), Some(skip.clone())))
        .await
        .unwrap();
    let stranger = servers::pki(&["localhost"]);
    let other_ca = MemcachedTls {
        ca: Some(PathBuf::from(&stranger.ca)),
        ..skip
    };
    let e = one_increment(&store(nodes.clone(), Some(other_ca)))
        .await
        .unwrap_err();
    assert!(e.contains("certificate"), "{e}");
    // Plain TCP to a TLS port fails within the timeout instead of hanging.
    let t = Instant::now();
    let plain = Arc::new(
        MemcachedStore::new(MemcachedSettings {
            nodes,
            timeout: Duration::from_millis(300),
            ..MemcachedSettings::default()
        })
        .unwrap(),
    );
    assert!(one_increment(&plain).await.is_err());
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[test]
fn memcached_tls_files_are_checked_at_start() {
    let pki = servers::pki(&["localhost"]);
    let build = |t: MemcachedTls| {
        MemcachedStore::new(MemcachedSettings {
            nodes: vec!["localhost:11211".into()],
            tls: Some(t),
            ..MemcachedSettings::default()
        })
        .err()
        .map(|e| e.message)
        .unwrap_or_default()
    };
    let e = build(MemcachedTls {
        ca: Some("/nonexistent/ca.pem".into()),
        ..MemcachedTls::default()
    });
    assert!(e.contains("MEMCACHE_TLS_CACERT /nonexistent/ca.pem"), "{e}");
    let e = build(MemcachedTls {
        ca: Some(PathBuf::from(&pki.server_key)),
        ..MemcachedTls::default()
    });
    assert!(e.contains("MEMCACHE_TLS_CACERT"), "{e}");
    // A key that does not belong to the certificate.
    let e = build(MemcachedTls {
        client_cert: Some((
            PathBuf::from(&pki.client_cert),
            PathBuf::from(&pki.server_key),
        )),
        ..tls(&pki, false)
    });
    assert!(e.contains("MEMCACHE_TLS_CLIENT_CERT"), "{e}");
}

fn srv_settings(dns: &SrvDns, refresh: Duration) -> MemcachedSettings {
    MemcachedSettings {
        srv: Some("_memcache._tcp.ratelimit.test".into()),
        srv_refresh: refresh,
        srv_nameserver: Some(dns.addr),
        ..MemcachedSettings::default()
    }
}

#[tokio::test]
async fn memcached_nodes_from_srv() {
    let a = servers::memcached();
    let b = servers::memcached();
    let dns = SrvDns::start(vec![
        ("localhost.".into(), b.port),
        ("localhost.".into(), a.port),
    ]);
    let s = Arc::new(
        MemcachedStore::connect(srv_settings(&dns, Duration::ZERO), |_, _| {})
            .await
            .unwrap(),
    );
    // Ordered, whatever order the DNS answer had: every instance maps keys alike.
    let mut expected = [a.port, b.port];
    expected.sort();
    assert_eq!(
        s.servers(),
        expected
            .iter()
            .map(|p| format!("localhost:{p}"))
            .collect::<Vec<_>>()
    );
    conformance("memcached-srv", s.clone(), Some(s)).await;
}

#[tokio::test]
async fn memcached_srv_failure_at_start_names_the_record() {
    let dns = SrvDns::start(Vec::new());
    let e = MemcachedStore::connect(srv_settings(&dns, Duration::ZERO), |_, _| {})
        .await
        .err()
        .unwrap();
    assert_eq!(e.err_type, "memcache_error");
    assert!(
        e.message.contains("_memcache._tcp.ratelimit.test"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn memcached_srv_refresh_swaps_the_node_list() {
    let a = servers::memcached();
    let b = servers::memcached();
    let dns = SrvDns::start(vec![("localhost".into(), a.port)]);
    let logs = Arc::new(Mutex::new(Vec::<(Severity, String)>::new()));
    let seen = logs.clone();
    let s = MemcachedStore::connect(
        srv_settings(&dns, Duration::from_millis(100)),
        move |sev, msg| seen.lock().unwrap().push((sev, msg.to_owned())),
    )
    .await
    .unwrap();
    assert_eq!(s.servers(), [format!("localhost:{}", a.port)]);

    dns.set(vec![
        ("localhost".into(), a.port),
        ("localhost".into(), b.port),
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.servers().len() != 2 {
        assert!(Instant::now() < deadline, "the refresh did not happen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ports = {
        let mut p = [a.port, b.port];
        p.sort();
        p
    };
    assert!(
        logs.lock()
            .unwrap()
            .iter()
            .any(|(sev, m)| *sev == Severity::Info && m.contains("changed")),
        "{:?}",
        logs.lock().unwrap()
    );
    // Keys now land on the node the two-node list maps them to.
    let incs: Vec<Increment> = (0..20)
        .map(|i| Increment::window(format!("srv_refresh_{i}"), 3, Unit::Hour, 3600))
        .collect();
    s.increment(0, &incs, &mut [0; 20]).await.unwrap();
    s.settled().await;
    let mut per_node = [0; 2];
    for inc in &incs {
        let n = node_for(&inc.key, 2);
        per_node[n] += 1;
        assert_eq!(
            servers::mc_get(ports[n], &inc.key).as_deref(),
            Some("3"),
            "{}",
            inc.key
        );
        assert_eq!(servers::mc_get(ports[1 - n], &inc.key), None, "{}", inc.key);
    }
    assert!(per_node.iter().all(|c| *c > 0), "{per_node:?}");

    // A failed refresh keeps the list and says so.
    dns.set(Vec::new());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !logs
        .lock()
        .unwrap()
        .iter()
        .any(|(sev, m)| *sev == Severity::Error && m.contains("keeping the 2 current servers"))
    {
        assert!(Instant::now() < deadline, "{:?}", logs.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.servers().len(), 2);
    let mut v = [0u64];
    s.get(0, &crate::reads(&["srv_refresh_0"]), &mut v)
        .await
        .unwrap();
    assert_eq!(v[0], 3);
}

#[tokio::test]
async fn memcached_a_refused_key_does_not_stop_the_batch() {
    let node = servers::memcached();
    servers::mc_set(node.port, "batch_text", "not a number");
    let s = store(vec![format!("127.0.0.1:{}", node.port)], None);
    let incs: Vec<Increment> = ["batch_text", "batch_new", "batch_new"]
        .iter()
        .map(|k| Increment::window(k.to_string(), 2, Unit::Hour, 3600))
        .collect();
    let mut counts = [0; 3];
    s.increment(0, &incs, &mut counts).await.unwrap();
    // A value that is not a number reads as 0, as upstream.
    assert_eq!(counts, [2, 2, 2]);
    s.settled().await;
    assert_eq!(
        servers::mc_get(node.port, "batch_new").as_deref(),
        Some("4")
    );
    assert_eq!(
        servers::mc_get(node.port, "batch_text").as_deref(),
        Some("not a number")
    );
}

#[tokio::test]
async fn memcached_restart_costs_no_failed_read() {
    let port = servers::free_port();
    let node = servers::memcached_on(port);
    let s = store(vec![format!("127.0.0.1:{port}")], None);
    let mut v = [0u64];
    // Pool a few connections, then restart the node under them.
    for _ in 0..3 {
        s.get(0, &crate::reads(&["restart_probe"]), &mut v)
            .await
            .unwrap();
    }
    drop(node);
    let _node = servers::memcached_on(port);
    for _ in 0..3 {
        s.get(0, &crate::reads(&["restart_probe"]), &mut v)
            .await
            .unwrap();
    }
}
