//! Token buckets, sliding windows, `unit_multiplier` and `rate_limits` lists through the
//! real server on Redis (single and Cluster), over `/json`; and two servers sharing one
//! bucket under concurrent load.

use std::time::{Duration, Instant};

use crate::common::{Server, post_json, start};
use test_support::stores as servers;

const RULES: &str = "domain: alg
descriptors:
  - key: tb
    rate_limit: {unit: minute, requests_per_unit: 6, algorithm: token_bucket, burst: 3}
  - key: sw
    rate_limit: {unit: hour, requests_per_unit: 4, algorithm: sliding_window}
  - key: mul
    rate_limit: {unit: day, unit_multiplier: 7, requests_per_unit: 2}
  - key: list
    rate_limits:
      - {unit: hour, requests_per_unit: 100, algorithm: token_bucket, burst: 3, name: bucket}
      - {unit: minute, requests_per_unit: 2, name: per_minute}
";

fn req(key: &str, value: &str) -> String {
    format!(
        r#"{{"domain":"alg","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
    )
}

/// The status code and `limitRemaining` (0 when left out) of `n` requests in a row.
fn ask(srv: &Server, key: &str, value: &str, n: usize) -> Vec<(u16, u64)> {
    (0..n)
        .map(|_| {
            let r = post_json(srv.http, &req(key, value));
            let left = r.json()["statuses"][0]["limitRemaining"]
                .as_u64()
                .unwrap_or(0);
            (r.status, left)
        })
        .collect()
}

fn redis_env(url: &str, kind: &'static str) -> Vec<(&'static str, String)> {
    vec![
        ("BACKEND_TYPE", "redis".into()),
        ("REDIS_SOCKET_TYPE", "tcp".into()),
        ("REDIS_TYPE", kind.into()),
        ("REDIS_URL", url.into()),
    ]
}

fn start_on(env: &[(&'static str, String)]) -> Server {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    start(&[("alg.yaml", RULES)], &env)
}

/// Every algorithm's decisions; `cli` is a Redis port to read keys back through.
fn decides_every_algorithm(srv: &Server, cli: u16) {
    // A bucket of 3, refilled one every 10 s: three, then a denial that takes nothing.
    assert_eq!(
        ask(srv, "tb", "a", 4),
        [(200, 2), (200, 1), (200, 0), (429, 0)]
    );
    // Four an hour, the denied ones not counted.
    assert_eq!(
        ask(srv, "sw", "a", 6),
        [(200, 3), (200, 2), (200, 1), (200, 0), (429, 0), (429, 0)]
    );
    // A fixed window of seven days, keyed as upstream keys it, by the window's start.
    assert_eq!(ask(srv, "mul", "a", 3), [(200, 1), (200, 0), (429, 0)]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let week = 7 * 86_400;
    let key = format!("alg_mul_a_{}", now - now % week);
    assert_eq!(servers::redis_cli(cli, &["GET", &key]), "3", "{key}");
    let ttl: u64 = servers::redis_cli(cli, &["TTL", &key]).parse().unwrap();
    // Seven days, not one, plus the default expiration jitter (up to 300 s).
    assert!(ttl > week - 86_400 && ttl <= week + 300, "{ttl}");
    // Two limits as one: the minute (2) denies the third and fourth; the bucket (3) would
    // have admitted them, and as they were denied they take no token.
    let list: Vec<(u16, String)> = (0..4)
        .map(|_| {
            let r = post_json(srv.http, &req("list", "a"));
            let name = r.json()["statuses"][0]["currentLimit"]["name"].clone();
            (r.status, name.as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let minute = |status| (status, "per_minute".to_owned());
    assert_eq!(list, [minute(200), minute(200), minute(429), minute(429)]);
    // The bucket's TAT: two tokens of 36 s past the first request, no more.
    let tat: u64 = servers::redis_cli(cli, &["GET", "{alg_list_a_}tb3600"])
        .parse()
        .unwrap();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let interval = 36_000_000;
    assert!(
        tat > now_us + interval && tat <= now_us + 2 * interval,
        "tat {tat}, now {now_us}"
    );
}

#[test]
fn every_algorithm_on_a_single_redis() {
    let redis = servers::redis();
    let srv = start_on(&redis_env(&format!("127.0.0.1:{}", redis.port), "single"));
    decides_every_algorithm(&srv, redis.port);
    let keys = servers::redis_cli(redis.port, &["KEYS", "{alg_list_a_}*"]);
    assert_eq!(keys.lines().count(), 2, "{keys}");
}

#[test]
fn every_algorithm_on_a_redis_cluster() {
    let nodes = servers::redis_cluster();
    let url = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect::<Vec<_>>()
        .join(",");
    let srv = start_on(&redis_env(&url, "cluster"));
    // redis-cli -c follows each key to its master.
    decides_every_algorithm(&srv, nodes[0].port);
    // The list's two keys share a hash tag, so one master holds both.
    let holding: Vec<usize> = nodes
        .iter()
        .map(|n| {
            servers::redis_cli(n.port, &["KEYS", "{alg_list_a_}*"])
                .lines()
                .filter(|l| !l.is_empty())
                .count()
        })
        .collect();
    assert!(
        holding.contains(&2) && holding.iter().sum::<usize>() == 2,
        "{holding:?}"
    );
}

/// Two servers, one Redis, one bucket of 10 refilled at 20 a second, hammered from both
/// for two seconds: never more through than the 10 plus what refilled meanwhile.
#[test]
fn two_servers_share_one_bucket_under_load() {
    const BUCKET: &str = "domain: alg
descriptors:
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 20, algorithm: token_bucket, burst: 10}
";
    let redis = servers::redis();
    let env = redis_env(&format!("127.0.0.1:{}", redis.port), "single");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = start(&[("alg.yaml", BUCKET)], &env);
    let b = start(&[("alg.yaml", BUCKET)], &env);
    let body = req("tb", "shared");
    let started = Instant::now();
    let (passed, denied) = std::thread::scope(|s| {
        let workers: Vec<_> = [a.http, b.http]
            .into_iter()
            .cycle()
            .take(8)
            .map(|addr| {
                let body = &body;
                s.spawn(move || {
                    let (mut ok, mut no) = (0u64, 0u64);
                    while started.elapsed() < Duration::from_secs(2) {
                        match post_json(addr, body).status {
                            200 => ok += 1,
                            429 => no += 1,
                            other => panic!("status {other}"),
                        }
                    }
                    (ok, no)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .fold((0, 0), |(p, d), (ok, no)| (p + ok, d + no))
    });
    let elapsed = started.elapsed();
    // One token every 50 ms on top of the 10 the bucket started with.
    let refill = elapsed.as_micros() as u64 / 50_000;
    assert!(
        passed <= 10 + refill + 1,
        "{passed} through in {elapsed:?}: more than 10 + {refill}"
    );
    assert!(denied > 0, "the load never reached the limit");
    assert!(passed >= 10 + refill / 4, "{passed} through in {elapsed:?}");
}
