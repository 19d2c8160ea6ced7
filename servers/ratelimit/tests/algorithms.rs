//! The algorithms of issue #27 through the real server on its memory store, over `/json`
//! and gRPC, on the wall clock: token bucket, sliding window, `unit_multiplier` and
//! several limits per descriptor, with headers, shadow mode, the local cache and the
//! statistics around them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ratelimit_core::Code;

use crate::common::{HttpResponse, post_json, request, start};
use crate::grpc_face::{call, channel, req};

const RULES: &str = "domain: alg
descriptors:
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 30, algorithm: token_bucket, burst: 3}
  - key: sliding
    rate_limit: {unit: second, unit_multiplier: 2, requests_per_unit: 4, algorithm: sliding_window}
  - key: five_minutes
    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 3}
  - key: both
    rate_limits:
      - {unit: hour, requests_per_unit: 1, algorithm: token_bucket, burst: 3, name: hourly_bucket}
      - {unit: minute, requests_per_unit: 2, algorithm: sliding_window, name: per_minute}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}
";

fn ask(srv: &crate::common::Server, key: &str, value: &str) -> HttpResponse {
    post_json(
        srv.http,
        &format!(
            r#"{{"domain":"alg","descriptors":[{{"entries":[{{"key":"{key}","value":"{value}"}}]}}]}}"#
        ),
    )
}

fn passes(srv: &crate::common::Server, key: &str, value: &str, n: usize) -> usize {
    (0..n)
        .filter(|_| ask(srv, key, value).status == 200)
        .count()
}

fn now_secs_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn a_token_bucket_over_json_lets_its_burst_through_then_one_per_interval() {
    let srv = start(
        &[("alg.yaml", RULES)],
        &[("LIMIT_RESPONSE_HEADERS_ENABLED", "true")],
    );
    // Burst 3, one token every 2 s (30 a minute).
    let first = ask(&srv, "bucket", "a");
    assert_eq!(first.status, 200);
    let body = first.json();
    assert_eq!(body["statuses"][0]["limitRemaining"], 2);
    assert_eq!(
        body["statuses"][0]["currentLimit"]["requestsPerUnit"], 30,
        "{body}"
    );
    assert_eq!(body["statuses"][0]["currentLimit"]["unit"], "MINUTE");
    // Headers report the bucket: tokens left, and the time until it is full again.
    assert_eq!(
        body["responseHeadersToAdd"],
        serde_json::json!([
            {"key": "RateLimit-Limit", "value": "30"},
            {"key": "RateLimit-Remaining", "value": "2"},
            {"key": "RateLimit-Reset", "value": "2"},
        ])
    );
    assert_eq!(passes(&srv, "bucket", "a", 4), 2);
    let denied = ask(&srv, "bucket", "a");
    assert_eq!(denied.status, 429);
    // What a client should wait: until the next token.
    assert_eq!(denied.json()["statuses"][0]["durationUntilReset"], "2s");
    std::thread::sleep(Duration::from_millis(2_200));
    assert_eq!(passes(&srv, "bucket", "a", 3), 1);
    // Another value has its own bucket.
    assert_eq!(passes(&srv, "bucket", "b", 5), 3);
}

#[tokio::test]
async fn a_sliding_window_over_grpc_weighs_the_last_window_and_skips_denied_hits() {
    let srv = start(&[("alg.yaml", RULES)], &[]);
    let ch = channel(&srv.grpc).await;
    let r = req("alg", &[("sliding", "g")]);
    // Start just after a 2 s window begins: nothing before it counts.
    let t = now_secs_f64();
    let start = (t / 2.0).floor() * 2.0 + 2.05;
    tokio::time::sleep(Duration::from_secs_f64(start - t)).await;
    let mut ok = 0;
    for _ in 0..20 {
        ok += usize::from(call(&ch, &r).await.unwrap().overall_code == Code::Ok);
    }
    assert_eq!(
        ok, 4,
        "the limit and no more, even to a client far above it"
    );
    // Halfway through the next window half of the 4 still count, and the 16 denied
    // calls do not: 2 more pass. (Counted as a fixed window would, none would pass;
    // unweighted, 4 would.)
    tokio::time::sleep(Duration::from_secs_f64(start + 3.0 - now_secs_f64())).await;
    let mut later = 0;
    for _ in 0..10 {
        later += usize::from(call(&ch, &r).await.unwrap().overall_code == Code::Ok);
    }
    assert!((1..=3).contains(&later), "{later} passed mid-window");
}

#[tokio::test]
async fn several_limits_report_the_one_that_denies_over_grpc() {
    let srv = start(&[("alg.yaml", RULES)], &[]);
    let ch = channel(&srv.grpc).await;
    let r = req("alg", &[("both", "u")]);
    let first = call(&ch, &r).await.unwrap();
    assert_eq!(first.overall_code, Code::Ok);
    let limit = first.statuses[0].current_limit.clone().unwrap();
    // Within both: the one with the fewest remaining (the minute's sliding window, 1).
    assert_eq!(
        (
            limit.name.as_str(),
            limit.requests_per_unit,
            limit.unit.name()
        ),
        ("per_minute", 2, "MINUTE")
    );
    assert_eq!(call(&ch, &r).await.unwrap().overall_code, Code::Ok);
    let denied = call(&ch, &r).await.unwrap();
    assert_eq!(denied.overall_code, Code::OverLimit);
    let limit = denied.statuses[0].current_limit.clone().unwrap();
    assert_eq!(
        (limit.name.as_str(), limit.unit.name()),
        ("per_minute", "MINUTE")
    );
}

#[test]
fn unit_multiplier_windows_and_shadow_mode_over_json() {
    let srv = start(&[("alg.yaml", RULES)], &[]);
    assert_eq!(passes(&srv, "five_minutes", "x", 5), 3);
    let denied = ask(&srv, "five_minutes", "x");
    let reset = denied.json()["statuses"][0]["durationUntilReset"]
        .as_str()
        .unwrap()
        .trim_end_matches('s')
        .parse::<u64>()
        .unwrap();
    assert!((1..=300).contains(&reset), "reset in {reset}s");
    // Shadow mode answers OK past the bucket, and counts it.
    assert_eq!(passes(&srv, "shadow", "s", 3), 3);
    let stats = request(srv.debug, "GET", "/stats", b"").text();
    assert!(
        stats.contains("ratelimit.service.rate_limit.alg.shadow.shadow_mode: 2"),
        "{stats}"
    );
    assert!(
        stats.contains("ratelimit.service.rate_limit.alg.five_minutes.over_limit: 3"),
        "{stats}"
    );
    // /rlconfig shows the extensions.
    let rlconfig = request(srv.debug, "GET", "/rlconfig", b"").text();
    for line in [
        "alg.bucket: unit=MINUTE requests_per_unit=30, shadow_mode: false, quota_mode: false, algorithm: token_bucket, unit_multiplier: 1, burst: 3",
        "alg.five_minutes: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode: false, algorithm: fixed_window, unit_multiplier: 5",
        "alg.both: unit=MINUTE requests_per_unit=2, shadow_mode: false, quota_mode: false, algorithm: sliding_window, unit_multiplier: 1, name: per_minute",
    ] {
        assert!(rlconfig.contains(line), "{line} not in {rlconfig}");
    }
}

#[test]
fn the_local_cache_holds_a_denied_bucket_only_until_a_token_is_back() {
    let srv = start(
        &[("alg.yaml", RULES)],
        &[("LOCAL_CACHE_SIZE_IN_BYTES", "1048576")],
    );
    assert_eq!(passes(&srv, "bucket", "lc", 5), 3);
    assert_eq!(ask(&srv, "bucket", "lc").status, 429);
    std::thread::sleep(Duration::from_millis(2_200));
    assert_eq!(ask(&srv, "bucket", "lc").status, 200);
}
