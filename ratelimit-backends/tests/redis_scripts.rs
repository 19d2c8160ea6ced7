//! The scripts behind sliding windows, token buckets and joint groups on Redis: their
//! digests, a lone limit's script against the group script on whatever a key holds, and
//! a Redis that refuses scripts.

use std::sync::Arc;

use ratelimit_backends::RedisStore;
use ratelimit_backends::redis::{self as r, RedisKind, StartupBackoff};
use ratelimit_core::algorithm::Bucket;
use ratelimit_core::{CounterStore, Increment, Op, Unit};

use crate::conformance::redis_store;
use crate::redis_algorithms::{now_us, settings, take};
use crate::servers::{self, redis_cli};

/// The store calls each script by the digest Redis computes for it.
#[tokio::test]
async fn the_script_digests_are_redis_own() {
    let redis = servers::redis();
    for (script, sha) in [
        (r::GROUP, r::GROUP_SHA),
        (r::LONE_BUCKET, r::LONE_BUCKET_SHA),
        (r::LONE_SLIDE, r::LONE_SLIDE_SHA),
    ] {
        assert_eq!(redis_cli(redis.port, &["SCRIPT", "LOAD", script]), sha);
    }
}

/// What `inc` answers and leaves in its key (value, and whether it expires) when the key
/// held `stored` (`None`: no key): alone, so through its lone script when it has one, and
/// behind a fixed window that counts nothing, so through the group script.
async fn alone_and_in_a_group(
    store: &RedisStore,
    port: u16,
    inc: &Increment,
    stored: Option<&str>,
) -> [(u64, String, bool); 2] {
    let mut out = Vec::new();
    for joint in [false, true] {
        match stored {
            Some(v) => assert_eq!(redis_cli(port, &["SET", &inc.key, v]), "OK"),
            None => _ = redis_cli(port, &["DEL", &inc.key]),
        }
        let mut inc = inc.clone();
        inc.joint = joint;
        let nothing = Increment {
            limit: u64::from(u32::MAX),
            ..Increment::window("counts_nothing", 0, Unit::Minute, 60)
        };
        let batch = if joint { vec![nothing, inc] } else { vec![inc] };
        let mut counts = vec![0; batch.len()];
        store
            .increment(now_us() / 1_000_000, &batch, &mut counts)
            .await
            .unwrap();
        let left = redis_cli(port, &["GET", &batch[batch.len() - 1].key]);
        let ttl: i64 = redis_cli(port, &["TTL", &batch[batch.len() - 1].key])
            .parse()
            .unwrap();
        out.push((counts[counts.len() - 1], left, ttl > 0));
    }
    [out[0].clone(), out[1].clone()]
}

/// A key may meet either script (a rule's lone limit becomes one of a `rate_limits`
/// list, or the other way round): the lone scripts read what the group script reads, the
/// same way, and decide and write alike, on ordinary values and on garbage alike.
#[tokio::test]
async fn lone_scripts_answer_as_the_group_script_on_any_stored_value() {
    let redis = servers::redis();
    let store = redis_store(settings(
        format!("127.0.0.1:{}", redis.port),
        RedisKind::Single,
    ))
    .await;
    let now = now_us();
    let b = Bucket::new(10, 1, 4);
    let span = b.capacity * b.interval_us;
    let tats = [
        now - 1,
        now,
        now + 1,
        now + span - b.interval_us,
        now + span,
        (1 << 53) - 1,
        1 << 53,
        (1 << 53) + 1,
        9_999_999_999_999_999,
        u64::MAX - 1,
        u64::MAX,
    ]
    .map(|t| t.to_string());
    let odd = [
        "0",
        "",
        "garbage",
        "12abc",
        "-5",
        "0x10",
        "1e15",
        " 5",
        "1.5",
        "18446744073709551616",
        "123456789012345678901",
        "0000000000000000000000000007",
    ];
    let padded = format!("000{}", now + 2);
    let bucket_values = tats
        .iter()
        .map(String::as_str)
        .chain(odd)
        .chain([padded.as_str()]);
    for stored in bucket_values.map(Some).chain([None]) {
        for hits in [0, 1, 2, b.capacity + 1] {
            let mut inc = take("lone_vs_group_tb", &b, now);
            inc.hits = hits;
            let [alone, grouped] = alone_and_in_a_group(&store, redis.port, &inc, stored).await;
            assert_eq!(alone, grouped, "bucket holding {stored:?}, {hits} hits");
        }
    }

    let window_us = 3_000_000;
    let start = now - now % window_us;
    let slides = [
        format!("{start}:1:2"),
        format!("{start}:4:0"),
        format!("{}:2:9", start - window_us),
        format!("{}:5:5", start - 2 * window_us),
        format!("{}:1:1", start + window_us),
        format!("0{start}:1:2"),
        format!("{start}:1"),
        format!("{start}:x:2"),
        format!("{start}:1:2:3"),
    ];
    let slide_values = slides.iter().map(String::as_str).chain(odd);
    for stored in slide_values.map(Some).chain([None]) {
        for hits in [0, 1, 3, 6] {
            let inc = Increment {
                limit: 5,
                op: Op::Slide {
                    window_us,
                    now_us: now,
                },
                ..Increment::window("lone_vs_group_sw", hits, Unit::Second, 6)
            };
            let [alone, grouped] = alone_and_in_a_group(&store, redis.port, &inc, stored).await;
            assert_eq!(alone, grouped, "window holding {stored:?}, {hits} hits");
        }
    }
}

/// Without scripts, a bucket (or any group) cannot be decided in one atomic step: an
/// error that says so, told once as a warning; fixed windows keep counting.
#[tokio::test]
async fn without_scripts_groups_fail_clearly_and_fixed_windows_still_count() {
    let no_scripts = [
        "--rename-command",
        "EVALSHA",
        "EVALSHA_OFF_27",
        "--rename-command",
        "EVAL",
        "EVAL_OFF_27",
    ];
    let single = servers::redis_on(servers::free_port(), &no_scripts);
    let (master, sentinel) = servers::redis_sentinel_with(&no_scripts);
    for (port, s) in [
        (
            single.port,
            settings(format!("127.0.0.1:{}", single.port), RedisKind::Single),
        ),
        (
            master.port,
            settings(
                format!("mymaster,127.0.0.1:{}", sentinel.port),
                RedisKind::Sentinel,
            ),
        ),
    ] {
        let warned = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let store = RedisStore::connect(s, None, StartupBackoff::default(), &|_| {})
            .await
            .unwrap()
            .with_warnings({
                let warned = warned.clone();
                move |m| warned.lock().unwrap().push(m.to_owned())
            });
        let t = now_us();
        let b = Bucket::new(1, 1, 1);
        for _ in 0..2 {
            let e = store
                .increment(t / 1_000_000, &[take("tb", &b, t)], &mut [0])
                .await
                .unwrap_err();
            assert_eq!(e.err_type, "redis_error");
            assert!(e.message.contains("refuses scripts"), "{}", e.message);
            assert!(e.message.contains("token_bucket"), "{}", e.message);
        }
        let mut c = [0];
        let w = Increment::window("fw", 2, Unit::Minute, 60);
        store.increment(0, &[w], &mut c).await.unwrap();
        assert_eq!(c, [2], "port {port}");
        assert_eq!(redis_cli(port, &["GET", "tb"]), "");
        let warned = warned.lock().unwrap().clone();
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].contains("refused the scripts"), "{warned:?}");
    }
}
