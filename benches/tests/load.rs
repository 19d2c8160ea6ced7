//! The load generator against the null server, both as built binaries over loopback: the
//! numbers in docs/benchmarks.md are only as good as `rl-load`'s count of what it sent and
//! what came back, on each of its client paths.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `rl-null-server` on a port the kernel picks and returns it with its address.
fn null_server() -> (Server, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rl-null-server"))
        .arg("127.0.0.1:0")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start rl-null-server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the listening line");
    let addr = line
        .trim()
        .strip_prefix("listening grpc=")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (Server(child), addr)
}

/// Runs `rl-load` to completion and returns its RESULT line's `name=value` fields.
fn load(args: &[&str]) -> Vec<(String, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_rl-load"))
        .args(args)
        .output()
        .expect("run rl-load");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "rl-load {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line in {stdout:?}"));
    line.split_whitespace()
        .skip(1)
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in {fields:?}"))
}

#[test]
fn every_client_path_counts_exactly_what_it_sent() {
    let (_server, addr) = null_server();
    for extra in [
        &[][..],
        &["--channel"][..],
        &["--conns", "2"][..],
        &["--raw"][..],
        &["--raw", "--conns", "3", "--warmup", "2"][..],
    ] {
        let mut args = vec!["--addr", &addr, "--count", "500", "--streams", "8"];
        args.extend_from_slice(extra);
        let r = load(&args);
        assert_eq!(field(&r, "decisions"), "500", "{extra:?}: {r:?}");
        assert_eq!(field(&r, "errors"), "0", "{extra:?}: {r:?}");
        assert_eq!(field(&r, "over_limit"), "0", "{extra:?}: {r:?}");
        let cpu: f64 = field(&r, "load_cpu_us").parse().expect("a number");
        assert!(cpu >= 0.0, "{r:?}");
        // Closed loop: latency from the schedule is latency from the send.
        assert_eq!(field(&r, "p99_us"), field(&r, "send_p99_us"), "{r:?}");
    }
}

#[test]
fn open_loop_sends_the_schedule_and_times_the_pacer() {
    let (_server, addr) = null_server();
    for (extra, client) in [
        (&[][..], "tonic"),
        (&["--raw"][..], "raw"),
        (&["--raw", "--conns", "2"][..], "raw"),
    ] {
        let mut args = vec![
            "--addr",
            &addr,
            "--count",
            "300",
            "--rate",
            "3000",
            "--streams",
            "4",
        ];
        args.extend_from_slice(extra);
        let r = load(&args);
        assert_eq!(field(&r, "client"), client, "{r:?}");
        assert_eq!(field(&r, "decisions"), "300", "{r:?}");
        assert_eq!(field(&r, "errors"), "0", "{r:?}");
        assert_eq!(field(&r, "offered"), "3000", "{r:?}");
        // 300 slots at 3,000/s are 0.1 s of schedule: the run cannot end before the last one.
        let secs: f64 = field(&r, "secs").parse().expect("secs");
        assert!(secs >= 0.09, "{r:?}");
        field(&r, "pacer_late_p99_us");
        // From the schedule is never less than from the actual send.
        let p50 = |f: &str| field(&r, f).parse::<f64>().expect("a number");
        assert!(p50("p50_us") >= p50("send_p50_us"), "{r:?}");
    }
}

#[test]
fn a_server_that_is_not_there_is_an_error_not_a_hang() {
    // Bound and dropped: nothing listens there now.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .to_string();
    for raw in [false, true] {
        let mut args = vec!["--addr", &addr, "--count", "10"];
        if raw {
            args.push("--raw");
        }
        let out = Command::new(env!("CARGO_BIN_EXE_rl-load"))
            .args(&args)
            .output()
            .expect("run rl-load");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cannot connect"), "{args:?}: {err}");
    }
}

#[test]
fn a_server_that_never_answers_fails_the_raw_run_instead_of_hanging() {
    // Accepts, reads and keeps the connection, and never sends a byte back.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("bound").to_string();
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        let _ = std::io::copy(&mut conn, &mut std::io::sink());
    });
    let out = Command::new(env!("CARGO_BIN_EXE_rl-load"))
        .args(["--raw", "--addr", &addr, "--count", "5"])
        .output()
        .expect("run rl-load");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the server sent nothing for 10s (5 calls in flight)"),
        "{err}"
    );
}
