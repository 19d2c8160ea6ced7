//! Helpers shared by the server's test crates: raw HTTP/1.1 over a real socket, a stand-in
//! assets folder, and the real binary on a free loopback port.

// Each test crate uses its own subset.
#![allow(dead_code)]

use std::{
    net::SocketAddr,
    path::PathBuf,
    process::Stdio,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::TcpStream,
    process::{Child, Command},
    time::timeout,
};

pub const LIMIT: Duration = Duration::from_secs(20);

/// The `gql-demo` binary of this package.
pub const BIN: &str = env!("CARGO_BIN_EXE_gql-demo");

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// Sends one raw HTTP/1.1 request (the caller adds `Connection: close`) and reads the reply.
pub async fn exchange(addr: SocketAddr, raw: &[u8]) -> Reply {
    timeout(LIMIT, async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(raw).await.unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).await.unwrap();
        parse(&bytes)
    })
    .await
    .expect("reply in time")
}

pub fn parse(bytes: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").expect("a full HTTP reply");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

pub async fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut raw = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        raw.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    raw.push_str("\r\n");
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    exchange(addr, &raw).await
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

static DIRS: AtomicUsize = AtomicUsize::new(0);

/// A stand-in `node_modules` with the four files the page loads.
pub fn fake_assets() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "gql-assets-{}-{}",
        std::process::id(),
        DIRS.fetch_add(1, Ordering::Relaxed)
    ));
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
    child: Child,
}

impl Binary {
    /// Starts the binary with `env` and `args` and waits for the address it announces.
    pub async fn start(env: &[(&str, &str)], args: &[&str]) -> Self {
        let mut command = Command::new(BIN);
        command
            .env("PORT", "0")
            .env("HOST", "127.0.0.1")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = timeout(LIMIT, lines.next_line())
            .await
            .expect("the binary announces its address in time")
            .unwrap()
            .expect("a first line on stdout");
        let url = line.rsplit(' ').next().unwrap();
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/graphql")
            .parse()
            .unwrap_or_else(|e| panic!("{line:?} does not end in an address: {e}"));
        Self { addr, child }
    }

    /// Sends SIGTERM and checks that the binary exits cleanly.
    pub async fn stop(mut self) {
        let pid = self.child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = timeout(LIMIT, self.child.wait()).await.unwrap().unwrap();
        assert!(status.success(), "graceful exit on SIGTERM: {status:?}");
    }
}
