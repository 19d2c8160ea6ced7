//! The denominator of the server ratio: `ShouldRateLimit` on exactly the stack of the real
//! server (`ratelimit_server::grpc::serve_grpc`: its `GrpcRoutes` on hyper's HTTP/2
//! connection, the same connection threads as on the memory store and Redis) that answers
//! OK at once, so `ours / null` is the share of the per-request budget left after our
//! decision path.
//!
//! `rl-null-server [ADDR]` (default 127.0.0.1:18091); prints `listening grpc=ADDR`.

use std::time::Duration;

use ratelimit_server::Settings;
use ratelimit_server::grpc::{Connections, GrpcListener, GrpcRoutes, serve_grpc};
use ratelimit_server::pb::rls;
use tonic::service::Routes;
use tonic::{Request, Response, Status};

// The `ratelimit` binary's allocator: with glibc's, this server paid about a sixth of its
// time in malloc that the real server does not, and the ratio flattered the real server.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Null;

#[tonic::async_trait]
impl rls::rate_limit_service_server::RateLimitService for Null {
    async fn should_rate_limit(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        // One OK status per descriptor, as the real server's answer has.
        let n = request.into_inner().descriptors.len();
        Ok(Response::new(rls::RateLimitResponse {
            overall_code: rls::rate_limit_response::Code::Ok as i32,
            statuses: vec![
                rls::rate_limit_response::DescriptorStatus {
                    code: rls::rate_limit_response::Code::Ok as i32,
                    ..Default::default()
                };
                n
            ],
            ..Default::default()
        }))
    }
}

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18091".into());
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    println!("listening grpc={}", listener.local_addr().expect("bound"));
    let routes = GrpcRoutes::new(Null, Routes::default());
    let (_tx, rx) = tokio::sync::watch::channel(false);
    // The real server's connection handling with its default settings, as it runs on the
    // memory store and Redis.
    let settings = Settings::from_lookup(|_| None).expect("the default settings parse");
    let mut conns = Connections::from_settings(&settings, settings.worker_threads);
    conns.ageing.grace = Duration::from_secs(1);
    serve_grpc(
        GrpcListener::Tcp(listener),
        routes,
        None,
        conns,
        rx,
        Duration::from_secs(1),
    )
    .await;
}
