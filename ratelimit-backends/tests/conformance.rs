//! One suite, every store: the decisions a limiter makes over the store, and the store's
//! own read, refund and concurrency behaviour.

use std::sync::Arc;
use std::time::Duration;

use ratelimit_backends::memcached::{MemcachedSettings, MemcachedStore};
use ratelimit_backends::redis::{RedisKind, RedisSettings, RedisTls, StartupBackoff};
use ratelimit_backends::{MemoryStore, RedisStore};
use ratelimit_core::{
    Code, CounterStore, Descriptor, Increment, Limiter, ManualClock, Request, Unit,
};

use crate::servers;

const RULES: &str = "domain: conf\ndescriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: h
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: mo
    rate_limit: {unit: month, requests_per_unit: 5}
";

/// Memcached applies increments after answering; the suite waits for them so that each
/// step sees the previous one, as a sequential client of any store would over time.
async fn settle(mc: &Option<Arc<MemcachedStore>>) {
    if let Some(m) = mc {
        m.settled().await;
    }
}

fn one(key: &str, value: &str) -> Request {
    Request::new("conf", vec![Descriptor::new([(key, value)])])
}

pub async fn conformance(
    name: &str,
    store: Arc<dyn CounterStore>,
    mc: Option<Arc<MemcachedStore>>,
) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let clock = Arc::new(ManualClock::new(now / 60 * 60));
    let limiter = Limiter::builder(store.clone(), clock.clone())
        .yaml("conf.yaml", RULES)
        .build()
        .unwrap();
    let decide = |r: Request| {
        let limiter = &limiter;
        let mc = &mc;
        async move {
            let resp = limiter
                .should_rate_limit(&r)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            settle(mc).await;
            resp
        }
    };

    // Counting to the limit and over it.
    let mut seen = Vec::new();
    for _ in 0..4 {
        let r = decide(one("k", "a")).await;
        seen.push((r.overall_code, r.statuses[0].limit_remaining));
    }
    assert_eq!(
        seen,
        [
            (Code::Ok, 2),
            (Code::Ok, 1),
            (Code::Ok, 0),
            (Code::OverLimit, 0)
        ],
        "{name}: counting"
    );
    // Another value has its own counter.
    assert_eq!(
        decide(one("k", "b")).await.statuses[0].limit_remaining,
        2,
        "{name}: separate keys"
    );

    // hits_addend, peeking with 0, going over by several.
    let mut r = one("h", "x");
    r.hits_addend = 4;
    assert_eq!(
        decide(r).await.statuses[0].limit_remaining,
        6,
        "{name}: hits_addend"
    );
    let peek = Request::new("conf", vec![Descriptor::new([("h", "x")]).with_hits(0)]);
    assert_eq!(
        decide(peek.clone()).await.statuses[0].limit_remaining,
        6,
        "{name}: peek"
    );
    assert_eq!(
        decide(peek).await.statuses[0].limit_remaining,
        6,
        "{name}: peek twice"
    );
    let big = Request::new("conf", vec![Descriptor::new([("h", "x")]).with_hits(7)]);
    assert_eq!(
        decide(big).await.overall_code,
        Code::OverLimit,
        "{name}: over by several"
    );

    // Several descriptors in one request: the OR of their decisions.
    let both = Request::new(
        "conf",
        vec![Descriptor::new([("k", "a")]), Descriptor::new([("k", "c")])],
    );
    let r = decide(both).await;
    assert_eq!(r.overall_code, Code::OverLimit, "{name}: multi");
    assert_eq!(
        r.statuses[1].limit_remaining, 2,
        "{name}: multi second status"
    );

    // The next window starts from zero.
    clock.advance(60);
    assert_eq!(
        decide(one("k", "a")).await.statuses[0].limit_remaining,
        2,
        "{name}: new window"
    );

    // Month windows (TTL over 30 days) keep counting.
    decide(one("mo", "m")).await;
    assert_eq!(
        decide(one("mo", "m")).await.statuses[0].limit_remaining,
        3,
        "{name}: month"
    );

    // The store's read and refund paths.
    let key = format!("conf_direct_{name}_{now}");
    let inc = Increment::window(key.clone(), 5, Unit::Hour, 3600);
    let mut counts = [0u64];
    store
        .increment(now, std::slice::from_ref(&inc), &mut counts)
        .await
        .unwrap();
    settle(&mc).await;
    let mut vals = [9u64, 9u64];
    store
        .get(
            now,
            &crate::reads(&[key.as_str(), "conf_missing_key"]),
            &mut vals,
        )
        .await
        .unwrap();
    assert_eq!(vals, [5, 0], "{name}: get");
    let refund = Increment {
        hits: 2,
        ..inc.clone()
    };
    store.refund(now, &[refund]).await.unwrap();
    store
        .get(now, &crate::reads(&[key.as_str()]), &mut vals[..1])
        .await
        .unwrap();
    assert_eq!(vals[0], 3, "{name}: refund");

    // No lost increments under concurrency.
    let key = format!("conf_concurrent_{name}_{now}");
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = store.clone();
        let inc = Increment::window(key.clone(), 1, Unit::Hour, 3600);
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let mut c = [0u64];
                store
                    .increment(now, std::slice::from_ref(&inc), &mut c)
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    settle(&mc).await;
    store
        .get(now, &crate::reads(&[key.as_str()]), &mut vals[..1])
        .await
        .unwrap();
    assert_eq!(vals[0], 200, "{name}: concurrent increments");
}

fn redis_settings(url: String, kind: RedisKind) -> RedisSettings {
    RedisSettings {
        url,
        kind,
        timeout: Duration::from_secs(5),
        ..RedisSettings::default()
    }
}

pub async fn redis_store(s: RedisSettings) -> Arc<RedisStore> {
    let backoff = StartupBackoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(1),
        max_elapsed: Duration::from_secs(20),
    };
    Arc::new(
        RedisStore::connect(s, None, backoff, &|_| {})
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn memory_store() {
    conformance("memory", Arc::new(MemoryStore::new()), None).await;
}

#[tokio::test]
async fn redis_single() {
    let r = servers::redis();
    let store = redis_store(redis_settings(
        format!("127.0.0.1:{}", r.port),
        RedisKind::Single,
    ))
    .await;
    conformance("redis", store, None).await;
}

#[tokio::test]
async fn redis_cluster_of_three_masters() {
    let nodes = servers::redis_cluster();
    let url = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect::<Vec<_>>()
        .join(",");
    let store = redis_store(redis_settings(url, RedisKind::Cluster)).await;
    conformance("cluster", store, None).await;
    // The keys really are spread over the masters.
    let with_keys = nodes
        .iter()
        .filter(|n| servers::resp(n.port, &["DBSIZE"]).is_some_and(|r| r.trim() != ":0"))
        .count();
    assert!(with_keys >= 2, "keys landed on {with_keys} of 3 masters");
}

#[tokio::test]
async fn redis_behind_sentinel() {
    let (master, sentinel) = servers::redis_sentinel();
    let store = redis_store(redis_settings(
        format!("mymaster,127.0.0.1:{}", sentinel.port),
        RedisKind::Sentinel,
    ))
    .await;
    conformance("sentinel", store, None).await;
    assert!(servers::resp(master.port, &["DBSIZE"]).is_some_and(|r| r.trim() != ":0"));
}

#[tokio::test]
async fn redis_over_mutual_tls() {
    let pki = servers::pki(&["127.0.0.1"]);
    let tls_port = servers::free_port();
    let _redis = servers::redis_on(
        servers::free_port(),
        &[
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &pki.server_cert,
            "--tls-key-file",
            &pki.server_key,
            "--tls-ca-cert-file",
            &pki.ca,
            "--tls-auth-clients",
            "yes",
        ],
    );
    let mut s = redis_settings(format!("127.0.0.1:{tls_port}"), RedisKind::Single);
    s.tls = Some(RedisTls {
        ca: Some(pki.ca.clone().into()),
        client_cert: Some((
            pki.client_cert.clone().into(),
            pki.client_key.clone().into(),
        )),
        skip_hostname_verification: false,
    });
    conformance("redis-tls", redis_store(s).await, None).await;
}

#[tokio::test]
async fn memcached_two_nodes() {
    let a = servers::memcached();
    let b = servers::memcached();
    let store = Arc::new(
        MemcachedStore::new(MemcachedSettings {
            nodes: vec![
                format!("127.0.0.1:{}", a.port),
                format!("127.0.0.1:{}", b.port),
            ],
            ..MemcachedSettings::default()
        })
        .unwrap(),
    );
    conformance("memcached", store.clone(), Some(store.clone())).await;

    // Keys memcached cannot hold fail clearly instead of corrupting the protocol stream.
    let long = Increment::window("k".repeat(251), 1, Unit::Second, 1);
    let e = store.increment(0, &[long], &mut [0]).await.unwrap_err();
    assert_eq!(e.err_type, "memcache_error");
    assert!(e.message.contains("at most 250"), "{}", e.message);
}
