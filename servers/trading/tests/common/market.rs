//! The market tests' harness: a server on an injected, settable clock and seed, and
//! form/query calls that return the whole answer after the envelope checks.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use trading_server::Settings;

use super::*;

pub struct Market {
    pub server: Server,
    pub clock: Arc<AtomicU64>,
}

pub async fn market(seed: u64, dir: Option<std::path::PathBuf>) -> Market {
    let clock = Arc::new(AtomicU64::new(NOW));
    let c = clock.clone();
    let server = start(Settings {
        clock: Arc::new(move || c.load(Ordering::SeqCst)),
        seed,
        data_dir: dir,
        ..fixed_clock()
    })
    .await;
    Market { server, clock }
}

impl Market {
    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }
    pub fn set(&self, ms: u64) {
        self.clock.store(ms, Ordering::SeqCst);
    }
}

/// POSTs a form and returns `(status, whole answer)` after the envelope checks.
pub async fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, Value) {
    let r = call(
        addr,
        "POST",
        &format!("/api/v2/{path}"),
        &[FORM],
        body.as_bytes(),
    )
    .await;
    let v = envelope(&r, path);
    (r.status, v)
}

pub async fn get(addr: SocketAddr, path: &str, query: &str) -> (u16, Value) {
    let target = if query.is_empty() {
        format!("/api/v2/{path}")
    } else {
        format!("/api/v2/{path}?{query}")
    };
    let r = call(addr, "GET", &target, &[], b"").await;
    let v = envelope(&r, path);
    (r.status, v)
}

pub fn refused(status: u16, v: &Value, param: &str) {
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["data"]["code"], 1440, "{v}");
    let info = v["missing_information"].as_array().unwrap();
    assert!(info.iter().any(|i| i["parameter"] == param), "{v}");
}

pub fn num(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}
