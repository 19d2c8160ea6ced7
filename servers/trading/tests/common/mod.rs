//! The harness the loopback tests share: the real server on 127.0.0.1:0 with an injected
//! clock, hand-written HTTP/1.1 requests, and a signer that makes SDK-style tokens.
// Each test binary uses a different part of the harness.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use trading_model::auth::sign;
use trading_server::{Settings, serve};

pub const NOW: u64 = 1_592_207_324_028;

pub struct Server {
    pub addr: SocketAddr,
    pub stop: Option<oneshot::Sender<()>>,
    pub done: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub async fn start(settings: Settings) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let done = tokio::spawn(serve(listener, settings, async {
        let _ = rx.await;
    }));
    Server {
        addr,
        stop: Some(tx),
        done,
    }
}

pub fn fixed_clock() -> Settings {
    Settings {
        clock: Arc::new(|| NOW),
        // Most tests send many anonymous requests; the limit tests switch it on.
        ip_per_minute: 0,
        ..Settings::default()
    }
}

pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

pub async fn raw(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf))
        .await
        .expect("server answered in time")
        .unwrap();
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&buf[..split]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Reply {
        status,
        head,
        body: buf[split + 4..].to_vec(),
    }
}

pub async fn call(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    raw(addr, &bytes).await
}

pub const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// The envelope invariants every answer must keep.
pub fn envelope(r: &Reply, endpoint: &str) -> Value {
    let v = r.json();
    assert_eq!(v["meta"]["status"], r.status, "{v}");
    assert_eq!(v["meta"]["endpoint"], endpoint, "{v}");
    assert_eq!(v["meta"]["api_version"], 2);
    assert_eq!(
        r.header("content-type").as_deref(),
        Some("application/json")
    );
    assert!(v.get("data").is_some());
    v
}

pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("trading-loopback-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// SDK-style nonce at the fixed clock: 100 ns units, plus a counter so each is larger.
pub fn nonce(step: u64) -> u128 {
    u128::from(NOW) * 10_000 + u128::from(step)
}

pub fn legacy_token(secret: &str, n: u128) -> String {
    sign(secret.as_bytes(), &format!(r#"{{"nonce":{n}}}"#))
}

/// A signed-request helper bound to one key.
pub struct Signer {
    pub addr: SocketAddr,
    pub key: String,
    pub secret: String,
    pub step: std::cell::Cell<u64>,
}

impl Signer {
    pub async fn post(&self, path: &str, body: &str) -> Reply {
        self.step.set(self.step.get() + 1);
        let token = legacy_token(&self.secret, nonce(self.step.get()));
        let target = format!("/api/v2/{path}");
        call(
            self.addr,
            "POST",
            &target,
            &[FORM, ("Key", &self.key), ("Authorization", &token)],
            body.as_bytes(),
        )
        .await
    }
    pub async fn get(&self, path: &str) -> Reply {
        self.step.set(self.step.get() + 1);
        let token = legacy_token(&self.secret, nonce(self.step.get()));
        let target = format!("/api/v2/{path}");
        call(
            self.addr,
            "GET",
            &target,
            &[("Key", &self.key), ("Authorization", &token)],
            b"",
        )
        .await
    }
}
