//! The axum example as a process on a loopback port: its per-client token bucket, its
//! per-key rule, and whose address `X-Forwarded-For` may name.

use std::time::Duration;

use crate::common::{Example, away_from_window_edge, example, get};

/// The `ratelimit` and `retry-after` headers of `n` requests in a row, with the status.
fn burst(ex: &Example, n: usize, headers: &[(&str, &str)]) -> Vec<(u16, String)> {
    (0..n)
        .map(|_| {
            let r = get(ex.addr, "/", headers);
            (r.status, r.header("ratelimit").unwrap_or("").to_owned())
        })
        .collect()
}

#[test]
fn a_client_gets_its_burst_then_429_then_a_token_per_interval() {
    let ex = example("axum", &[]);
    // 2 a second in bursts of 10: ten pass, the bucket refilling in 5 s (500 ms a token).
    // The forged X-Forwarded-For changes nothing: no proxy is trusted by default.
    let mut seen = Vec::new();
    for i in 1..=10u32 {
        let forged = format!("198.51.100.{i}");
        let r = get(ex.addr, "/", &[("x-forwarded-for", &forged)]);
        assert_eq!((r.status, r.text()), (200, "hello\n".to_owned()));
        assert_eq!(r.header("ratelimit-policy"), Some("\"per_ip\";q=10;w=5"));
        assert_eq!(r.header("retry-after"), None);
        seen.push(r.header("ratelimit").unwrap().to_owned());
    }
    let want: Vec<String> = (1..=10u32)
        .map(|i| format!("\"per_ip\";r={};t={}", 10 - i, i.div_ceil(2)))
        .collect();
    assert_eq!(seen, want);
    let denied = get(ex.addr, "/", &[]);
    assert_eq!(denied.status, 429);
    assert_eq!(denied.header("retry-after"), Some("1"));
    assert_eq!(denied.header("ratelimit"), Some("\"per_ip\";r=0;t=1"));
    assert_eq!(
        denied.header("ratelimit-policy"),
        Some("\"per_ip\";q=10;w=5")
    );
    // One token back after 500 ms, and only one.
    std::thread::sleep(Duration::from_millis(600));
    let statuses: Vec<u16> = burst(&ex, 2, &[]).into_iter().map(|(s, _)| s).collect();
    assert_eq!(statuses, [200, 429]);
}

#[test]
fn each_api_key_has_its_own_limit() {
    away_from_window_edge(60);
    let ex = example("axum", &[]);
    let a = burst(&ex, 4, &[("x-api-key", "alice")]);
    let statuses: Vec<u16> = a.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [200, 200, 200, 429]);
    // The key's rule binds (fewer left than the client's bucket).
    for (i, (_, h)) in a.iter().enumerate() {
        let left = 2usize.saturating_sub(i);
        assert!(h.starts_with(&format!("\"per_key\";r={left};t=")), "{h}");
    }
    let denied = get(ex.addr, "/", &[("x-api-key", "alice")]);
    let left: u64 = denied.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&left), "{left}");
    assert_eq!(
        denied.header("ratelimit"),
        Some(format!("\"per_key\";r=0;t={left}").as_str())
    );
    assert_eq!(
        denied.header("ratelimit-policy"),
        Some("\"per_key\";q=3;w=60")
    );
    // Bob's key is untouched; without a key only the client's bucket applies.
    assert_eq!(get(ex.addr, "/", &[("x-api-key", "bob")]).status, 200);
    let anonymous = get(ex.addr, "/", &[]);
    assert_eq!(anonymous.status, 200);
    assert!(
        anonymous
            .header("ratelimit")
            .unwrap()
            .starts_with("\"per_ip\";r=3;")
    );
}

#[test]
fn behind_one_trusted_proxy_the_client_is_the_last_forwarded_address() {
    let ex = example("axum", &[("XFF_TRUSTED_HOPS", "1")]);
    // The proxy appends the address it saw; whatever the client wrote before it is
    // ignored, so forging it does not buy a fresh bucket.
    for i in 0..10 {
        let xff = format!("192.0.2.{i}, 203.0.113.7");
        assert_eq!(get(ex.addr, "/", &[("x-forwarded-for", &xff)]).status, 200);
    }
    let forged = get(
        ex.addr,
        "/",
        &[("x-forwarded-for", "192.0.2.99, 203.0.113.7")],
    );
    assert_eq!(forged.status, 429);
    // Another client behind the same proxy has its own bucket; so does the proxy itself.
    let other = get(ex.addr, "/", &[("x-forwarded-for", "203.0.113.8")]);
    assert_eq!(other.status, 200);
    assert_eq!(other.header("ratelimit").unwrap(), "\"per_ip\";r=9;t=1");
    assert_eq!(get(ex.addr, "/", &[]).status, 200);
}

#[test]
fn a_peer_outside_the_trusted_proxies_cannot_choose_its_address() {
    let ex = example(
        "axum",
        &[("XFF_TRUSTED_HOPS", "1"), ("TRUSTED_PROXIES", "10.0.0.0/8")],
    );
    // We connect from 127.0.0.1, not a proxy: every forged header counts against us.
    let statuses: Vec<u16> = (0..11)
        .map(|i| {
            let xff = format!("203.0.113.{i}");
            get(ex.addr, "/", &[("x-forwarded-for", &xff)]).status
        })
        .collect();
    assert_eq!(statuses[..10], [200; 10]);
    assert_eq!(statuses[10], 429);
}

#[test]
fn rule_files_are_reloaded_when_they_change() {
    away_from_window_edge(60);
    let dir = test_support::net::temp_dir("rl-tower", "rules");
    let file = dir.join("api.yaml");
    let rules = |n: u32| {
        format!(
            "domain: api\ndescriptors:\n  - key: api_key\n    rate_limit: {{unit: minute, requests_per_unit: {n}}}\n"
        )
    };
    std::fs::write(&file, rules(30)).unwrap();
    let ex = example("axum", &[("RULES", file.to_str().unwrap())]);
    let limited = |key: &str| burst(&ex, 2, &[("x-api-key", key)])[1].0 == 429;
    assert!(!limited("k0"));
    std::fs::write(&file, rules(1)).unwrap();
    // The watcher looks every second.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut key = 1;
    while !limited(&format!("k{key}")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the new rules never applied"
        );
        key += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    // A broken file leaves the rules in force.
    std::fs::write(
        &file,
        "domain: api\ndescriptors: [{key: api_key, rate_limit: {unit: fortnight}}]\n",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(limited("k-after-bad-file"));
    let _ = std::fs::remove_dir_all(&dir);
}
