//! Shadow mode in process: every decision is taken and counted, none denies.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use http::{Request, Response};
use ratelimit_tower::{Action, HeaderStyle, PeerAddr, RateLimit, RateLimitLayer, Rules};
use tower::{Layer, ServiceExt};

#[tokio::test]
async fn shadow_mode_counts_but_never_denies() {
    let rules = Rules::new("api").limit(["remote_address"], RateLimit::per_minute(1));
    let limiter = Arc::new(ratelimit_tower::in_memory(rules).unwrap());
    let svc = RateLimitLayer::builder(limiter.clone(), "api")
        .descriptor([Action::remote_address()])
        .headers(HeaderStyle::Draft03)
        .shadow_mode(true)
        .build()
        .unwrap()
        .layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    let mut remaining = Vec::new();
    for _ in 0..3 {
        let mut req = Request::new(());
        let peer: SocketAddr = "192.0.2.1:1000".parse().unwrap();
        req.extensions_mut().insert(PeerAddr(peer));
        let resp = svc.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(!resp.headers().contains_key("retry-after"));
        remaining.push(
            resp.headers()["ratelimit-remaining"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(remaining, ["0", "0", "0"]);
    // The rule saw two requests over its limit.
    let rules = limiter.rules().unwrap();
    assert_eq!(rules.rules()[0].stats.over_limit.load(Relaxed), 2);
}
