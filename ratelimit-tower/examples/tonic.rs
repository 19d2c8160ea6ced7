//! A tonic gRPC server behind the rate limit layer: every client may call each method 3
//! times a minute. The service is gRPC's health service (tonic-health), standing in for
//! any generated one; the descriptor is the client address and the method (`:path`).
//!
//! A call over the limit fails with `RESOURCE_EXHAUSTED`; its metadata carries
//! `retry-after` and the IETF `ratelimit` fields. `LISTEN` sets the address (default
//! `127.0.0.1:50051`); it prints `listening on ADDR` when it accepts connections.
//!
//! ```sh
//! cargo run -p ratelimit-tower --features tonic --example tonic
//! ```

use std::sync::Arc;

use ratelimit_tower::{Action, HeaderStyle, RateLimit, RateLimitLayer, Rules};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

#[tokio::main]
async fn main() {
    let rules = Rules::new("grpc").limit(
        [("remote_address", ""), ("method", "")],
        RateLimit::per_minute(3).name("per_client_method"),
    );
    let limiter = Arc::new(ratelimit_tower::in_memory(rules).expect("valid rules"));
    let layer = RateLimitLayer::builder(limiter, "grpc")
        // The client as tonic saw it (`TcpConnectInfo`), then the method's path.
        .descriptor([Action::remote_address(), Action::header(":path", "method")])
        .headers(HeaderStyle::Ietf)
        .build()
        .expect("a layer");
    let (_reporter, health) = tonic_health::server::health_reporter();

    let addr = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:50051".into());
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("listening on {}", listener.local_addr().expect("bound"));
    Server::builder()
        .layer(layer)
        .add_service(health)
        .serve_with_incoming(TcpIncoming::from(listener))
        .await
        .expect("serve");
}
