//! Startup failures, graceful shutdown.

use std::time::{Duration, Instant};

use crate::common::{command, request, start, temp_dir};

fn run_to_exit(env: &[(&str, &str)], rules: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = temp_dir("exit");
    for (name, text) in rules {
        std::fs::write(dir.join("config").join(name), text).unwrap();
    }
    let mut child = command(&dir, env).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server should have exited");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    use std::io::Read;
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (status.code(), err)
}

const OK_RULES: &str =
    "domain: d\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n";

#[test]
fn a_bad_setting_names_the_variable_and_value() {
    let (code, err) = run_to_exit(&[("PORT", "80eighty")], &[("a.yaml", OK_RULES)]);
    assert_ne!(code, Some(0));
    assert!(err.contains("PORT") && err.contains("80eighty"), "{err}");
    let (code, err) = run_to_exit(&[("NEAR_LIMIT_RATIO", "high")], &[("a.yaml", OK_RULES)]);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("NEAR_LIMIT_RATIO") && err.contains("high"),
        "{err}"
    );
}

#[test]
fn a_zero_flush_interval_stops_startup_instead_of_spinning() {
    let (code, err) = run_to_exit(
        &[("USE_STATSD", "true"), ("STATS_FLUSH_INTERVAL", "0")],
        &[("a.yaml", OK_RULES)],
    );
    assert_ne!(code, Some(0));
    assert!(
        err.contains("STATS_FLUSH_INTERVAL") && err.contains("a duration above 0"),
        "{err}"
    );
}

#[test]
fn a_mapper_label_prometheus_cannot_read_stops_startup() {
    let dir = temp_dir("mapper");
    let mapper = dir.join("mapper.yaml");
    std::fs::write(
        &mapper,
        "mappings:\n- match: ratelimit.*.x\n  name: rl_x\n  labels: {'per route': $1}\n",
    )
    .unwrap();
    let (code, err) = run_to_exit(
        &[
            ("USE_PROMETHEUS", "true"),
            ("PROMETHEUS_ADDR", "127.0.0.1:0"),
            ("PROMETHEUS_MAPPER_YAML", mapper.to_str().unwrap()),
        ],
        &[("a.yaml", OK_RULES)],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("PROMETHEUS_MAPPER_YAML") && err.contains("invalid label name \"per route\""),
        "{err}"
    );
}

#[test]
fn a_mapper_path_that_is_no_regular_file_stops_startup_instead_of_waiting() {
    let dir = temp_dir("mapper-fifo");
    let fifo = test_support::net::fifo(&dir, "mapper.yaml");
    let (code, err) = run_to_exit(
        &[
            ("USE_PROMETHEUS", "true"),
            ("PROMETHEUS_ADDR", "127.0.0.1:0"),
            ("PROMETHEUS_MAPPER_YAML", fifo.to_str().unwrap()),
        ],
        &[("a.yaml", OK_RULES)],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(code, Some(0));
    assert!(
        err.contains("PROMETHEUS_MAPPER_YAML") && err.contains("not a regular file (a FIFO)"),
        "{err}"
    );
}

#[test]
fn an_unreachable_store_stops_startup_after_the_backoff() {
    let port = test_support::net::free_port();
    let url = format!("127.0.0.1:{port}");
    let (code, err) = run_to_exit(
        &[
            ("BACKEND_TYPE", "redis"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", &url),
            ("REDIS_STARTUP_INITIAL_INTERVAL", "100ms"),
            ("REDIS_STARTUP_MAX_ELAPSED_TIME", "1s"),
            ("REDIS_TIMEOUT", "200ms"),
        ],
        &[("a.yaml", OK_RULES)],
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("cannot connect to redis"), "{err}");
    let (code, err) = run_to_exit(&[("BACKEND_TYPE", "memcache")], &[("a.yaml", OK_RULES)]);
    assert_ne!(code, Some(0));
    assert!(err.contains("MEMCACHE_HOST_PORT"), "{err}");
}

#[test]
fn memcache_tls_files_and_srv_records_are_checked_at_start() {
    let dir = temp_dir("mc-files");
    let not_pem = dir.join("ca.pem");
    std::fs::write(&not_pem, "not a certificate").unwrap();
    let not_pem = not_pem.to_str().unwrap().to_owned();
    let (code, err) = run_to_exit(
        &[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", "localhost:11211"),
            ("MEMCACHE_TLS", "true"),
            ("MEMCACHE_TLS_CACERT", &not_pem),
        ],
        &[("a.yaml", OK_RULES)],
    );
    assert_ne!(code, Some(0));
    assert!(
        err.contains("MEMCACHE_TLS_CACERT") && err.contains(&not_pem),
        "{err}"
    );
    let (code, err) = run_to_exit(
        &[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_HOST_PORT", "localhost:11211"),
            ("MEMCACHE_TLS", "true"),
            ("MEMCACHE_TLS_CLIENT_CERT", "/nonexistent/client.pem"),
            ("MEMCACHE_TLS_CLIENT_KEY", "/nonexistent/client.key"),
        ],
        &[("a.yaml", OK_RULES)],
    );
    assert_ne!(code, Some(0));
    assert!(
        err.contains("MEMCACHE_TLS_CLIENT_CERT /nonexistent"),
        "{err}"
    );
    // A DNS server that knows no such record.
    let dns = test_support::dns::SrvDns::start(Vec::new());
    let nameserver = dns.addr.to_string();
    let (code, err) = run_to_exit(
        &[
            ("BACKEND_TYPE", "memcache"),
            ("MEMCACHE_SRV", "_memcache._tcp.missing.test"),
            ("MEMCACHE_SRV_NAMESERVER", &nameserver),
        ],
        &[("a.yaml", OK_RULES)],
    );
    assert_ne!(code, Some(0));
    assert!(err.contains("_memcache._tcp.missing.test"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_rule_file_names_file_path_and_problem() {
    let bad = "domain: d\ndescriptors:\n  - key: ip\n    rate_limit:\n      unlimied: true\n";
    let (code, err) = run_to_exit(&[], &[("a.yaml", OK_RULES), ("b.yaml", bad)]);
    assert_ne!(code, Some(0));
    assert!(
        err.contains(
            "config.b.yaml: config error, unknown key 'unlimied' (at descriptors[0].rate_limit)"
        ),
        "{err}"
    );
}

#[test]
fn a_missing_rule_directory_is_reported() {
    let dir = temp_dir("missing");
    let missing = dir.join("nowhere");
    let (code, err) = run_to_exit(&[("RUNTIME_ROOT", missing.to_str().unwrap())], &[]);
    assert_ne!(code, Some(0));
    assert!(err.contains("cannot read rule directory"), "{err}");
}

#[test]
fn sigterm_drains_and_exits_cleanly() {
    let mut srv = start(&[("a.yaml", OK_RULES)], &[]);
    assert_eq!(request(srv.http, "GET", "/healthcheck", b"").status, 200);
    assert!(srv.proc.signal("TERM"));
    let status = srv
        .proc
        .wait_timeout(Duration::from_secs(15))
        .expect("did not stop after SIGTERM");
    assert!(status.success(), "{status:?}");
    let log: Vec<String> = srv.proc.lines.try_iter().collect();
    assert!(
        log.iter()
            .any(|l| l.contains("termination signal received")),
        "{log:?}"
    );
}

/// `THP_enabled` of the process's /proc status: whether its memory may use huge pages.
fn huge_pages_allowed(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("THP_enabled:"));
    line.expect("THP_enabled in /proc status").ends_with('1')
}

#[test]
fn huge_pages_are_off_unless_the_operator_allows_them() {
    let rules = [("r.yaml", "domain: d\n")];
    let off = start(&rules, &[]);
    assert!(!huge_pages_allowed(off.proc.child.id()));
    let on = start(&rules, &[("MIMALLOC_ALLOW_THP", "1")]);
    assert!(huge_pages_allowed(on.proc.child.id()));
}
