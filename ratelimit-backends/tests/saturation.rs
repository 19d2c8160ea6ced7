//! Counters saturate: a huge `hits_addend` answers OVER_LIMIT on every store, and the counter
//! it leaves keeps answering OVER_LIMIT until its window ends: never an error, never a
//! counter wrapped back to a fresh quota.

use std::sync::Arc;
use std::time::Duration;

use ratelimit_backends::memcached::{MemcachedSettings, MemcachedStore};
use ratelimit_backends::redis::{RedisKind, RedisSettings};
use ratelimit_backends::{MemoryStore, RedisStore};
use ratelimit_core::{
    Code, CounterStore, Descriptor, Increment, Limiter, ManualClock, Request, Unit,
};

use crate::conformance::redis_store;
use crate::servers::{self, redis_cli};

const RULES: &str =
    "domain: sat\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 3}\n";

/// Addends past the top of every store's integer, and Redis's own top.
const HUGE: [u64; 3] = [u64::MAX, i64::MAX as u64 + 1, i64::MAX as u64];

const OVER_ANY_LIMIT: u64 = u32::MAX as u64;

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Memcached applies increments after answering: wait for them, so that each step sees the
/// one before it.
async fn settle(mc: &Option<Arc<MemcachedStore>>) {
    if let Some(m) = mc {
        m.settled().await;
    }
}

/// Through the limiter: each huge addend on a fresh key, then normal calls, peeks and the
/// huge addend again, all OVER_LIMIT. Then the store alone, with addends the limiter never
/// sends: every count stays over any limit and the counter stays readable.
async fn saturates(name: &str, store: Arc<dyn CounterStore>, mc: Option<Arc<MemcachedStore>>) {
    let now = unix_now();
    let limiter = Limiter::builder(store.clone(), ManualClock::new(now))
        .yaml("sat.yaml", RULES)
        .build()
        .unwrap();
    for huge in HUGE {
        let value = format!("{name}-{huge}");
        let call = |hits: u64| {
            Request::new(
                "sat",
                vec![Descriptor::new([("k", value.as_str())]).with_hits(hits)],
            )
        };
        let mut codes = Vec::new();
        for hits in [huge, 1, 1, 0, huge, 1] {
            let r = limiter
                .should_rate_limit(&call(hits))
                .await
                .unwrap_or_else(|e| panic!("{name}: {hits} hits after {huge}: {e}"));
            codes.push(r.overall_code);
            settle(&mc).await;
        }
        assert_eq!(codes, [Code::OverLimit; 6], "{name}: after {huge}");
    }

    let key = format!("sat_direct_{name}");
    for hits in [u64::MAX, 1, u64::MAX, 0, 1] {
        let inc = Increment::window(key.clone(), hits, Unit::Hour, 3600);
        let mut count = [0u64];
        store
            .increment(now, &[inc], &mut count)
            .await
            .unwrap_or_else(|e| panic!("{name}: store, {hits} hits: {e}"));
        assert!(
            count[0] > OVER_ANY_LIMIT,
            "{name}: {hits} hits counted {count:?}"
        );
        settle(&mc).await;
        let mut read = [0u64];
        store
            .get(now, &crate::reads(&[key.as_str()]), &mut read)
            .await
            .unwrap();
        assert!(
            read[0] > OVER_ANY_LIMIT,
            "{name}: read {read:?} after {hits} hits"
        );
    }
}

/// A counter already at the top of Redis's integers (another writer sharing the Redis left
/// it there): counting on it answers a count over any limit, the counter keeps its value
/// and still gets its TTL.
async fn redis_counter_at_the_top(name: &str, store: Arc<RedisStore>, port: u16) {
    let key = format!("sat_top_{name}");
    let top = i64::MAX.to_string();
    assert_eq!(redis_cli(port, &["SET", &key, &top]), "OK");
    for hits in [1, 0, u64::MAX] {
        let inc = Increment::window(key.clone(), hits, Unit::Hour, 3600);
        let mut count = [0u64];
        store
            .increment(0, &[inc], &mut count)
            .await
            .unwrap_or_else(|e| panic!("{name}: {hits} hits on a counter at the top: {e}"));
        assert!(
            count[0] > OVER_ANY_LIMIT,
            "{name}: {hits} hits counted {count:?}"
        );
    }
    assert_eq!(redis_cli(port, &["GET", &key]), top, "{name}");
    let ttl: i64 = redis_cli(port, &["TTL", &key]).parse().unwrap();
    assert!((1..=3600).contains(&ttl), "{name}: ttl {ttl}");
}

/// What a huge addend leaves in Redis can be counted on by anyone.
fn assert_incrementable(name: &str, port: u16) {
    for huge in HUGE {
        let key = format!("sat_k_{name}-{huge}_");
        let keys = redis_cli(port, &["KEYS", &format!("{key}*")]);
        let key = keys
            .lines()
            .next()
            .unwrap_or_else(|| panic!("{name}: no {key}*"));
        let reply = redis_cli(port, &["INCRBY", key, "1"]);
        assert!(
            reply.parse::<i64>().is_ok(),
            "{name}: INCRBY {key}: {reply}"
        );
    }
}

fn settings(url: String, kind: RedisKind) -> RedisSettings {
    RedisSettings {
        url,
        kind,
        timeout: Duration::from_secs(5),
        ..RedisSettings::default()
    }
}

#[tokio::test]
async fn memory_store_saturates() {
    saturates("memory", Arc::new(MemoryStore::new()), None).await;
}

/// Our own connection: `INCRBY` + `EXPIRE` pipelined.
#[tokio::test]
async fn redis_single_saturates() {
    let r = servers::redis();
    let store = redis_store(settings(format!("127.0.0.1:{}", r.port), RedisKind::Single)).await;
    saturates("single", store.clone(), None).await;
    assert_incrementable("single", r.port);
    redis_counter_at_the_top("single", store, r.port).await;
}

/// fred and the counting script.
#[tokio::test]
async fn redis_behind_sentinel_saturates() {
    let (master, sentinel) = servers::redis_sentinel();
    let url = format!("mymaster,127.0.0.1:{}", sentinel.port);
    let store = redis_store(settings(url, RedisKind::Sentinel)).await;
    saturates("sentinel", store.clone(), None).await;
    assert_incrementable("sentinel", master.port);
    redis_counter_at_the_top("sentinel", store, master.port).await;
}

/// fred and the pipelined pair, where scripts are refused.
#[tokio::test]
async fn redis_without_scripts_saturates() {
    let (master, sentinel) = servers::redis_sentinel_with(&[
        "--rename-command",
        "EVALSHA",
        "EVALSHA_OFF_5a1e",
        "--rename-command",
        "EVAL",
        "EVAL_OFF_5a1e",
    ]);
    let url = format!("mymaster,127.0.0.1:{}", sentinel.port);
    let store = redis_store(settings(url, RedisKind::Sentinel)).await;
    saturates("no-scripts", store.clone(), None).await;
    assert_incrementable("no-scripts", master.port);
    redis_counter_at_the_top("no-scripts", store, master.port).await;
}

#[tokio::test]
async fn memcached_saturates() {
    let m = servers::memcached();
    let store = Arc::new(
        MemcachedStore::new(MemcachedSettings {
            nodes: vec![format!("127.0.0.1:{}", m.port)],
            ..MemcachedSettings::default()
        })
        .unwrap(),
    );
    saturates("memcached", store.clone(), Some(store.clone())).await;

    // memcached's incr wraps at 2^64: a counter near there is left alone, not reset.
    let near_top = (u64::MAX - 2).to_string();
    servers::mc_set(m.port, "sat_top", &near_top);
    for hits in [1, 5, u64::MAX] {
        let inc = Increment::window("sat_top", hits, Unit::Hour, 3600);
        let mut count = [0u64];
        store.increment(0, &[inc], &mut count).await.unwrap();
        assert!(count[0] > OVER_ANY_LIMIT, "{hits} hits counted {count:?}");
        store.settled().await;
    }
    assert_eq!(servers::mc_get(m.port, "sat_top"), Some(near_top));
}
