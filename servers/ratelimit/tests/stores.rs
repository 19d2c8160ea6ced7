//! The server on shared stores: Redis and memcached started on loopback ports.

use std::time::{Duration, Instant};

use crate::common::{post_json, request, start};
use test_support::{dns, net, stores as servers, tls};

const RULES: &str = "domain: rl\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: hour, requests_per_unit: 2}\n";
const REQ: &str =
    r#"{"domain":"rl","descriptors":[{"entries":[{"key":"api_key","value":"alice"}]}]}"#;

#[test]
fn redis_backend_shares_counters_between_two_servers() {
    let redis = servers::redis();
    let url = format!("127.0.0.1:{}", redis.port);
    let env = [
        ("BACKEND_TYPE", "redis"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", url.as_str()),
        ("CACHE_KEY_PREFIX", "fleet:"),
    ];
    let a = start(&[("rl.yaml", RULES)], &env);
    let b = start(&[("rl.yaml", RULES)], &env);
    assert_eq!(post_json(a.http, REQ).status, 200);
    assert_eq!(post_json(b.http, REQ).status, 200);
    assert_eq!(
        post_json(a.http, REQ).status,
        429,
        "the fleet shares one counter"
    );
    let keys = servers::redis_cli(redis.port, &["KEYS", "fleet:rl_api_key_alice_*"]);
    assert_eq!(keys.lines().count(), 1, "{keys}");
    assert_eq!(servers::redis_cli(redis.port, &["GET", keys.trim()]), "3");
}

#[test]
fn redis_outage_fails_fast_health_follows_and_recovers() {
    let port = net::free_port();
    let redis = servers::redis_on(port, &[]);
    let url = format!("127.0.0.1:{port}");
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("BACKEND_TYPE", "redis"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", url.as_str()),
            ("REDIS_TIMEOUT", "300ms"),
            ("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "true"),
        ],
    );
    assert_eq!(post_json(srv.http, REQ).status, 200);
    drop(redis);
    let t = Instant::now();
    let r = post_json(srv.http, REQ);
    assert_eq!(r.status, 400, "a store failure answers like upstream");
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        t.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while request(srv.http, "GET", "/healthcheck", b"").status != 500 {
        assert!(Instant::now() < deadline, "health did not follow the store");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stats = request(srv.debug, "GET", "/stats", b"").text();
    assert!(
        stats.contains("ratelimit.service.call.should_rate_limit.redis_error: "),
        "{stats}"
    );
    let _redis = servers::redis_on(port, &[]);
    let deadline = Instant::now() + Duration::from_secs(15);
    for i in 0.. {
        // A fresh key each time: the probes must not use up a quota themselves.
        let probe = REQ.replace("alice", &format!("probe{i}"));
        if post_json(srv.http, &probe).status == 200
            && request(srv.http, "GET", "/healthcheck", b"").status == 200
        {
            break;
        }
        assert!(Instant::now() < deadline, "did not recover");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn memcache_backend_with_local_cache() {
    let a = servers::memcached();
    let b = servers::memcached();
    let hosts = format!("127.0.0.1:{},127.0.0.1:{}", a.port, b.port);
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", hosts.as_str()),
            ("LOCAL_CACHE_SIZE_IN_BYTES", "1048576"),
        ],
    );
    let mut codes = Vec::new();
    for _ in 0..5 {
        codes.push(post_json(srv.http, REQ).status);
        // Memcached counts asynchronously; give each increment time to land.
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(codes, [200, 200, 429, 429, 429]);
    let stats = request(srv.debug, "GET", "/stats", b"").text();
    assert!(
        stats.contains("ratelimit.localcache.hitCount: 2\n"),
        "{stats}"
    );
    assert!(
        stats.contains("ratelimit.service.rate_limit.rl.api_key.over_limit_with_local_cache: 2\n"),
        "{stats}"
    );
    assert_eq!(
        request(srv.http, "GET", "/healthcheck", b"").status,
        200,
        "memcache is healthy (upstream regressed here)"
    );
}

/// Posts `REQ` `n` times, pausing for memcached's asynchronous increments.
fn memcache_codes(srv: &crate::common::Server, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| {
            let code = post_json(srv.http, REQ).status;
            std::thread::sleep(Duration::from_millis(50));
            code
        })
        .collect()
}

#[test]
fn memcache_over_mutual_tls() {
    let pki = tls::pki(&["localhost"]);
    let node = servers::memcached_tls(&[
        format!("ssl_chain_cert={}", pki.server_cert),
        format!("ssl_key={}", pki.server_key),
        format!("ssl_ca_cert={}", pki.ca),
        "ssl_verify_mode=2".into(),
    ]);
    let hosts = format!("localhost:{}", node.port);
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", hosts.as_str()),
            ("MEMCACHE_TLS", "true"),
            ("MEMCACHE_TLS_CACERT", pki.ca.as_str()),
            ("MEMCACHE_TLS_CLIENT_CERT", pki.client_cert.as_str()),
            ("MEMCACHE_TLS_CLIENT_KEY", pki.client_key.as_str()),
        ],
    );
    assert_eq!(memcache_codes(&srv, 3), [200, 200, 429]);
}

#[test]
fn memcache_nodes_from_srv() {
    let a = servers::memcached();
    let b = servers::memcached();
    let dns = dns::SrvDns::start(vec![
        ("localhost".into(), a.port),
        ("localhost".into(), b.port),
    ]);
    let nameserver = dns.addr.to_string();
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_SRV", "_memcache._tcp.ratelimit.test"),
            ("MEMCACHE_SRV_REFRESH", "100ms"),
            ("MEMCACHE_SRV_NAMESERVER", nameserver.as_str()),
        ],
    );
    assert_eq!(memcache_codes(&srv, 3), [200, 200, 429]);
    // The record loses a node: the server says so and keeps answering.
    dns.set(vec![("localhost".into(), a.port)]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log: Vec<String> = srv.proc.lines.try_iter().collect();
        if log.iter().any(|l| l.contains("memcache servers changed")) {
            break;
        }
        assert!(Instant::now() < deadline, "no refresh logged");
        std::thread::sleep(Duration::from_millis(50));
    }
    let other = REQ.replace("alice", "bob");
    assert_eq!(post_json(srv.http, &other).status, 200);
}

/// A huge `hits_addend` over gRPC answers OVER_LIMIT on the shared stores, and so does every
/// later call in the window: the counter it leaves is neither one Redis refuses to count on
/// nor one memcached wraps back to a fresh quota.
#[tokio::test]
async fn huge_hits_addend_saturates_shared_counters() {
    use crate::grpc_face::{call, channel};
    use ratelimit_core::{Code, Descriptor, Request};

    let redis = servers::redis();
    let mc = servers::memcached();
    let redis_url = format!("127.0.0.1:{}", redis.port);
    let mc_host = format!("127.0.0.1:{}", mc.port);
    let stores: [&[(&str, &str)]; 2] = [
        &[
            ("BACKEND_TYPE", "redis"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", redis_url.as_str()),
        ],
        &[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", mc_host.as_str()),
        ],
    ];
    for env in stores {
        let srv = start(&[("rl.yaml", RULES)], env);
        let ch = channel(&srv.grpc).await;
        for huge in [u64::MAX, i64::MAX as u64 + 1] {
            let value = format!("huge{huge}");
            let mut codes = Vec::new();
            for hits in [Some(huge), None, None, Some(0), Some(huge), None] {
                let mut d = Descriptor::new([("api_key", value.as_str())]);
                d.hits_addend = hits;
                let r = call(&ch, &Request::new("rl", vec![d]))
                    .await
                    .unwrap_or_else(|e| panic!("{env:?}: {hits:?} hits after {huge}: {e}"));
                codes.push(r.overall_code);
                // Memcached counts after answering; let each increment land.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert_eq!(codes, [Code::OverLimit; 6], "{env:?}: after {huge}");
        }
    }
    let keys = servers::redis_cli(redis.port, &["KEYS", "rl_api_key_huge*"]);
    assert_eq!(keys.lines().count(), 2, "{keys}");
    for key in keys.lines() {
        let reply = servers::redis_cli(redis.port, &["INCRBY", key, "1"]);
        assert!(reply.parse::<i64>().is_ok(), "INCRBY {key}: {reply}");
    }
}
