//! `examples/envoy/run.sh`, the one-command example the README points to, run as a
//! newcomer runs it (Redis, our server and Envoy on loopback, three requests through
//! Envoy), on free ports and with the binaries this test run built.

use std::process::Command;
use std::time::Duration;

use test_support::net::free_port;
use test_support::process::{Capture, Proc};

use crate::envoy::{envoy_or_skip, example_dir};

#[test]
fn the_envoy_example_shows_200_200_429() {
    let Some(envoy) = envoy_or_skip() else {
        return;
    };
    let mut cmd = Command::new("bash");
    cmd.arg(example_dir().join("run.sh"))
        .env("RATELIMIT_BIN", env!("CARGO_BIN_EXE_ratelimit"))
        .env("ENVOY_BIN", envoy);
    for port in [
        "ENVOY_PORT",
        "APP_PORT",
        "ENVOY_ADMIN_PORT",
        "GRPC_PORT",
        "HTTP_PORT",
        "DEBUG_PORT",
        "REDIS_PORT",
    ] {
        cmd.env(port, free_port().to_string());
    }
    let mut run = Proc::spawn(cmd, Capture::Stdout);
    let status = run.wait_timeout(Duration::from_secs(90));
    if status.is_none() {
        // SIGTERM, so that the script stops what it started.
        run.terminate(Duration::from_secs(10));
    }
    let status = status.expect("run.sh did not finish in 90 s");
    // Everything it printed: the stream ends when the script and its children are gone.
    let lines: Vec<String> =
        std::iter::from_fn(|| run.lines.recv_timeout(Duration::from_secs(10)).ok()).collect();
    assert!(status.success(), "run.sh: {status:?}, output: {lines:?}");
    let codes: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.rsplit_once("->  ").map(|(_, code)| code))
        .collect();
    assert_eq!(codes, ["200", "200", "429"], "{lines:?}");
}
