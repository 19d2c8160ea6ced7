//! Keys and TTLs read back from Redis: byte for byte what upstream writes, so both servers
//! can count in one Redis during a migration.

use std::sync::Arc;
use std::time::Duration;

use ratelimit_backends::RedisStore;
use ratelimit_backends::redis::{RedisKind, RedisSettings, SocketType, StartupBackoff};
use ratelimit_core::{Code, Descriptor, Limiter, LimiterSettings, ManualClock, Request};

use crate::conformance::redis_store;
use crate::servers::{self, redis_cli};

const RULES: &str = "domain: domain\ndescriptors:
  - key: key
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: m
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 5}
";

fn settings(port: u16) -> RedisSettings {
    RedisSettings {
        url: format!("127.0.0.1:{port}"),
        kind: RedisKind::Single,
        timeout: Duration::from_secs(5),
        ..RedisSettings::default()
    }
}

/// Through the sentinel on `port`, to the master `servers::redis_sentinel` names.
fn sentinel_settings(port: u16) -> RedisSettings {
    RedisSettings {
        url: format!("mymaster,127.0.0.1:{port}"),
        kind: RedisKind::Sentinel,
        timeout: Duration::from_secs(5),
        ..RedisSettings::default()
    }
}

async fn limiter(
    store: Arc<RedisStore>,
    now: u64,
    prefix: &str,
    jitter: u64,
) -> Limiter<Arc<RedisStore>, ManualClock> {
    Limiter::builder(store, ManualClock::new(now))
        .settings(LimiterSettings {
            cache_key_prefix: prefix.into(),
            expiration_jitter_max_seconds: jitter,
            ..LimiterSettings::default()
        })
        .yaml("config.test.yaml", RULES)
        .build()
        .unwrap()
}

fn ttl(port: u16, key: &str) -> i64 {
    redis_cli(port, &["TTL", key]).parse().unwrap()
}

#[tokio::test]
async fn keys_and_ttls_match_upstream_with_and_without_prefix() {
    let r = servers::redis();
    let store = redis_store(settings(r.port)).await;

    let l = limiter(store.clone(), 1234, "", 0).await;
    let req = Request::new("domain", vec![Descriptor::new([("key", "value")])]);
    l.should_rate_limit(&req).await.unwrap();
    l.should_rate_limit(&req).await.unwrap();
    assert_eq!(redis_cli(r.port, &["GET", "domain_key_value_1234"]), "2");
    // SECOND limit, no jitter: the TTL is the unit, refreshed by every request.
    assert!((0..=1).contains(&ttl(r.port, "domain_key_value_1234")));

    let l = limiter(store.clone(), 1234, "prefix:", 300).await;
    let req = Request::new(
        "domain",
        vec![
            Descriptor::new([("m", "x")]),
            Descriptor::new([("files", "files/a.txt")]),
        ],
    );
    l.should_rate_limit(&req).await.unwrap();
    assert_eq!(redis_cli(r.port, &["GET", "prefix:domain_m_x_1200"]), "1");
    let t = ttl(r.port, "prefix:domain_m_x_1200");
    assert!((58..=60 + 300).contains(&t), "minute + jitter: {t}");
    // share_threshold keys carry the pattern, not the value.
    assert_eq!(
        redis_cli(r.port, &["GET", "prefix:domain_files_files/*_0"]),
        "1"
    );
    let keys = redis_cli(r.port, &["KEYS", "*"]);
    let mut keys: Vec<&str> = keys.lines().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "domain_key_value_1234",
            "prefix:domain_files_files/*_0",
            "prefix:domain_m_x_1200"
        ]
    );
}

/// Through fred (here Sentinel) counting runs as one script call: a Redis that forgot the
/// script (restart, failover, `SCRIPT FLUSH`) is sent the script itself, and nothing is
/// counted twice or lost. Our own connection (single) sends upstream's two commands, which
/// a flush does not touch either.
#[tokio::test]
async fn counting_survives_a_flushed_script_cache() {
    let single = servers::redis();
    let (master, sentinel) = servers::redis_sentinel();
    for (port, s) in [
        (single.port, settings(single.port)),
        (master.port, sentinel_settings(sentinel.port)),
    ] {
        let l = limiter(redis_store(s).await, 1234, "", 0).await;
        let one = Request::new("domain", vec![Descriptor::new([("m", "a")])]);
        let two = Request::new(
            "domain",
            vec![
                Descriptor::new([("m", "a")]),
                Descriptor::new([("key", "b")]),
            ],
        );
        l.should_rate_limit(&one).await.unwrap();
        assert_eq!(redis_cli(port, &["SCRIPT", "FLUSH"]), "OK");
        l.should_rate_limit(&one).await.unwrap();
        assert_eq!(redis_cli(port, &["SCRIPT", "FLUSH"]), "OK");
        let resp = l.should_rate_limit(&two).await.unwrap();
        assert_eq!(
            redis_cli(port, &["GET", "domain_m_a_1200"]),
            "3",
            "port {port}"
        );
        assert_eq!(redis_cli(port, &["GET", "domain_key_b_1234"]), "1");
        assert_eq!(resp.statuses[0].limit_remaining, 2);
        assert_eq!(resp.statuses[1].limit_remaining, 4);
        // The TTL is set as upstream's EXPIRE sets it: a minute, no jitter configured.
        let t = ttl(port, "domain_m_a_1200");
        assert!((58..=60).contains(&t), "port {port}: ttl {t}");
    }
    // The digest the store calls the script by is the one Redis computes for it.
    assert_eq!(
        redis_cli(
            single.port,
            &["SCRIPT", "LOAD", ratelimit_backends::redis::INCR_EXPIRE]
        ),
        ratelimit_backends::redis::INCR_EXPIRE_SHA
    );
}

/// Counting authenticates like everything else (`REDIS_AUTH` as `user:password`), over
/// TCP and over a Unix socket. The default user here may not count (`INCRBY`, scripts),
/// so a count that went through unauthenticated would fail.
#[tokio::test]
async fn counting_authenticates_over_tcp_and_a_unix_socket() {
    let dir = servers::temp_dir("redis-auth");
    let sock = dir.join("redis.sock");
    let port = servers::free_port();
    let _r = servers::redis_on(
        port,
        &[
            "--unixsocket",
            sock.to_str().unwrap(),
            "--unixsocketperm",
            "700",
            "--user",
            "default",
            "on",
            "nopass",
            "~*",
            "&*",
            "+@all",
            "-incrby",
            "-evalsha",
            "-eval",
            "--user",
            "alice",
            "on",
            ">wonderland",
            "~*",
            "&*",
            "+@all",
        ],
    );
    assert!(redis_cli(port, &["INCRBY", "x", "1"]).contains("NOPERM"));
    let req = Request::new("domain", vec![Descriptor::new([("m", "a")])]);
    for (socket_type, url, expect) in [
        (SocketType::Tcp, format!("127.0.0.1:{port}"), "1"),
        (SocketType::Unix, sock.to_str().unwrap().to_owned(), "2"),
    ] {
        let store = redis_store(RedisSettings {
            socket_type,
            url,
            auth: "alice:wonderland".into(),
            ..settings(port)
        })
        .await;
        let l = limiter(store, 1234, "", 0).await;
        let resp = l.should_rate_limit(&req).await.unwrap();
        assert_eq!(resp.overall_code, Code::Ok);
        assert_eq!(redis_cli(port, &["GET", "domain_m_a_1200"]), expect);
    }
}

#[tokio::test]
async fn second_limits_go_to_the_per_second_instance() {
    let main = servers::redis();
    let per_second = servers::redis();
    let backoff = StartupBackoff {
        initial: Duration::from_millis(100),
        ..StartupBackoff::default()
    };
    let store = Arc::new(
        RedisStore::connect(
            settings(main.port),
            Some(settings(per_second.port)),
            backoff,
            &|_| {},
        )
        .await
        .unwrap(),
    );
    let l = limiter(store, 1234, "", 0).await;
    let req = Request::new(
        "domain",
        vec![
            Descriptor::new([("key", "v")]),
            Descriptor::new([("m", "v")]),
        ],
    );
    let r = l.should_rate_limit(&req).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok);
    assert_eq!(
        redis_cli(per_second.port, &["KEYS", "*"]),
        "domain_key_v_1234"
    );
    assert_eq!(redis_cli(main.port, &["KEYS", "*"]), "domain_m_v_1200");
}

/// Each count lands at its own descriptor's index, whichever instance counted it and
/// however the batch interleaves the units.
#[tokio::test]
async fn counts_come_back_in_batch_order_across_both_instances() {
    use ratelimit_core::{CounterStore, Increment, Unit};
    let main = servers::redis();
    let per_second = servers::redis();
    let store = RedisStore::connect(
        settings(main.port),
        Some(settings(per_second.port)),
        StartupBackoff::default(),
        &|_| {},
    )
    .await
    .unwrap();
    let single = redis_store(settings(main.port)).await;
    let inc = |key: &str, unit, hits| Increment::window(key, hits, unit, 60);
    let batch = [
        inc("s1", Unit::Second, 1),
        inc("m1", Unit::Minute, 10),
        inc("s2", Unit::Second, 100),
        inc("h1", Unit::Hour, 1000),
    ];
    let mut counts = [0; 4];
    store.increment(0, &batch, &mut counts).await.unwrap();
    assert_eq!(counts, [1, 10, 100, 1000]);
    assert_eq!(redis_cli(per_second.port, &["GET", "s2"]), "100");
    assert_eq!(redis_cli(main.port, &["GET", "m1"]), "10");
    // The same batch on the main instance alone (one descriptor, then several).
    let mut one = [0; 1];
    single.increment(0, &batch[1..2], &mut one).await.unwrap();
    assert_eq!(one, [20]);
    single.increment(0, &batch, &mut counts).await.unwrap();
    assert_eq!(counts, [1, 30, 100, 2000]);
}

#[tokio::test]
async fn startup_waits_for_redis_then_gives_up_when_told() {
    let port = servers::free_port();
    let backoff = StartupBackoff {
        initial: Duration::from_millis(100),
        max: Duration::from_millis(200),
        max_elapsed: Duration::from_millis(800),
    };
    let attempts = std::sync::atomic::AtomicU32::new(0);
    let r = RedisStore::connect(settings(port), None, backoff, &|_| {
        attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    })
    .await;
    assert!(r.is_err());
    assert!(attempts.into_inner() >= 2, "retried with backoff");

    // Redis appears while we wait: the store connects.
    let handle = tokio::spawn(async move {
        let backoff = StartupBackoff {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(200),
            max_elapsed: Duration::from_secs(20),
        };
        RedisStore::connect(settings(port), None, backoff, &|_| {}).await
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    let _redis = servers::redis_on(port, &[]);
    assert!(handle.await.unwrap().is_ok());
}

/// Hardened setups rename `EVAL`/`EVALSHA` away: counting through fred (Sentinel) falls back
/// to upstream's own `INCRBY` + `EXPIRE` and says so once; our connection (single) sends the
/// pair anyway. Both leave the same counts and TTLs.
#[tokio::test]
async fn counting_falls_back_to_two_commands_when_scripts_are_refused() {
    let no_scripts = [
        "--rename-command",
        "EVALSHA",
        "EVALSHA_OFF_3f9c",
        "--rename-command",
        "EVAL",
        "EVAL_OFF_3f9c",
    ];
    let single = servers::redis_on(servers::free_port(), &no_scripts);
    let (master, sentinel) = servers::redis_sentinel_with(&no_scripts);
    for (port, s) in [
        (single.port, settings(single.port)),
        (master.port, sentinel_settings(sentinel.port)),
    ] {
        let warned = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let store = RedisStore::connect(s, None, StartupBackoff::default(), &|_| {})
            .await
            .unwrap()
            .with_warnings({
                let warned = warned.clone();
                move |m| warned.lock().unwrap().push(m.to_owned())
            });
        let l = limiter(Arc::new(store), 1234, "", 0).await;
        let req = Request::new("domain", vec![Descriptor::new([("m", "v")])]);
        let mut codes = Vec::new();
        for _ in 0..6 {
            codes.push(l.should_rate_limit(&req).await.unwrap().overall_code);
        }
        use Code::{Ok as O, OverLimit as X};
        assert_eq!(codes, [O, O, O, O, O, X], "port {port}");
        assert_eq!(redis_cli(port, &["GET", "domain_m_v_1200"]), "6");
        let t = ttl(port, "domain_m_v_1200");
        assert!((55..=60).contains(&t), "ttl {t}");
        // Our own connection never sends the script; fred says once that it stopped.
        let warned = warned.lock().unwrap().clone();
        if port == single.port {
            assert_eq!(warned, Vec::<String>::new());
        } else {
            assert_eq!(warned.len(), 1, "{warned:?}");
            assert!(
                warned[0].contains("refused the counting script"),
                "{warned:?}"
            );
        }
    }
}
