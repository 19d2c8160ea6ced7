//! RLQS replicas' claims in Redis: each replica sees the sum of the others' fresh claims,
//! a withdrawn or stale claim drops out, and distinct buckets never share a hash.

use std::collections::BTreeMap;
use std::time::Duration;

use ratelimit_backends::redis::{CLAIM, CLAIM_SHA, ClaimCall, RedisKind, claim_key};
use ratelimit_core::quota::Elsewhere;

use crate::conformance::redis_store;
use crate::redis_algorithms::settings;
use crate::servers::{self, redis_cli};

fn call(key: &str, streams: u64, demand: u64) -> ClaimCall {
    held_call(key, streams, demand, 0)
}

fn held_call(key: &str, streams: u64, demand: u64, held: u64) -> ClaimCall {
    ClaimCall {
        key: key.to_owned(),
        here: Elsewhere {
            streams,
            demand,
            held,
        },
    }
}

fn seen(streams: u64, demand: u64) -> Elsewhere {
    Elsewhere {
        streams,
        demand,
        held: 0,
    }
}

#[tokio::test]
async fn replicas_see_each_others_fresh_claims() {
    let redis = servers::redis();
    assert_eq!(redis_cli(redis.port, &["SCRIPT", "LOAD", CLAIM]), CLAIM_SHA);
    let store = redis_store(settings(
        format!("127.0.0.1:{}", redis.port),
        RedisKind::Single,
    ))
    .await;
    let (x, y) = ("rlqs_q_t=x", "rlqs_q_t=y");
    let stale = 60_000;

    let a = store
        .exchange_claims("a", &[call(x, 2, 500), call(y, 1, 7)], stale)
        .await
        .unwrap();
    assert_eq!(a, [seen(0, 0), seen(0, 0)], "alone at first");
    let b = store
        .exchange_claims("b", &[call(x, 1, 300)], stale)
        .await
        .unwrap();
    assert_eq!(b, [seen(2, 500)]);
    let c = store
        .exchange_claims("c", &[call(x, 3, 1)], stale)
        .await
        .unwrap();
    assert_eq!(c, [seen(3, 800)]);
    // A's view leaves out its own claim, which it replaces.
    let a = store
        .exchange_claims("a", &[call(x, 1, 100)], stale)
        .await
        .unwrap();
    assert_eq!(a, [seen(4, 301)]);
    // Withdrawn: the others no longer count it.
    store
        .exchange_claims("c", &[call(x, 0, 0)], stale)
        .await
        .unwrap();
    let b = store
        .exchange_claims("b", &[call(x, 1, 300)], stale)
        .await
        .unwrap();
    assert_eq!(b, [seen(1, 100)]);
    let ttl: i64 = redis_cli(redis.port, &["PTTL", x]).parse().unwrap();
    assert!(ttl > 60_000 && ttl <= 180_000, "{ttl}");

    // A replica with only shares held by departed streams still claims them.
    store
        .exchange_claims("c", &[held_call(x, 0, 0, 4000)], stale)
        .await
        .unwrap();
    let b = store
        .exchange_claims("b", &[call(x, 1, 300)], stale)
        .await
        .unwrap();
    assert_eq!(
        b,
        [Elsewhere {
            streams: 1,
            demand: 100,
            held: 4000
        }]
    );
    store
        .exchange_claims("c", &[call(x, 0, 0)], stale)
        .await
        .unwrap();

    // A claim older than the staleness bound is dropped (and removed) by the next reader.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = store
        .exchange_claims("b", &[call(x, 1, 300)], 200)
        .await
        .unwrap();
    assert_eq!(b, [seen(0, 0)]);
    assert_eq!(redis_cli(redis.port, &["HKEYS", x]), "b");

    // After SCRIPT FLUSH the script is sent again.
    redis_cli(redis.port, &["SCRIPT", "FLUSH"]);
    let a = store
        .exchange_claims("a", &[call(y, 1, 7)], stale)
        .await
        .unwrap();
    assert_eq!(a, [seen(0, 0)]);
}

#[test]
fn claim_keys_keep_buckets_apart() {
    let bucket = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    };
    assert_eq!(claim_key("q", &bucket(&[("t", "x")])), "rlqs_q_t=x");
    assert_eq!(
        claim_key("q", &bucket(&[("b", "2"), ("a", "1")])),
        "rlqs_q_a=1&b=2"
    );
    let keys = [
        claim_key("q", &bucket(&[("a", "1&b=2")])),
        claim_key("q", &bucket(&[("a", "1"), ("b", "2")])),
        claim_key("q_a", &bucket(&[("b", "c")])),
        claim_key("q", &bucket(&[("a_b", "c")])),
        claim_key("q", &bucket(&[("a", "{x}")])),
    ];
    let distinct: std::collections::BTreeSet<_> = keys.iter().collect();
    assert_eq!(distinct.len(), keys.len(), "{keys:?}");
    assert!(
        !keys[4].contains('{'),
        "no hash tag from a value: {}",
        keys[4]
    );
}
