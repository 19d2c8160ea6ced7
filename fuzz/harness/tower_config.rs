//! Any text as the tower layer's YAML settings (`LayerConfig`): read and built into a
//! layer, or refused with an error, never a panic; a layer that builds answers a request.
//! Shared by the cargo-fuzz target and the stable corpus replay test
//! (`ratelimit-tower/tests/fuzz_corpus.rs`), which include this file by path.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use http::{Request, Response};
use ratelimit_backends::MemoryStore;
use ratelimit_core::{Limiter, ManualClock};
use ratelimit_tower::{LayerConfig, PeerAddr};
use tower::{Layer, ServiceExt};

/// Returns whether the text built a layer.
pub fn run(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(config) = LayerConfig::from_yaml(text) else {
        return false;
    };
    // Rules of another domain: with none at all every decision is an error, as upstream's.
    let limiter = Limiter::builder(MemoryStore::new(), ManualClock::new(1_700_000_000))
        .yaml(
            "other.yaml",
            "domain: fuzz-other\ndescriptors: [{key: k}]\n",
        )
        .build()
        .expect("the rules load");
    let Ok(layer) = config.layer(Arc::new(limiter)) else {
        return false;
    };
    let svc = layer.layer(tower::service_fn(|_req: Request<()>| async {
        Ok::<_, Infallible>(Response::new(()))
    }));
    let mut req = Request::builder()
        .uri("/admin/x?y=1")
        .header("x-forwarded-for", "1.2.3.4, 10.0.0.1")
        .header("x-api-key", "k")
        .body(())
        .expect("a request");
    let peer = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    req.extensions_mut()
        .insert(PeerAddr(SocketAddr::new(peer, 4000)));
    // No rules for its domain: whatever the descriptors, nothing is limited or fails.
    let resp = futures_executor::block_on(svc.oneshot(req)).expect("infallible");
    assert_eq!(resp.status(), http::StatusCode::OK, "{text:?}");
    true
}
