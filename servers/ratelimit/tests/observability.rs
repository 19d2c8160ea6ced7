//! Statistics reach real statsd (TCP), DogStatsD (UDP) and Prometheus scrapers with
//! upstream's names; logs have upstream's formats and never carry secrets.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};

use crate::common::{post_json, request, start};

const RULES: &str = "domain: rl\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: hour, requests_per_unit: 2}\n";
const REQ: &str =
    r#"{"domain":"rl","descriptors":[{"entries":[{"key":"api_key","value":"alice"}]}]}"#;

/// Sums `name:value|c` deltas per name.
fn add_lines(totals: &mut HashMap<String, u64>, text: &str) {
    for line in text.lines() {
        if let Some((name, rest)) = line.split_once(':')
            && let Some((v, kind)) = rest.split_once('|')
            && kind.starts_with('c')
        {
            let key = match kind.split_once("|#") {
                Some((_, tags)) => format!("{name}|#{tags}"),
                None => name.to_owned(),
            };
            *totals.entry(key).or_default() += v.parse::<u64>().unwrap_or(0);
        }
    }
}

#[test]
fn statsd_over_tcp_with_extra_tags() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", &port),
            ("STATS_FLUSH_INTERVAL", "100ms"),
            ("EXTRA_TAGS", "env:test"),
        ],
    );
    for _ in 0..3 {
        post_json(srv.http, REQ);
    }
    let (conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reader = BufReader::new(conn);
    let mut totals = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let want = [
        (
            "ratelimit.service.rate_limit.rl.api_key.total_hits.__env=test",
            3,
        ),
        (
            "ratelimit.service.rate_limit.rl.api_key.over_limit.__env=test",
            1,
        ),
        (
            "ratelimit.service.rate_limit.rl.api_key.within_limit.__env=test",
            2,
        ),
        ("ratelimit.service.config_load_success.__env=test", 1),
    ];
    while !want
        .iter()
        .all(|(k, v)| totals.get(*k) == Some(&(*v as u64)))
    {
        assert!(
            Instant::now() < deadline,
            "statsd never saw {want:?}: {totals:?}"
        );
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            continue;
        }
        add_lines(&mut totals, &line);
    }
}

/// A request value with a newline, counted under `detailed_metric`, must not start a
/// statsd line of its own: the client would choose that metric's name and value.
#[test]
fn a_newline_in_a_request_value_cannot_inject_a_statsd_line() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let rules = "domain: rl\ndescriptors:\n  - key: api_key\n    detailed_metric: true\n    rate_limit: {unit: hour, requests_per_unit: 2}\n";
    let srv = start(
        &[("rl.yaml", rules)],
        &[
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", &port),
            ("STATS_FLUSH_INTERVAL", "100ms"),
        ],
    );
    let req = r#"{"domain":"rl","descriptors":[{"entries":[{"key":"api_key","value":"a\ninjected.gauge:999999|g\nb"}]}]}"#;
    post_json(srv.http, req);
    let (conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reader = BufReader::new(conn);
    let want = "ratelimit.service.rate_limit.rl.api_key_a_injected.gauge_999999_g_b.total_hits:1|c";
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l == want) {
        assert!(Instant::now() < deadline, "no {want:?} in {seen:#?}");
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            continue;
        }
        let line = line.trim_end().to_owned();
        assert!(
            !line.starts_with("injected"),
            "an injected line: {seen:#?} {line:?}"
        );
        seen.push(line);
    }
}

#[test]
fn dogstatsd_over_udp_with_mogrifiers() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let port = sock.local_addr().unwrap().port().to_string();
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("USE_DOG_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", &port),
            ("STATS_FLUSH_INTERVAL", "100ms"),
            ("USE_DOG_STATSD_MOGRIFIERS", "RL"),
            (
                "DOG_STATSD_MOGRIFIER_RL_PATTERN",
                r"^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$",
            ),
            (
                "DOG_STATSD_MOGRIFIER_RL_NAME",
                "ratelimit.service.rate_limit.$3",
            ),
            ("DOG_STATSD_MOGRIFIER_RL_TAGS", "domain:$1,descriptor:$2"),
            ("EXTRA_TAGS", "env:test"),
        ],
    );
    for _ in 0..3 {
        post_json(srv.http, REQ);
    }
    let mut totals = HashMap::new();
    let key = "ratelimit.service.rate_limit.over_limit|#domain:rl,descriptor:api_key,env:test";
    let hits = "ratelimit.service.rate_limit.total_hits|#domain:rl,descriptor:api_key,env:test";
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 65536];
    while totals.get(key) != Some(&1) || totals.get(hits) != Some(&3) {
        assert!(
            Instant::now() < deadline,
            "DogStatsD never saw the tagged stats: {totals:?}"
        );
        if let Ok(n) = sock.recv(&mut buf) {
            assert!(n <= 1400, "datagram of {n} bytes");
            add_lines(&mut totals, &String::from_utf8_lossy(&buf[..n]));
        }
    }
}

#[tokio::test]
async fn prometheus_exposition_parses_and_has_upstreams_names() {
    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("USE_PROMETHEUS", "true"),
            ("PROMETHEUS_ADDR", "127.0.0.1:0"),
        ],
    );
    let addr = crate::common::prometheus_addr(&srv);
    for _ in 0..3 {
        post_json(srv.http, REQ);
    }
    // One gRPC call, for the timer.
    let ch = crate::grpc_face::channel(&srv.grpc).await;
    crate::grpc_face::call(&ch, &crate::grpc_face::req("rl", &[("api_key", "bob")]))
        .await
        .unwrap();
    let r = request(addr, "GET", "/metrics", b"");
    assert_eq!(r.status, 200);
    let text = r.text();
    for want in [
        "ratelimit_service_rate_limit_over_limit{domain=\"rl\",key1=\"api_key\"} 1\n",
        "ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"api_key\"} 4\n",
        "ratelimit_service_total_requests{grpc_method=\"ShouldRateLimit\"} 1\n",
        "ratelimit_service_response_time_seconds_count{grpc_method=\"ShouldRateLimit\"} 1\n",
        "ratelimit_service_config_load_success 1\n",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert_eq!(request(addr, "GET", "/other", b"").status, 404);
    check_with_python_parser(&text);
}

/// Parses the exposition with the Prometheus project's Python client library.
fn check_with_python_parser(text: &str) {
    let script = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families\nfams = list(text_string_to_metric_families(sys.stdin.read()))\nnames = {f.name for f in fams}\nassert 'ratelimit_service_rate_limit_over_limit' in names, names\nprint(len(fams))\n";
    let has_parser = std::process::Command::new("python3")
        .args(["-c", "import prometheus_client"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_parser {
        assert!(
            std::env::var("RATELIMIT_REQUIRE_PROM_PARSER").is_err(),
            "prometheus_client missing but required"
        );
        eprintln!("SKIPPED parser check: pip install prometheus_client");
        return;
    }
    use std::io::Write;
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "parser rejected the exposition: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_sinks_are_refused_and_json_logs_hide_secrets() {
    let dir = crate::common::temp_dir("sinks");
    let out = crate::common::command(
        &dir,
        &[("USE_PROMETHEUS", "true"), ("USE_DOG_STATSD", "true")],
    )
    .output()
    .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("unable to use more than one stats sink at the same time"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let srv = start(
        &[("rl.yaml", RULES)],
        &[
            ("LOG_FORMAT", "json"),
            ("LOG_LEVEL", "debug"),
            ("REDIS_AUTH", "user:hunter2-secret"),
            ("USE_STATSD", "false"),
            ("STATS_FLUSH_INTERVAL", "100ms"),
        ],
    );
    post_json(srv.http, REQ);
    post_json(srv.http, "not json");
    std::thread::sleep(Duration::from_millis(400));
    let lines: Vec<String> = srv.proc.lines.try_iter().collect();
    let json_lines: Vec<serde_json::Value> = lines
        .iter()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(!json_lines.is_empty(), "{lines:?}");
    for l in &json_lines {
        assert!(
            l["@timestamp"].is_string() && l["@message"].is_string() && l["level"].is_string(),
            "{l}"
        );
    }
    // USE_STATSD=false: statistics go to the log.
    assert!(
        json_lines.iter().any(|l| l["@message"]
            .as_str()
            .unwrap()
            .contains("stat ratelimit.service.rate_limit.rl.api_key.total_hits")),
        "{lines:?}"
    );
    assert!(
        lines.iter().all(|l| !l.contains("hunter2")),
        "a secret reached the log"
    );
}
