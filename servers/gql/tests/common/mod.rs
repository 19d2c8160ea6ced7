//! Helpers shared by the server's test crates: raw HTTP/1.1 over a real socket, a stand-in
//! assets folder, and the real binary on a free loopback port.

// Each test crate uses its own subset.
#![allow(dead_code)]

use std::{net::SocketAddr, path::PathBuf, process::Stdio, time::Duration};

use serde_json::Value;
pub use test_support::http::Response as Reply;
use test_support::process::{Capture, Proc};

pub const LIMIT: Duration = Duration::from_secs(20);

/// The `gql-demo` binary of this package.
pub const BIN: &str = env!("CARGO_BIN_EXE_gql-demo");

/// Sends one raw HTTP/1.1 request (the caller adds `Connection: close`) and reads the reply.
pub async fn exchange(addr: SocketAddr, raw: &[u8]) -> Reply {
    test_support::http::exchange_async(addr, raw).await
}

/// One request with `Connection: close` and, unless given, `Content-Length`.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    test_support::http::request_async(addr, method, target, headers, body).await
}

pub async fn post_json(addr: SocketAddr, body: Value) -> Reply {
    request(
        addr,
        "POST",
        "/graphql",
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
    .await
}

pub async fn get_query(addr: SocketAddr, query: &str) -> Reply {
    let encoded: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("query", query)
        .finish();
    request(
        addr,
        "GET",
        &format!("/graphql?{encoded}"),
        &[("Accept", "application/json")],
        b"",
    )
    .await
}

/// A stand-in `node_modules` with the four files the page loads.
pub fn fake_assets() -> PathBuf {
    let dir = test_support::net::temp_dir("gql-assets", "node_modules");
    for (file, text) in [
        ("react/umd/react.production.min.js", "/* react */"),
        (
            "react-dom/umd/react-dom.production.min.js",
            "/* react-dom */",
        ),
        ("graphiql/graphiql.min.js", "/* graphiql */"),
        ("graphiql/graphiql.min.css", "/* css */"),
    ] {
        let path = dir.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// The real binary, started with `PORT=0` on loopback; killed if a test fails before
/// [`Binary::stop`].
pub struct Binary {
    pub addr: SocketAddr,
    proc: Proc,
}

impl Binary {
    /// Starts the binary with `env` and `args` and waits for the address it announces.
    pub async fn start(env: &[(&str, &str)], args: &[&str]) -> Self {
        let mut command = std::process::Command::new(BIN);
        command
            .env("PORT", "0")
            .env("HOST", "127.0.0.1")
            .args(args)
            .stderr(Stdio::inherit());
        for (key, value) in env {
            command.env(key, value);
        }
        let proc = Proc::spawn(command, Capture::Stdout);
        let line = proc
            .find_line(LIMIT, |l| Some(l.to_owned()))
            .expect("the binary announces its address in time");
        let url = line.rsplit(' ').next().unwrap();
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/graphql")
            .parse()
            .unwrap_or_else(|e| panic!("{line:?} does not end in an address: {e}"));
        Self { addr, proc }
    }

    /// Sends SIGTERM and checks that the binary exits cleanly.
    pub async fn stop(mut self) {
        assert!(self.proc.signal("TERM"));
        let status = self.proc.wait_timeout(LIMIT).unwrap();
        assert!(status.success(), "graceful exit on SIGTERM: {status:?}");
    }
}
