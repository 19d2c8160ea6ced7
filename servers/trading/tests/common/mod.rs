//! The harness the loopback tests share: the real server on 127.0.0.1:0 with an injected
//! clock, hand-written HTTP/1.1 requests, and a signer that makes SDK-style tokens.
// Each test binary uses a different part of the harness.
#![allow(dead_code)]

pub mod market;

use std::net::SocketAddr;
use std::sync::Arc;

use serde_json::Value;
use tokio::net::TcpListener;
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

pub use test_support::http::Response as Reply;

/// Sends `request` as is and reads the reply to the end.
pub async fn raw(addr: SocketAddr, request: &[u8]) -> Reply {
    test_support::http::exchange_async(addr, request).await
}

/// One request with `Host`, `Connection: close` and `Content-Length` added.
pub async fn call(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    test_support::http::request_async(addr, method, target, headers, body).await
}

pub const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// The envelope invariants every answer must keep.
pub fn envelope(r: &Reply, endpoint: &str) -> Value {
    let v = r.json();
    assert_eq!(v["meta"]["status"], r.status, "{v}");
    assert_eq!(v["meta"]["endpoint"], endpoint, "{v}");
    assert_eq!(v["meta"]["api_version"], 2);
    assert_eq!(r.header("content-type"), Some("application/json"));
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
