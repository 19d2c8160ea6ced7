//! `/json`, `/healthcheck` and the debug port over real sockets.

use crate::common::{post_json, request, rss_kb, start};
use serde_json::json;

const RULES: &str = "domain: rl\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: minute, requests_per_unit: 2}\n  - key: free\n    rate_limit: {unlimited: true}\n";
const REQ: &str =
    r#"{"domain":"rl","descriptors":[{"entries":[{"key":"api_key","value":"alice"}]}]}"#;

#[test]
fn json_allows_twice_then_answers_429_with_upstream_bodies() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let r1 = post_json(srv.http, REQ);
    assert_eq!(r1.status, 200);
    assert_eq!(r1.header("content-type"), Some("application/json"));
    let body = r1.json();
    assert_eq!(body["overallCode"], "OK");
    assert_eq!(body["statuses"][0]["code"], "OK");
    assert_eq!(body["statuses"][0]["limitRemaining"], 1);
    assert_eq!(
        body["statuses"][0]["currentLimit"],
        json!({"requestsPerUnit": 2, "unit": "MINUTE"})
    );
    let reset = body["statuses"][0]["durationUntilReset"].as_str().unwrap();
    let secs: u64 = reset.trim_end_matches('s').parse().unwrap();
    assert!((1..=60).contains(&secs), "{reset}");

    assert_eq!(post_json(srv.http, REQ).status, 200);
    let r3 = post_json(srv.http, REQ);
    assert_eq!(r3.status, 429);
    assert_eq!(r3.json()["overallCode"], "OVER_LIMIT");
    assert_eq!(r3.json()["statuses"][0]["code"], "OVER_LIMIT");
    assert!(r3.json()["statuses"][0].get("limitRemaining").is_none());

    // Another key has its own counter.
    let other = REQ.replace("alice", "bob");
    assert_eq!(post_json(srv.http, &other).status, 200);
}

#[test]
fn unlimited_unknown_domain_and_no_match_are_ok() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let r = post_json(
        srv.http,
        r#"{"domain":"rl","descriptors":[{"entries":[{"key":"free","value":"x"}]}]}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["statuses"][0]["limitRemaining"], 4_294_967_295u64);
    let r = post_json(
        srv.http,
        r#"{"domain":"nope","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"overallCode": "OK", "statuses": [{"code": "OK"}]})
    );
    let r = post_json(
        srv.http,
        r#"{"domain":"rl","descriptors":[{"entries":[{"key":"zzz","value":"b"}]}]}"#,
    );
    assert_eq!(
        r.json(),
        json!({"overallCode": "OK", "statuses": [{"code": "OK"}]})
    );
}

#[test]
fn bad_bodies_get_400_bad_request_and_change_nothing() {
    let srv = start(&[("rl.yaml", RULES)], &[("HTTP_MAX_BODY_BYTES", "4096")]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty body", vec![]),
        ("not json", b"domain=rl".to_vec()),
        ("truncated", br#"{"domain":"rl","descriptors":[{"#.to_vec()),
        ("array", b"[]".to_vec()),
        ("unknown field", br#"{"domain":"rl","descriptors":[],"bogus":1}"#.to_vec()),
        ("wrong type", br#"{"domain":["rl"]}"#.to_vec()),
        ("non-UTF-8", b"{\"domain\":\"r\xff\xfe\"}".to_vec()),
        ("empty domain", br#"{"domain":"","descriptors":[{"entries":[{"key":"api_key","value":"x"}]}]}"#.to_vec()),
        ("no descriptors", br#"{"domain":"rl","descriptors":[]}"#.to_vec()),
        ("override with UNKNOWN unit", br#"{"domain":"rl","descriptors":[{"entries":[{"key":"api_key","value":"alice"}],"limit":{"requestsPerUnit":1,"unit":"UNKNOWN"}}]}"#.to_vec()),
    ];
    for (what, body) in cases {
        let r = request(srv.http, "POST", "/json", &body);
        assert_eq!(r.status, 400, "{what}");
        assert_eq!(r.text(), "Bad Request\n", "{what}");
        assert_eq!(
            r.header("content-type"),
            Some("text/plain; charset=utf-8"),
            "{what}"
        );
        assert!(
            r.header("x-ratelimit-error").is_some(),
            "{what}: the reason is given"
        );
    }
    // None of the rejected requests counted: alice still has her full budget.
    let r = post_json(srv.http, REQ);
    assert_eq!(r.json()["statuses"][0]["limitRemaining"], 1);
}

#[test]
fn huge_bodies_are_bounded() {
    let srv = start(&[("rl.yaml", RULES)], &[("HTTP_MAX_BODY_BYTES", "1024")]);
    let big = vec![b' '; 64 * 1024];
    let r = request(srv.http, "POST", "/json", &big);
    assert_eq!(r.status, 413);
    // The server is still fine afterwards.
    assert_eq!(post_json(srv.http, REQ).status, 200);
}

#[test]
fn healthcheck_and_unknown_paths() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let r = request(srv.http, "GET", "/healthcheck", b"");
    assert_eq!((r.status, r.text().as_str()), (200, "OK"));
    assert_eq!(request(srv.http, "GET", "/nope", b"").status, 404);
}

#[test]
fn debug_port_lists_paths_rules_and_counters() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let index = request(srv.debug, "GET", "/", b"").text();
    assert!(
        index.contains("/rlconfig: print out the currently loaded configuration for debugging\n"),
        "{index}"
    );
    assert!(index.contains("/stats: print out stats\n"), "{index}");
    assert!(
        index.contains("/debug/pprof/: root of various pprof endpoints. hit for help.\n"),
        "{index}"
    );
    let heap = request(srv.debug, "GET", "/debug/pprof/heap", b"").text();
    assert!(heap.contains("VmRSS:"), "{heap}");
    // Keep the server busy while it profiles itself, so that there are samples.
    let http = srv.http;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                post_json(
                    http,
                    r#"{"domain":"busy","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}"#,
                );
            }
        })
    };
    let prof = request(srv.debug, "GET", "/debug/pprof/profile?seconds=2", b"");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.join().unwrap();
    assert_eq!(prof.status, 200);
    assert!(
        prof.text().contains("<svg"),
        "a flame graph: {}",
        prof.text()
    );
    assert_eq!(
        request(srv.debug, "GET", "/debug/pprof/profile?seconds=0", b"").status,
        400
    );

    let rl = request(srv.debug, "GET", "/rlconfig", b"").text();
    assert_eq!(
        rl,
        "rl.api_key: unit=MINUTE requests_per_unit=2, shadow_mode: false, quota_mode: false\n\
         rl.free: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false\n"
    );

    for _ in 0..3 {
        post_json(srv.http, REQ);
    }
    let stats = request(srv.debug, "GET", "/stats", b"").text();
    for line in [
        "ratelimit.service.rate_limit.rl.api_key.total_hits: 3\n",
        "ratelimit.service.rate_limit.rl.api_key.over_limit: 1\n",
        "ratelimit.service.rate_limit.rl.api_key.within_limit: 2\n",
        "ratelimit.service.config_load_success: 1\n",
        "ratelimit.service.rate_limit.busy.domain_not_found: ",
    ] {
        assert!(stats.contains(line), "missing {line:?} in\n{stats}");
    }
    assert_eq!(request(srv.debug, "GET", "/nope", b"").status, 404);
}

#[test]
fn response_headers_and_shadow_mode_settings_apply() {
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("SHADOW_MODE", "true"),
        ],
    );
    for _ in 0..3 {
        post_json(srv.http, REQ);
    }
    let r = post_json(srv.http, REQ);
    // Global shadow mode: the overall answer is OK (200) while the status says OVER_LIMIT.
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["statuses"][0]["code"], "OVER_LIMIT");
    let headers = body["responseHeadersToAdd"].as_array().unwrap();
    assert_eq!(headers[0], json!({"key": "RateLimit-Limit", "value": "2"}));
    assert_eq!(
        headers[1],
        json!({"key": "RateLimit-Remaining", "value": "0"})
    );
    assert_eq!(headers[2]["key"], "RateLimit-Reset");
}

#[test]
fn pprof_can_be_turned_off() {
    let srv = start(&[("rl.yaml", RULES)], &[("DEBUG_PPROF_ENABLED", "false")]);
    for path in [
        "/debug/pprof/",
        "/debug/pprof",
        "/debug/pprof/heap",
        "/debug/pprof/profile?seconds=1",
    ] {
        assert_eq!(request(srv.debug, "GET", path, b"").status, 404, "{path}");
    }
    let index = request(srv.debug, "GET", "/", b"").text();
    assert!(!index.contains("pprof"), "{index}");
    assert!(index.contains("/stats: "), "{index}");
    assert_eq!(request(srv.debug, "GET", "/stats", b"").status, 200);
}

#[test]
fn one_cpu_profile_at_a_time() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let debug = srv.debug;
    let first =
        std::thread::spawn(move || request(debug, "GET", "/debug/pprof/profile?seconds=3", b""));
    std::thread::sleep(std::time::Duration::from_secs(1));
    let second = request(srv.debug, "GET", "/debug/pprof/profile?seconds=1", b"");
    assert_eq!(
        (second.status, second.text().as_str()),
        (409, "a profile is already being taken\n")
    );
    assert_eq!(first.join().unwrap().status, 200);
    // Over: the next one may run.
    assert_eq!(
        request(srv.debug, "GET", "/debug/pprof/profile?seconds=1", b"").status,
        200
    );
}

/// A CPU profile under load names the server's own functions, and what it allocated (its
/// samples, the debug information read to name frames) is given back when it ends.
#[test]
fn cpu_profiles_name_our_frames_and_give_their_memory_back() {
    let srv = start(&[("rl.yaml", RULES)], &[]);
    let pid = srv.proc.child.id();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy = {
        let (stop, http) = (stop.clone(), srv.http);
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                post_json(http, REQ);
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_secs(1));
    let before = rss_kb(pid);

    let folded = request(
        srv.debug,
        "GET",
        "/debug/pprof/profile?seconds=2&format=text",
        b"",
    );
    let after_folded = settled_rss_kb(pid, before + 25_000);
    let graph = request(srv.debug, "GET", "/debug/pprof/profile?seconds=1", b"");
    let after_graph = settled_rss_kb(pid, before + 25_000);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    busy.join().unwrap();

    assert_eq!(folded.status, 200);
    let text = folded.text();
    let mut samples = 0;
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("`stack count`");
        samples += count.parse::<u64>().expect("a sample count");
        assert!(!stack.starts_with(';') && !stack.contains(";;"), "{line}");
    }
    assert!(samples > 0, "{text}");
    assert!(
        text.lines().any(|l| l.contains("ratelimit_server::")),
        "the server's frames are named:\n{text}"
    );
    assert!(
        !text.contains("on_sigprof"),
        "the profiler's own frames are cut off:\n{text}"
    );
    assert_eq!(graph.status, 200);
    assert!(graph.text().contains("<svg"), "{}", graph.text());
    // The profiler used to keep ~100 MB from its first run on.
    for after in [after_folded, after_graph] {
        assert!(
            after < before + 25_000,
            "RSS {before} KiB before a profile, {after} KiB after; now {}",
            memory_kinds(pid)
        );
    }
}

/// The resident set of `pid` once it is below `bound`, or the lowest seen in two seconds.
/// The profile's memory should be back before its answer is sent. The wait forgives memory
/// that comes back late (one CI run read 45 MB more, cause unknown), not memory kept for good
/// (the bug this test was written for kept ~100 MB).
fn settled_rss_kb(pid: u32, bound: u64) -> u64 {
    let mut lowest = rss_kb(pid);
    for _ in 0..20 {
        if lowest < bound {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        lowest = lowest.min(rss_kb(pid));
    }
    lowest
}

/// The kinds of resident memory of `pid` (`RssAnon`, `RssFile`, `RssShmem`), for a failure
/// to say which grew.
fn memory_kinds(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("Rss"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}
