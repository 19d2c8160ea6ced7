//! The gRPC face: `envoy.service.ratelimit.v3.RateLimitService` and `grpc.health.v1.Health`
//! on one port (TCP, optionally TLS, or a unix socket), with upstream's connection ageing.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tonic::service::Routes;
use tonic::{Request, Response, Status};
use tonic_health::ServingStatus;

use crate::App;
use crate::convert;
use crate::log::{self, Level};
use crate::pb::rls;
use crate::tls::SharedConfig;

/// The decision call. It only translates: everything is decided by the limiter.
pub struct RlsService {
    app: Arc<App>,
    total_requests: Arc<AtomicU64>,
}

impl RlsService {
    /// A service answering from `app`'s limiter.
    pub fn new(app: Arc<App>) -> Self {
        let total_requests = app
            .limiter
            .stats()
            .counter("ratelimit_server.ShouldRateLimit.total_requests");
        RlsService {
            app,
            total_requests,
        }
    }
}

#[tonic::async_trait]
impl rls::rate_limit_service_server::RateLimitService for RlsService {
    async fn should_rate_limit(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        self.total_requests.fetch_add(1, Relaxed);
        let started = std::time::Instant::now();
        let r = self.decide(request).await;
        self.app.metrics.response_time.observe(started.elapsed());
        r
    }
}

impl RlsService {
    async fn decide(
        &self,
        request: Request<rls::RateLimitRequest>,
    ) -> Result<Response<rls::RateLimitResponse>, Status> {
        let req = convert::request_from_pb(request.into_inner()).map_err(|e| {
            self.app.limiter.stats().service_error.fetch_add(1, Relaxed);
            Status::invalid_argument(e.0)
        })?;
        let decision = self.app.limiter.should_rate_limit(&req);
        let decision = crate::tracing::in_span(
            "ShouldRateLimit",
            &req.domain,
            req.descriptors.len(),
            decision,
        );
        match decision.await {
            Ok(resp) => Ok(Response::new(convert::response_to_pb(&resp))),
            // Upstream returns a plain Go error, which gRPC sends as UNKNOWN with the text.
            Err(e) => {
                log::log(Level::Warn, &format!("ShouldRateLimit: {e}"));
                Err(Status::unknown(e.to_string()))
            }
        }
    }
}

/// The routes of the gRPC port, and a task that mirrors [`crate::Health`] into the gRPC
/// health service under the name `ratelimit`. The first status is set before this returns,
/// so a health check that arrives with the first connection never finds the service
/// unregistered.
pub async fn routes(app: Arc<App>) -> Routes {
    let (reporter, health_service) = tonic_health::server::health_reporter();
    let mut rx = app.health.subscribe();
    let status = |healthy: bool| {
        if healthy {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        }
    };
    let first = status(*rx.borrow_and_update());
    reporter.set_service_status("ratelimit", first).await;
    tokio::spawn(async move {
        while rx.changed().await.is_ok() {
            let s = status(*rx.borrow_and_update());
            reporter.set_service_status("ratelimit", s).await;
        }
    });
    Routes::new(rls::rate_limit_service_server::RateLimitServiceServer::new(
        RlsService::new(app),
    ))
    .add_service(health_service)
    .prepare()
}

/// Where the gRPC port listens.
pub enum GrpcListener {
    /// `GRPC_HOST:GRPC_PORT`.
    Tcp(TcpListener),
    /// `GRPC_UDS`.
    Unix(UnixListener),
}

/// Connection lifetime settings.
#[derive(Debug, Clone, Copy)]
pub struct Ageing {
    /// `GRPC_MAX_CONNECTION_AGE`, before jitter.
    pub max_age: Duration,
    /// `GRPC_MAX_CONNECTION_AGE_GRACE`.
    pub grace: Duration,
}

/// `age` +/- 10%, different for each connection so a fleet does not reconnect in step.
fn jittered(age: Duration) -> Duration {
    static N: AtomicU64 = AtomicU64::new(0);
    let r = RandomState::new().hash_one(N.fetch_add(1, Relaxed));
    let factor = 0.9 + 0.2 * (r % 10_001) as f64 / 10_000.0;
    age.mul_f64(factor)
}

/// Serves gRPC until `shutdown` flips, then drains connections for at most `drain`.
pub async fn serve_grpc(
    listener: GrpcListener,
    routes: Routes,
    tls: Option<SharedConfig>,
    ageing: Ageing,
    mut shutdown: watch::Receiver<bool>,
    drain: Duration,
) {
    let mut conns = JoinSet::new();
    loop {
        while conns.try_join_next().is_some() {}
        let accepted = tokio::select! {
            a = accept(&listener) => a,
            _ = shutdown.changed() => break,
        };
        let io = match accepted {
            Ok(io) => io,
            Err(e) => {
                log::log(Level::Error, &format!("gRPC accept failed: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let routes = routes.clone();
        let shutdown = shutdown.clone();
        let tls = tls.as_ref().map(|t| t.load_full());
        conns.spawn(async move {
            match (io, tls) {
                (Accepted::Tcp(s), Some(cfg)) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                    match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(s)).await {
                        Ok(Ok(tls)) => serve_conn(tls, routes, ageing, shutdown).await,
                        Ok(Err(e)) => {
                            log::log(Level::Debug, &format!("gRPC TLS handshake failed: {e}"))
                        }
                        Err(_) => log::log(Level::Debug, "gRPC TLS handshake timed out"),
                    }
                }
                (Accepted::Tcp(s), None) => serve_conn(s, routes, ageing, shutdown).await,
                (Accepted::Unix(s), _) => serve_conn(s, routes, ageing, shutdown).await,
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(drain, async { while conns.join_next().await.is_some() {} }).await;
    conns.abort_all();
}

enum Accepted {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

async fn accept(l: &GrpcListener) -> std::io::Result<Accepted> {
    match l {
        GrpcListener::Tcp(l) => {
            let (s, _) = l.accept().await?;
            let _ = s.set_nodelay(true);
            Ok(Accepted::Tcp(s))
        }
        GrpcListener::Unix(l) => Ok(Accepted::Unix(l.accept().await?.0)),
    }
}

/// One HTTP/2 connection: served until the client leaves, the server shuts down, or the
/// connection reaches its age (then GOAWAY, and a hard close after the grace period).
async fn serve_conn<I>(io: I, routes: Routes, ageing: Ageing, mut shutdown: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        // No `date` header: gRPC clients ignore it, upstream's grpc-go does not send one,
        // and it is a formatted, changing header on every response.
        .auto_date_header(false)
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(routes));
    tokio::pin!(conn);
    let age = tokio::time::sleep(jittered(ageing.max_age));
    tokio::pin!(age);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = &mut age => {}
        _ = shutdown.changed() => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(ageing.grace, conn).await;
}
